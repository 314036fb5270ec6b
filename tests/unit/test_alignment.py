"""Ranking reads a long section's facts with the turns they match (memory.engine.alignment), not
with every turn the section names; short sections, and facts that match no turn, are
read whole; the ledger's provenance is untouched."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from agent_harness.agent.importer import ImportedMessage, import_history
from agent_harness.ids import User
from agent_harness.memory.engine import alignment, snapshots
from agent_harness.memory.engine.alignment import TurnWords, aligned_sections
from agent_harness.memory.engine.cache import MemoryIndexCache
from agent_harness.memory.engine.file_index import FileIndex, Links
from agent_harness.memory.engine.index import LinkedIndexes, search_files
from agent_harness.memory.jobs.flush import run_post_turn_job
from agent_harness.memory.search import search_memory
from agent_harness.memory.threads import search_threads
from agent_harness.text import terms
from tests.fakes import ScriptedModel, make_runtime

#: eight turns of one session: pottery in Lisbon first, a hike at the end
MESSAGES = [
    (1, "We booked the pottery class in Lisbon for Saturday"),
    (2, "the weather report promises sun all week"),
    (3, "my sister phoned about the wedding seating plan"),
    (4, "the printer at work jammed again"),
    (5, "we watched a documentary about whales"),
    (6, "the bakery on the corner closed early"),
    (7, "I renewed my library card"),
    (8, "my knee hurt after hiking the ridge trail"),
]


def segment(messages: list[tuple[int, str]] = MESSAGES) -> FileIndex:
    links = Links(["trip"] * len(messages), [turn for turn, _ in messages])
    return FileIndex.from_lines([text for _, text in messages], 0, links=links)


def ledger(turns: str = "1-8") -> FileIndex:
    return FileIndex.build(
        f"## Flush — 2026-03-02T10:00:00Z\n> source: session=trip turns={turns} model=m\n"
        "- takes a pottery class\n- her knee hurts after hiking\n- likes quiet mornings\n"
    )


def test_a_fact_is_read_with_the_turns_it_matches_not_the_whole_session() -> None:
    turns = LinkedIndexes([segment()])
    files = [("memory/2026-03-02.md", ledger())]

    hits = search_files(files, "Lisbon", "ranked", 5, turns, 0.5)

    # "Lisbon" is only in turn 1: the pottery fact is read with turns 1-3, the knee fact
    # with turns 6-8, so the knee fact is not found by it (the fact matching no turn is
    # read with the whole session, thinly)
    texts = [h.text for h in hits]
    assert texts[0] == "- takes a pottery class"
    assert "- her knee hurts after hiking" not in texts


def test_with_alignment_off_every_fact_reads_the_whole_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(alignment, "ALIGN_ABOVE", 10**6)
    turns = LinkedIndexes([segment()])
    files = [("memory/2026-03-02.md", ledger())]

    hits = search_files(files, "Lisbon", "ranked", 5, turns, 0.5)

    assert {h.text for h in hits} == {
        "- takes a pottery class",
        "- her knee hurts after hiking",
        "- likes quiet mornings",
    }


def test_a_message_is_read_with_the_facts_aligned_to_its_turn() -> None:
    facts = LinkedIndexes([ledger()], [segment()])
    unaligned = LinkedIndexes([ledger()])  # no messages to align with: whole sections
    (pottery,) = terms("pottery")

    assert set(facts.counts(pottery)) == {("trip", 1), ("trip", 2), ("trip", 3)}
    assert set(unaligned.counts(pottery)) == {("trip", n) for n in range(1, 9)}
    # a window of three turns shares the fact less thinly than eight
    assert facts.counts(pottery)[("trip", 1)] > unaligned.counts(pottery)[("trip", 1)]
    # the knee fact's words reach the message of the hike, and not the pottery one
    (knee,) = terms("knee")
    assert ("trip", 8) in facts.counts(knee) and ("trip", 1) not in facts.counts(knee)


def test_a_fact_matching_no_turn_keeps_the_whole_section() -> None:
    [(section, parts)] = aligned_sections(ledger(), TurnWords([segment()]))

    by_text = {ledger().lines[n]: section[lo:hi] for records, lo, hi in parts for n in records}
    assert len(by_text["- likes quiet mornings"]) == 8
    assert [t for _, t in by_text["- takes a pottery class"]] == [1, 2, 3]
    assert [t for _, t in by_text["- her knee hurts after hiking"]] == [6, 7, 8]


def test_a_section_short_enough_is_left_as_it_is() -> None:
    short = ledger(turns="1-5")
    [(records, turns)] = short.linked_groups()
    assert aligned_sections(short, TurnWords([segment()])) == [(turns, [(records, 0, 5)])]


def test_a_section_with_a_turn_not_indexed_is_read_whole_until_it_is() -> None:
    f = ledger()
    partial = TurnWords([segment(MESSAGES[:-1])])  # turn 8 not indexed yet

    [(_, whole)] = aligned_sections(f, partial)
    assert len(whole) == 1 and whole[0][1:] == (0, 8) and f.aligned == {}
    [(_, split)] = aligned_sections(f, TurnWords([segment()]))
    assert len(split) == 3 and len(f.aligned) == 1  # remembered once every turn is there
    # the ledger's own sections (its provenance) are unchanged
    assert f.keys_of(3) == tuple(("trip", n) for n in range(1, 9))


def imported(rt: Any, alice: User) -> str:
    """An imported session of the eight turns, flushed by its post-turn job into one
    section naming them all: the ledger's path."""
    start = rt.clock.now()
    messages = [
        ImportedMessage(role=role, content=text, timestamp=start + timedelta(minutes=n))
        for n, (_, said) in enumerate(MESSAGES)
        for role, text in (("user", said), ("assistant", "I see."))
    ]
    import_history(rt, alice, "trip", messages)
    while rt.queue.post_turn:
        run_post_turn_job(rt, rt.queue.post_turn.pop(0))
    [ledger_path] = [i.path for i in rt.store.list(alice, "memory/")]
    assert "turns=1-8" in rt.store.text(alice, ledger_path)  # provenance: every turn
    return ledger_path


FACTS = "- takes a pottery class\n- her knee hurts after hiking"


def test_an_imported_sessions_flush_is_searched_fact_by_fact() -> None:
    """The product's path: an imported session flushed in one section naming its eight
    turns, searched with memory_search and thread_search."""
    # two calls: the user's words, then the imported assistant's
    rt = make_runtime(memory=ScriptedModel(FACTS, "NO_REPLY"))
    alice = User.from_id("alice")
    imported(rt, alice)

    hits = search_memory(rt, alice, "Lisbon", "ranked", 5, MemoryIndexCache())
    assert [h.text for h in hits] == ["- [import] takes a pottery class"]
    # the other way: the hike's message is found by the knee fact's words, the pottery
    # message is not
    found = search_threads(rt, alice, "knee hurts", "ranked", 5, MemoryIndexCache())
    assert found and found[0].turn == 8 and all(h.turn >= 6 for h in found)


def test_a_snapshot_keeps_the_split_and_ranks_the_same() -> None:
    f = ledger()
    aligned_sections(f, TurnWords([segment()]))
    restored = snapshots.decode_ledger(snapshots.encode(f, '"e1"'))

    assert restored.aligned == f.aligned != {}
    assert not alignment.unaligned(restored)
    turns = LinkedIndexes([segment()])
    for query in ("Lisbon", "ridge trail", "pottery"):
        ranked = [
            search_files([("d.md", x)], query, "ranked", 5, turns, 0.5) for x in (f, restored)
        ]
        assert ranked[0] == ranked[1]


def test_a_damaged_split_in_a_snapshot_is_worked_out_again() -> None:
    f = ledger()
    aligned_sections(f, TurnWords([segment()]))
    entry = snapshots.encode(f, '"e1"') | {"aligned": "[[3, 5, 2, [[[99], 0, 5]]]]"}
    restored = snapshots.decode_ledger(entry)

    assert restored.aligned == {} and alignment.unaligned(restored)
    hits = search_files(
        [("d.md", restored)], "Lisbon", "ranked", 5, LinkedIndexes([segment()]), 0.5
    )
    assert "- her knee hurts after hiking" not in [h.text for h in hits]


def test_the_post_turn_job_writes_the_split_so_a_cold_query_does_not_redo_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # two calls: the user's words, then the imported assistant's
    rt = make_runtime(memory=ScriptedModel(FACTS, "NO_REPLY"))
    alice = User.from_id("alice")
    path = imported(rt, alice)
    [name] = [i.path for i in rt.store.list(alice, "index/ranked/") if "/memory-" in i.path]
    entry = snapshots.read(rt.store.text(alice, name))[path]
    assert "aligned" in entry

    def no_tokenizing(self: TurnWords, key: object) -> None:
        raise AssertionError("a cold query re-aligned a section its snapshot holds")

    monkeypatch.setattr(TurnWords, "get", no_tokenizing)
    hits = search_memory(rt, alice, "Lisbon", "ranked", 5, MemoryIndexCache())  # cold
    assert [h.text for h in hits] == ["- [import] takes a pottery class"]


def test_a_section_whose_facts_all_match_one_window_is_read_with_that_window_both_ways() -> None:
    """One part, but narrower than the section: still a split, for both directions."""
    only = FileIndex.build(
        "## Flush — 2026-03-02T10:00:00Z\n> source: session=trip turns=1-8 model=m\n"
        "- takes a pottery class\n"
    )
    (pottery,) = terms("pottery")

    facts = LinkedIndexes([only], [segment()])

    assert set(facts.counts(pottery)) == {("trip", 1), ("trip", 2), ("trip", 3)}
    hits = search_files(
        [("d.md", only)], "ridge trail", "ranked", 5, LinkedIndexes([segment()]), 0.5
    )
    assert hits == []  # turn 8's words do not reach a fact read with turns 1-3
