"""The fact lifecycle, the one owner of its marks in the ledger: a fact is superseded,
retracted or expires, and takes its dependents with it. The ledger stays append-only:
every change is a new line, readable by a person, that names the facts it changes:

    ## Flush — 2026-11-30T09:12:44Z
    > source: session=s1 turns=3-5 model=openai:gpt-4.1-mini
    - [user] The user moved to Berlin. (supersedes 2026-11-02.3f9a0c1d)
    - [user] (retracts 2026-11-02.77aa01bc) The user sold their bike.
    - [user] The user is in Tokyo for a conference. (until 2026-12-05)
    - [user] The user takes the U2 to work. (depends 2026-11-30.aa11bb22)
    - [user] (confirms 2026-11-02.0c0ffee0) Still true after the move.

A fact's id is its ledger day and 8 hex digits of its words (``2026-11-02.3f9a0c1d``):
stable for its life (appends never move it, archiving keeps its day) and the same for
every reader. A ledger never holds one fact twice in a day (memory.facts.ledger), so
the id names one line; a record's id hashes the facts it names too. Its recorded time
is its section's header; its authority the line's tag (memory.facts.authority);
``(from ...)`` and ``(until ...)`` say when it holds.

A record may retire only facts recorded before it whose authority ranks no higher than
its own: a tool's claim never retires what the user said; the user and an operator can
retire anything of theirs. Other marks are ignored (and reported as ``refused``).

When a fact is retired, its dependents (stated with ``depends``, or drawn from the same
turns and sharing its subject) need a re-check: derived here, not written, until a
later record confirms, supersedes or retracts them (the consolidation's re-check).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from agent_harness.memory.facts.authority import distinctive, parse_fact, rank, strip_tags
from agent_harness.memory.facts.ledger import parse_header, parse_source

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = [
    "FACT_ID",
    "MARKS",
    "Cleaned",
    "LedgerFact",
    "Lifecycle",
    "Marks",
    "State",
    "Status",
    "clean_marks",
    "ledger_fact_id",
    "lifecycle_of",
    "render_marks",
    "split_marks",
    "strip_ids",
    "strip_marks",
]

#: a ledger fact's id: its day and 8 hex digits of its words
FACT_ID = re.compile(r"\d{4}-\d{2}-\d{2}\.[0-9a-f]{8}")
_ID = FACT_ID.pattern
_DAY = r"\d{4}-\d{2}-\d{2}"
MARKS = ("supersedes", "retracts", "confirms", "depends", "from", "until")
#: one trailing mark: ``(supersedes <id>, <id>)``, ``(until 2026-12-05)``
_TRAILING = re.compile(
    rf"\s*\((supersedes|depends)\s+({_ID}(?:\s*,\s*{_ID})*)\)\s*$"
    rf"|\s*\((from|until)\s+({_DAY})\)\s*$"
)
#: a leading mark: ``(retracts <id>, ...)`` or ``(confirms <id>, ...)``, then the why
_LEADING = re.compile(rf"^\((retracts|confirms)\s+({_ID}(?:\s*,\s*{_ID})*)\)\s*")
_IDS = re.compile(_ID)
State = Literal["current", "superseded", "retracted", "expired"]


@dataclass(frozen=True)
class Marks:
    """What a ledger line says about the lifecycle, its text aside."""

    supersedes: tuple[str, ...] = ()
    retracts: tuple[str, ...] = ()
    confirms: tuple[str, ...] = ()
    depends: tuple[str, ...] = ()
    valid_from: str | None = None
    until: str | None = None

    def changes(self) -> tuple[str, ...]:
        """The facts this line retires."""
        return self.supersedes + self.retracts

    def is_record(self) -> bool:
        """A retraction or confirmation: the line changes facts, it states none."""
        return bool(self.retracts or self.confirms)

    def names(self) -> tuple[str, ...]:
        return self.supersedes + self.retracts + self.confirms + self.depends


def split_marks(body: str) -> tuple[str, Marks]:
    """A fact line's body (its tag aside) as its text and its marks."""
    found: dict[str, object] = {}
    lead = _LEADING.match(body)
    if lead is not None:
        found[lead.group(1)] = tuple(_IDS.findall(lead.group(2)))
        body = body[lead.end() :]
    while (match := _TRAILING.search(body)) is not None:
        kind = match.group(1) or match.group(3)
        if kind in found:
            break  # a mark twice: the text keeps the earlier one
        value = match.group(2) or match.group(4)
        found[kind] = tuple(_IDS.findall(value)) if match.group(1) else value
        body = body[: match.start()]
    marks = Marks(
        supersedes=found.get("supersedes", ()),  # type: ignore[arg-type]
        retracts=found.get("retracts", ()),  # type: ignore[arg-type]
        confirms=found.get("confirms", ()),  # type: ignore[arg-type]
        depends=found.get("depends", ()),  # type: ignore[arg-type]
        valid_from=found.get("from"),  # type: ignore[arg-type]
        until=found.get("until"),  # type: ignore[arg-type]
    )
    return body.strip(), marks


#: a mark as a model may write it: anywhere in the line, ids bracketed or not, or no id
_ANY_MARK = re.compile(
    r"\(\s*(supersedes|retracts|confirms|depends|from|until)\b:?([^()]*)\)", re.IGNORECASE
)
#: an id a model copied into a fact's text (``[2026-12-01.74768b91] The user ...``)
_STRAY_ID = re.compile(rf"\[\s*{_ID}\s*\]:?|\b{_ID}\b:?")


@dataclass(frozen=True)
class Cleaned:
    """A model's fact line: its text, the marks it made, and what was taken out of the
    text because it was a mark or an id the ledger cannot keep (``(depends 4)``, an id
    in the text)."""

    text: str
    marks: Marks
    removed: tuple[str, ...] = ()


def clean_marks(body: str) -> Cleaned:
    """A model's line (its tag aside) as text and marks, as forgiving as a model is
    sloppy: a mark anywhere in the line counts, an id in brackets is an id, and a mark
    naming no id (``(depends 4)``), a second date, and any id left in the text, is removed
    from the text and reported, never stored as part of the fact. (Which ids a call
    may name is its caller's check: memory.jobs.related.checked_marks.) Lines a person
    wrote keep their words: ``split_marks`` reads only the ledger's own form."""
    found: dict[str, list[str]] = {}
    text, removed = _take_out(body, found)

    def ids(kind: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(found.get(kind, ())))

    marks = Marks(
        supersedes=ids("supersedes"),
        retracts=ids("retracts"),
        confirms=ids("confirms"),
        depends=ids("depends"),
        valid_from=next(iter(found.get("from", ())), None),
        until=next(iter(found.get("until", ())), None),
    )
    return Cleaned(text, marks, removed)


def strip_ids(body: str) -> tuple[str, tuple[str, ...]]:
    """``body`` without what names facts (a mark naming ids, or none, and any id): the
    text a MEMORY.md line may hold. Dates stay (``(until ...)`` is a person's words
    there). Returns the text and what was taken out."""
    text, removed = _take_out(body, None)
    return (text, removed) if removed else (body, ())


def _take_out(body: str, found: dict[str, list[str]] | None) -> tuple[str, tuple[str, ...]]:
    """``body`` without its marks and stray ids, and what of them was removed rather
    than read: into ``found`` (kind -> values) when given; without it, every mark that
    names facts is removed and dated marks stay in the text."""
    removed: list[str] = []

    def mark(match: re.Match[str]) -> str:
        kind, value = match.group(1).casefold(), match.group(2)
        if kind in ("from", "until"):
            day = re.search(_DAY, value)
            if day is None or found is None:
                return match.group(0)  # "(until next week)": words, not a mark
            if kind in found:
                removed.append(match.group(0))
            else:
                found[kind] = [day.group(0)]
            return " "
        ids = _IDS.findall(value)
        if not ids or found is None:
            removed.append(match.group(0))
        if found is not None:
            found.setdefault(kind, []).extend(ids)
        return " "

    def stray(match: re.Match[str]) -> str:
        removed.append(match.group(0))
        return " "

    text = _STRAY_ID.sub(stray, _ANY_MARK.sub(mark, body))
    text = re.sub(r"\s+([,.;:!?])", r"\1", " ".join(text.split())).strip(" ,;:-")
    return text, tuple(removed)


def strip_marks(text: str) -> str:
    """``text`` without lifecycle marks: what a save or an edit may not claim (only the
    flush, a correction and the consolidation's re-check write marks, each checked)."""
    return split_marks(text)[0]


def render_marks(text: str, marks: Marks) -> str:
    """A fact line's body with its marks, as the ledger keeps them."""
    lead = ""
    if marks.retracts:
        lead = f"(retracts {', '.join(marks.retracts)}) "
    elif marks.confirms:
        lead = f"(confirms {', '.join(marks.confirms)}) "
    tail = ""
    if marks.supersedes:
        tail += f" (supersedes {', '.join(marks.supersedes)})"
    if marks.depends:
        tail += f" (depends {', '.join(marks.depends)})"
    if marks.valid_from:
        tail += f" (from {marks.valid_from})"
    if marks.until:
        tail += f" (until {marks.until})"
    return f"{lead}{text}{tail}"


def ledger_fact_id(day: str, text: str) -> str:
    """The id of the fact ``text`` (a line or its text: bullet, tag, marks, case and
    spacing aside) in the ledger of ``day``."""
    fact = parse_fact(text)
    body, marks = split_marks(strip_tags(fact.text if fact is not None else text))
    return _words_id(day, _id_words(body, marks))


@dataclass(frozen=True)
class LedgerFact:
    """One fact line of a ledger (or a record: a retraction or confirmation, which
    states no fact of its own)."""

    id: str
    day: str
    line: int  # 1-based, in its ledger
    text: str  # without tag and marks
    authority: str | None
    recorded: str  # its section's header time (ISO), or its day
    marks: Marks
    turns: tuple[tuple[str, int], ...] = ()  # the (session, turn)s its section names

    @property
    def is_record(self) -> bool:
        return self.marks.is_record()


@dataclass
class Status:
    """Where a fact stands: retired by which record and when; or current, perhaps to be
    re-checked because a fact it depends on was retired."""

    state: State = "current"
    by: str | None = None  # the record that retired it
    at: str | None = None  # when: the record's recorded time, or the until day
    recheck: list[str] = field(default_factory=list)  # retired facts it depended on


_CURRENT = Status()
_NO_MARKS = Marks()


@dataclass
class Lifecycle:
    """Every ledger fact of a user and where each stands on a day."""

    facts: dict[str, LedgerFact]
    status: dict[str, Status]
    #: the days read (all, unless the lifecycle was built for a reader: involved_days)
    parsed: set[str] = field(default_factory=set)
    #: marks a record made that its authority does not allow, or that name no earlier
    #: fact: (record id, named id)
    refused: list[tuple[str, str]] = field(default_factory=list)

    def status_of(self, fact_id: str) -> Status:
        """Where a fact stands; a fact of a day not read is current (nothing names it)."""
        return self.status.get(fact_id) or _CURRENT

    def current(self, fact_id: str) -> bool:
        status = self.status.get(fact_id)
        fact = self.facts.get(fact_id)
        return status is not None and status.state == "current" and not (fact and fact.is_record)

    def of_state(self, *states: State) -> list[LedgerFact]:
        return [
            f for f in self.facts.values() if not f.is_record and self.status[f.id].state in states
        ]

    def retired_ids(self) -> set[str]:
        return {i for i, s in self.status.items() if s.state != "current"}

    def to_recheck(self) -> list[LedgerFact]:
        return [
            f
            for f in self.facts.values()
            if self.status[f.id].state == "current" and self.status[f.id].recheck
        ]

    def history(self, fact_id: str) -> list[LedgerFact]:
        """The facts this one superseded (transitively), then the ones that superseded it,
        in recorded order: the fact's story."""
        seen: dict[str, LedgerFact] = {}
        queue = [fact_id]
        while queue:
            one = queue.pop()
            if one in seen or one not in self.facts:
                continue
            seen[one] = self.facts[one]
            queue += list(self.facts[one].marks.supersedes)
            by = self.status[one].by
            if by is not None:
                queue.append(by)
        return sorted(seen.values(), key=lambda f: (f.day, f.line))


_BULLETS = ("-", "*", "+", "•")
#: a line that may carry a mark (a cheap test before the exact parse)
_MARKED = re.compile(r"\((?:supersedes|retracts|confirms|depends|from|until)\s")


def _id_words(body: str, marks: Marks) -> str:
    """What a line's id hashes: a fact's words; a record's words and the facts it names
    (two retractions a day with the same why are two records)."""
    if not marks.is_record():
        return body
    return " ".join([body, *sorted(marks.retracts + marks.confirms)])


def _words_id(day: str, body: str) -> str:
    words = " ".join(strip_tags(body).casefold().split())
    return f"{day}.{hashlib.sha256(words.encode()).hexdigest()[:8]}"


def _facts_of(day: str, text: str) -> Iterable[LedgerFact]:
    recorded = day
    turns_of: tuple[tuple[str, int], ...] = ()
    for number, line in enumerate(text.splitlines(), start=1):
        head = line.lstrip()[:1]
        if head == "#":
            header = parse_header(line)
            if header is not None:
                recorded, turns_of = header[1], ()
            continue
        if head == ">":
            source = parse_source(line)
            if source is not None:
                turns_of = tuple((source.session_id, t) for t in source.turns)
            continue
        if head not in _BULLETS:
            continue
        fact = parse_fact(line)
        if fact is None:
            continue
        if _MARKED.search(fact.text):
            body, marks = split_marks(strip_tags(fact.text))
        else:
            body, marks = strip_tags(fact.text).strip(), _NO_MARKS
        if not body and not marks.is_record():
            continue
        yield LedgerFact(
            id=_words_id(day, _id_words(body, marks)),
            day=day,
            line=number,
            text=body,
            authority=fact.authority,
            recorded=recorded,
            marks=marks,
            turns=turns_of,
        )


def involved_days(ledgers: Mapping[str, str]) -> set[str]:
    """The days whose facts a lifecycle must read: those holding a mark, and those a
    mark names (an id starts with its day). Every other fact is current, with no marks."""
    marked = {day for day, text in ledgers.items() if _MARKED.search(text)}
    named = {i[:10] for day in marked for i in _IDS.findall(ledgers[day])}
    return marked | (named & set(ledgers))


def lifecycle_of(
    ledgers: Mapping[str, str],
    on: str | None = None,
    *,
    whole: bool = True,
    also: Iterable[str] = (),
) -> Lifecycle:
    """The lifecycle of the facts in ``ledgers`` (day -> text, archives included), as it
    stood at the end of day ``on`` (None: everything written; expiry as of the last day).
    Not ``whole``: only the ``involved_days`` (and the days ``also`` names) are read (a
    reader's view, cheap for a large memory with few changes); ``Lifecycle.status_of``
    says current for the rest.
    """
    days = [d for d in sorted(ledgers) if on is None or d <= on]
    wanted = set(days) if whole else involved_days({d: ledgers[d] for d in days})
    wanted |= set(also) & set(days)
    facts: dict[str, LedgerFact] = {}
    for day in days:
        if day in wanted:
            for fact in _facts_of(day, ledgers[day]):
                facts.setdefault(fact.id, fact)
    order = sorted(facts.values(), key=lambda f: (f.day, f.line))
    status = {f.id: Status() for f in order}
    life = Lifecycle(facts, status, parsed=wanted)
    position = {f.id: n for n, f in enumerate(order)}
    for record in order:
        for target in record.marks.changes():
            aim = facts.get(target)
            allowed = (
                aim is not None
                and position[target] < position[record.id]
                and rank(record.authority) >= rank(aim.authority)
            )
            if not allowed or aim is None:
                life.refused.append((record.id, target))
                continue
            if status[target].state != "current":
                continue  # retired already: the first record stands
            state: State = "retracted" if target in record.marks.retracts else "superseded"
            status[target] = Status(state, by=record.id, at=record.recorded)
    today = on or (days[-1] if days else None)
    for fact in order:
        until = fact.marks.until
        if until and today and until < today and status[fact.id].state == "current":
            status[fact.id] = Status("expired", at=until)
    _mark_rechecks(life, order, position)
    return life


def _mark_rechecks(life: Lifecycle, order: list[LedgerFact], position: dict[str, int]) -> None:
    """A current fact that depends on a retired one (stated, or drawn from the same turns
    and sharing its subject) needs a re-check, unless a record after the retirement
    confirmed, superseded or retracted it."""
    retired = [f for f in order if life.status[f.id].state != "current" and not f.is_record]
    if not retired:
        return
    settled: dict[str, int] = {}  # fact -> position of the last record naming it
    for record in order:
        if record.marks.is_record() or record.marks.changes():
            for named in (*record.marks.confirms, *record.marks.changes()):
                settled[named] = position[record.id]
    by_turn: dict[tuple[str, int], list[LedgerFact]] = {}
    for gone in retired:
        for turn in gone.turns:
            by_turn.setdefault(turn, []).append(gone)
    gone_ids = {g.id: g for g in retired}
    words: dict[str, set[str]] = {}

    def terms_of(fact: LedgerFact) -> set[str]:
        if fact.id not in words:
            words[fact.id] = distinctive(fact.text)
        return words[fact.id]

    for fact in order:
        status = life.status[fact.id]
        if fact.is_record or status.state != "current":
            continue
        candidates = {g.id: g for t in fact.turns for g in by_turn.get(t, ())}
        stated = [gone_ids[d] for d in fact.marks.depends if d in gone_ids]
        for gone in [*stated, *candidates.values()]:
            by = life.status[gone.id].by
            if by == fact.id or gone.id in status.recheck:
                continue  # the fact that replaced it depends on nothing it took
            if gone.id not in fact.marks.depends and not terms_of(fact) & terms_of(gone):
                continue
            when = position[by] if by is not None else position[gone.id]
            if settled.get(fact.id, -1) > when:
                continue
            status.recheck.append(gone.id)
