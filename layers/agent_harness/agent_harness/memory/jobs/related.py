"""The facts a flush is shown: the user's current ledger facts most related to its window.

    flush job (once)   every ledger, archive included: the search engine's cached read
                       (one LIST, or the container's recent one; GETs of ledgers whose
                       ETag it does not hold, or their months' snapshots when cold)
    per chunk          the day's ledger as just read replaces its cached copy
                       -> lifecycle_of(ledgers, on=day): current facts, not records
                       -> BM25 (memory.engine.index.rank) over their texts with the
                          window's words, best first
                       -> at most HARNESS_FLUSH_RELATED_FACTS, within RELATED_TOKENS

The model may answer marks naming these ids only (the contract:
docs/design.md#the-flushs-lifecycle-contract); ``checked_marks`` keeps of an answer's
marks those naming a shown fact that the line's authority may retire (the rule
``lifecycle_of`` applies when reading), so the ledger carries no mark it would refuse.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.memory.engine.corpus import load_ledgers
from agent_harness.memory.engine.file_index import FileIndex
from agent_harness.memory.engine.index import rank
from agent_harness.memory.facts.authority import parse_fact
from agent_harness.memory.facts.authority import rank as authority_rank
from agent_harness.memory.facts.lifecycle import LedgerFact, Marks, ledger_fact_id, lifecycle_of
from agent_harness.paths import ledger_date

if TYPE_CHECKING:
    from agent_harness.ids import User
    from agent_harness.runtime import Runtime

__all__ = [
    "NEWEST_FACTS",
    "RELATED_TOKENS",
    "Shown",
    "checked_marks",
    "load_ledger_texts",
    "related_facts",
    "without_shown",
]

logger = Logger(child=True)
metrics = Metrics()

#: the shown facts' text stays within this many tokens (the runtime's counter)
RELATED_TOKENS = 450
#: the newest current facts shown even when they share no word with the turns
NEWEST_FACTS = 3


@dataclass(frozen=True)
class Shown:
    """The current facts a flush call was shown, best first."""

    facts: list[LedgerFact] = field(default_factory=list)

    def by_id(self) -> dict[str, LedgerFact]:
        return {f.id: f for f in self.facts}


def load_ledger_texts(rt: Runtime, user: User) -> dict[str, str]:
    """Every ledger of ``user`` (archive included) as day -> text, read through the
    search engine's per-container cache; {} when the flush shows no facts
    (``HARNESS_FLUSH_RELATED_FACTS=0``). Always a fresh LIST: a ledger of another day
    written moments ago (an import's flush) holds facts this flush must be shown."""
    if rt.settings.flush_related_facts <= 0:
        return {}
    files = load_ledgers(rt, user, rt.search_cache)
    texts: dict[str, str] = {}
    for path, index in files:
        day = ledger_date(path)
        if day is not None:
            texts[f"{day[0]:04d}-{day[1]:02d}-{day[2]:02d}"] = "\n".join(index.lines)
    return texts


def related_facts(
    rt: Runtime, ledgers: dict[str, str], day: str, ledger_today: str, window: str
) -> Shown:
    """The current facts (as of the end of ``day``, whose ledger is ``ledger_today``)
    most related to ``window`` (the turns' words): at most
    ``HARNESS_FLUSH_RELATED_FACTS``, their texts within ``RELATED_TOKENS``."""
    limit = rt.settings.flush_related_facts
    if limit <= 0 or not window.strip():
        return Shown()
    texts = {**ledgers, day: ledger_today} if ledger_today else dict(ledgers)
    if not texts:
        return Shown()
    life = lifecycle_of(texts, on=day)
    current = life.of_state("current")
    if not current:
        return Shown()
    index = FileIndex.from_lines([f.text for f in current], sum(len(f.text) for f in current))
    ranked = [current[hit.line - 1] for hit in rank([("", index)], window, limit=len(current))]
    # then the newest: what changes a fact often shares no word with it ("I moved to
    # Berlin" and "lives in Lisbon")
    newest = sorted(current, key=lambda f: (f.recorded, f.day, f.line), reverse=True)
    chosen: list[LedgerFact] = []
    spent = 0
    for fact in dict.fromkeys([*ranked, *newest[:NEWEST_FACTS]]):
        cost = rt.counter.count(f"[{fact.id}] {fact.text}")
        if spent + cost > RELATED_TOKENS:
            continue
        chosen.append(fact)
        spent += cost
        if len(chosen) >= limit:
            break
    return Shown(chosen)


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


def checked_marks(marks: Marks, shown: Shown, authority: str) -> Marks:
    """``marks`` of a line the flush's model answered, as the ledger may keep them: ids
    the call was shown, retired only by an authority that ranks as high as the fact's,
    real days; ``confirms`` is not the flush's to write. What is dropped is logged and
    counted (``FlushMarksIgnored``)."""
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
        until=_day(marks.until),
    )
    ignored += [("confirms", one, "not a flush mark") for one in marks.confirms]
    ignored += [
        (k, v, "not a day")
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
