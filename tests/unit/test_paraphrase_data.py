"""bench/data/paraphrase.json, the paraphrase recall benchmark's hand-written data: its
size, its ids and split, and that no question shares a term with its fact (so a lexical
search has nothing to match it on)."""

from __future__ import annotations

from collections import Counter

from agent_harness.memory.facts.gate import Candidate, Policy, admit
from agent_harness.text import terms
from bench.paraphrase_recall import (
    QUICK_DISTRACTORS,
    QUICK_PER_SPLIT,
    SPLITS,
    dataset,
    rank,
    raw_data,
    save_order,
)

#: the issue's minimums, and ours for the written data
MIN_FACTS, MIN_DISTRACTORS, MIN_IRRELEVANT, MIN_DOMAINS = 160, 80, 10, 12


def _shared(a: str, b: str) -> set[str]:
    """Terms two texts share, with the product's stemming, and, stricter, the first five
    letters of their longer terms ("allergy" and "allergic" stem apart but say one word)."""
    ta, tb = set(terms(a)), set(terms(b))
    return (ta & tb) | ({t[:5] for t in ta if len(t) >= 5} & {t[:5] for t in tb if len(t) >= 5})


def test_the_data_has_enough_facts_distractors_irrelevant_questions_and_domains() -> None:
    data = dataset()
    assert len(data.facts) >= MIN_FACTS
    assert len(data.distractors) >= MIN_DISTRACTORS
    assert len(data.irrelevant) >= MIN_IRRELEVANT
    domains = Counter(f.domain for f in data.facts)
    assert len(domains) >= MIN_DOMAINS
    assert min(domains.values()) >= 5, domains
    assert all(f.question for f in data.facts)


def test_every_id_and_text_is_unique() -> None:
    data = dataset()
    ids = [f.id for f in (*data.facts, *data.distractors)] + [i for i, _ in data.irrelevant]
    assert len(ids) == len(set(ids))
    texts = [f.text.casefold() for f in (*data.facts, *data.distractors)]
    assert len(texts) == len(set(texts))
    questions = [f.question.casefold() for f in data.facts] + [q for _, q in data.irrelevant]
    assert len(questions) == len({q.casefold() for q in questions})


def test_no_question_shares_a_term_with_its_fact() -> None:
    sharing = {
        f.id: sorted(_shared(f.text, f.question))
        for f in dataset().facts
        if _shared(f.text, f.question)
    }
    assert not sharing


def test_no_fact_text_is_inside_another_line() -> None:
    """A hit finds a fact when its text contains the fact's: no other line may."""
    data = dataset()
    lines = [f.text for f in (*data.facts, *data.distractors)]
    inside = [(a, b) for a in lines for b in lines if a != b and a in b]
    assert not inside


def test_the_split_covers_every_fact_once_in_halves_that_cover_every_domain() -> None:
    raw, data = raw_data(), dataset()
    tune, held_out = raw["split"]["tune"], raw["split"]["held_out"]
    ids = {f.id for f in data.facts}
    assert len(tune) == len(set(tune)) and len(held_out) == len(set(held_out))
    assert not set(tune) & set(held_out)
    assert set(tune) | set(held_out) == ids
    assert abs(len(tune) - len(held_out)) <= 1
    for half in (tune, held_out):
        assert {f.domain for f in data.facts if f.id in half} == {f.domain for f in data.facts}


def test_every_line_is_saved_as_written() -> None:
    """The save gate keeps each line whole: nothing held, redacted or rewritten, so the
    stored line (``- [save:api] <text>``) holds the text."""
    data = dataset()
    for fact in (*data.facts, *data.distractors):
        admitted = admit([Candidate(fact.text, "save:api")], Policy(pii=frozenset({"phone"})))
        assert admitted.lines == [f"- [save:api] {fact.text}"], fact.id
        assert not admitted.held, fact.id


def test_the_quick_subset_is_seeded_and_takes_from_both_halves() -> None:
    quick = dataset(quick=True)
    assert quick == dataset(quick=True)
    assert Counter(quick.split[f.id] for f in quick.facts) == dict.fromkeys(SPLITS, QUICK_PER_SPLIT)
    assert len(quick.distractors) == QUICK_DISTRACTORS
    assert quick.irrelevant == dataset().irrelevant
    assert sorted(save_order(quick)) == sorted(f.text for f in (*quick.facts, *quick.distractors))
    assert save_order(quick) == save_order(dataset(quick=True))


def test_a_hit_finds_its_fact_by_the_text_it_holds() -> None:
    fact = "I bank with Monzo."
    hits = ("- [save:api] I bank with Lidl.", f"- [save:api] {fact}")
    assert rank(fact, hits) == 2
    assert rank(fact, hits[:1]) == 0
    assert rank(fact, ("x",) * 5 + (f"- [save:api] {fact}",)) == 0  # only the first five
