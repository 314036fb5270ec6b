"""The facts a flush is shown: the user's current ledger facts most related to its window.

    flush job (once)   every ledger, archive included: the search engine's cached read
                       (one fresh LIST; GETs of ledgers whose ETag it does not hold, or
                       their months' snapshots when cold), indexed once per ETag
    per chunk          the day's ledger as just read replaces its cached copy
                       -> the ledgers' truth (memory.engine.truth: the lifecycle of the
                          days a change touches; every other fact is current)
                       -> ranked search (the engine's BM25, the indexes the cache keeps)
                          with each message of the window: current facts only, taken
                          round robin (every message's best, then every second best):
                          the whole window as one query drowns a change's one sentence
                          in the words of the others
                       -> then the newest current facts, to fill the room left: a change
                          often shares no word with the fact it changes ("relocated to
                          Bilbao", "lives in Gdansk")
                       -> at most HARNESS_FLUSH_RELATED_FACTS, within RELATED_TOKENS

The model may answer marks naming these ids only (the contract:
docs/design.md#the-flushs-lifecycle-contract); ``checked_marks`` keeps of an answer's
marks those naming a shown fact that the line's authority may retire (the rule
``lifecycle_of`` applies when reading), so the ledger carries no mark it would refuse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.memory.engine.corpus import load_ledgers
from agent_harness.memory.engine.file_index import FileIndex
from agent_harness.memory.engine.fusion import floor, fuse
from agent_harness.memory.engine.index import Hit, search_files
from agent_harness.memory.engine.truth import day_of_path, truth_of
from agent_harness.memory.facts.authority import parse_fact
from agent_harness.memory.facts.authority import rank as authority_rank
from agent_harness.memory.facts.lifecycle import LedgerFact, Marks, ledger_fact_id
from agent_harness.memory.vectors import lines_by_meaning
from agent_harness.paths import ledger_path

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agent_harness.ids import User
    from agent_harness.runtime import Runtime

__all__ = [
    "RELATED_TOKENS",
    "Shown",
    "checked_marks",
    "load_ledger_files",
    "related_facts",
    "without_shown",
]

logger = Logger(child=True)
metrics = Metrics()

#: the shown facts' text stays within this many tokens (the runtime's counter)
RELATED_TOKENS = 450


@dataclass(frozen=True)
class Shown:
    """The current facts a flush call was shown, best first."""

    facts: list[LedgerFact] = field(default_factory=list)

    def by_id(self) -> dict[str, LedgerFact]:
        return {f.id: f for f in self.facts}


def load_ledger_files(rt: Runtime, user: User) -> list[tuple[str, FileIndex]]:
    """Every ledger of ``user`` (archive included), indexed, through the search engine's
    per-container cache; [] when the flush shows no facts (``HARNESS_FLUSH_RELATED_FACTS
    =0``). Always a fresh LIST: a ledger of another day written moments ago (an import's
    flush) holds facts this flush must be shown."""
    if rt.settings.flush_related_facts <= 0:
        return []
    return load_ledgers(rt, user, rt.search_cache)


def related_facts(
    rt: Runtime,
    files: list[tuple[str, FileIndex]],
    day: str,
    ledger_today: str,
    window: Sequence[str],
    user: User | None = None,
) -> Shown:
    """The current facts (as of the end of ``day``, whose ledger is ``ledger_today``)
    most related to the messages of ``window`` (the turns' words, and with an embedding
    model their meaning: "we rewrote the app in Flutter" finds "building the app with
    React Native"), then the newest: at most ``HARNESS_FLUSH_RELATED_FACTS``, their
    texts within ``RELATED_TOKENS``."""
    limit = rt.settings.flush_related_facts
    queries = list(dict.fromkeys(m.strip() for m in window if m.strip()))
    if limit <= 0 or not queries:
        return Shown()
    path = ledger_path(day)
    ledgers = [(p, f) for p, f in files if p != path and (day_of_path(p) or "") <= day]
    if ledger_today:
        ledgers.append((path, FileIndex.build(ledger_today)))
    if not ledgers:
        return Shown()
    truth = truth_of(ledgers, day)
    chosen: dict[str, LedgerFact] = {}
    texts: set[str] = set()  # a text is shown once, under one id (days may repeat it)
    spent = 0

    def offer(fact: LedgerFact | None) -> bool:
        """Take ``fact`` if current and within the budget; False once the limit is met."""
        nonlocal spent
        if fact is None or fact.is_record or fact.id in chosen:
            return True
        if truth.status(fact).state != "current" or _text(fact) in texts:
            return True
        cost = rt.counter.count(f"[{fact.id}] {fact.text}")
        if spent + cost <= RELATED_TOKENS:
            chosen[fact.id] = fact
            texts.add(_text(fact))
            spent += cost
        return len(chosen) < limit and spent < RELATED_TOKENS

    retired = sum(1 for st in truth.life.status.values() if st.state != "current")
    lexical = [search_files(ledgers, q, "ranked", limit + retired) for q in queries]
    hits = _by_meaning(rt, user, ledgers, queries, lexical, limit + retired)
    rankings = [[truth.fact(h.path, h.text) for h in found] for found in hits]
    # every message's best current match first, then the rest round robin, then newest
    for facts in rankings:
        before = len(chosen)
        for fact in facts:
            if not offer(fact):
                return Shown(list(chosen.values()))
            if len(chosen) > before:
                break
    for depth in range(max(map(len, rankings))):
        for facts in rankings:
            if depth < len(facts) and not offer(facts[depth]):
                return Shown(list(chosen.values()))
    for p, index in sorted(ledgers, key=lambda pf: day_of_path(pf[0]) or "", reverse=True):
        for text in reversed(index.lines):
            if parse_fact(text) is not None and not offer(truth.fact(p, text)):
                return Shown(list(chosen.values()))
    return Shown(list(chosen.values()))


def _text(fact: LedgerFact) -> str:
    return " ".join(fact.text.casefold().split()).rstrip(".!")


def without_shown(ledger: str, day: str, shown: Shown) -> tuple[str, int]:
    """The day's ledger without the lines of the facts ``shown`` (a fact is shown once,
    with its id), and the characters those lines took."""
    ids = set(shown.by_id())
    kept: list[str] = []
    removed = 0
    for line in ledger.split("\n"):
        fact = parse_fact(line)
        if fact is not None and ledger_fact_id(day, fact.text) in ids:
            removed += len(line) + 1
        else:
            kept.append(line)
    return "\n".join(kept), removed


def _day(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return date.fromisoformat(value).isoformat()
    except ValueError:
        return None


#: words that bound a fact in time ("until Friday", "for two weeks", "next month", a
#: date): an ``until`` the conversation gave no such words for is the model's invention
_PERIOD = r"(?:days?|weeks?|weekends?|months?|years?|nights?|summer|winter|spring|autumn|fall)"
_TIME_BOUND = re.compile(
    r"\b(?:until|till|through|thru|expir(?:e|es|ed|ing|y)|ends?|ending|before|tomorrow|"
    r"tonight|(?:next|this|coming)\s+" + _PERIOD + r"|"
    r"for\s+(?:a|an|the|one|two|three|four|five|six|several|a\s+few|\d+)\s+(?:\w+\s+)?"
    + _PERIOD
    + r"|(?:mon|tues|wednes|thurs|fri|satur|sun)days?|january|february|march|"
    r"april|june|july|august|september|october|november|december|(?:jan|feb|mar|apr|jun|"
    r"jul|aug|sept?|oct|nov|dec)\.?\s*\d|may\s+\d|\d{4}-\d{2}-\d{2}|\d{1,2}[/.]\d{1,2})\b",
    re.IGNORECASE,
)


def time_bound_in(said: str) -> bool:
    """Does ``said`` (the conversation a flush was given) bound anything in time?"""
    return _TIME_BOUND.search(said) is not None


def _by_meaning(
    rt: Runtime,
    user: User | None,
    ledgers: list[tuple[str, FileIndex]],
    queries: list[str],
    lexical: list[list[Hit]],
    limit: int,
) -> list[list[Hit]]:
    """Each message's hits fused with their meaning (memory.engine.fusion), or the
    lexical ones: no embedding model, or it failed (the job goes on by words)."""
    embedder = rt.embeddings() if user is not None else None
    if embedder is None or user is None:
        return lexical
    vectors = embedder.queries(queries)
    if vectors is None:
        return lexical
    cut = floor(embedder.name, rt.settings.embedding_min_score)
    return [
        fuse(ledgers, q, found, lines_by_meaning(rt, user, ledgers, embedder, v), limit, cut)
        for q, found, v in zip(queries, lexical, vectors, strict=True)
    ]


def checked_marks(
    marks: Marks, shown: Shown, authority: str, day: str, *, bounded: bool = True
) -> Marks:
    """``marks`` of a line the flush's model answered, as the ledger may keep them: ids
    the call was shown, retired only by an authority that ranks as high as the fact's,
    real days (an ``until`` after ``day``, the window's: a fact stated that day has not
    ended by it; and only when the conversation said when something ends, ``bounded``:
    a small model fills an ``until`` field with tomorrow as readily as with today);
    ``confirms`` is not the flush's to write. What is dropped is logged and counted
    (``FlushMarksIgnored``)."""
    known = shown.by_id()
    ignored: list[tuple[str, str, str]] = []

    def keep(kind: str, ids: tuple[str, ...], *, retires: bool) -> tuple[str, ...]:
        out: list[str] = []
        for one in dict.fromkeys(ids):
            target = known.get(one)
            if target is None:
                ignored.append((kind, one, "not shown"))
            elif retires and authority_rank(authority) < authority_rank(target.authority):
                ignored.append((kind, one, f"{authority} may not retire {target.authority}"))
            else:
                out.append(one)
        return tuple(out)

    checked = Marks(
        supersedes=keep("supersedes", marks.supersedes, retires=True),
        retracts=keep("retracts", marks.retracts, retires=True),
        depends=keep("depends", marks.depends, retires=False),
        valid_from=_day(marks.valid_from),
        until=until if bounded and ((until := _day(marks.until)) is None or until > day) else None,
    )
    ignored += [("confirms", one, "not a flush mark") for one in marks.confirms]
    ignored += [
        (k, v, "not a day after the window's, or unsaid" if k == "until" else "not a day")
        for k, v, c in (
            ("from", marks.valid_from, checked.valid_from),
            ("until", marks.until, checked.until),
        )
        if v is not None and c is None
    ]
    if ignored:
        metrics.add_metric("FlushMarksIgnored", MetricUnit.Count, len(ignored))
        logger.warning(
            "flush marks ignored",
            extra={"authority": authority, "ignored": [list(i) for i in ignored]},
        )
    return checked
