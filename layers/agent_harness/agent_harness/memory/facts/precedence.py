"""Which fact wins when consolidation rewrites MEMORY.md: authority before recency.

The memory model merges the new ledger facts into MEMORY.md in its own words; what it
answers is then checked here, deterministically, before it may be written:

    authority   by where the words came from (memory.facts.flow), never the tag the
                model wrote nor the words a line shares with someone: a line that is an
                exact copy of an input fact keeps that fact's authority; any other line
                is the call's, the lowest authority among everything it was shown (all
                trusted: the lowest trusted one; one tool line: that tool's)
    supported   a line whose words no input holds (a merge summarises; it does not
                author) is not written, and counted (``unsupported_dropped``)
    the gate    like any write (facts.gate.admit_document)
    contradict  a line of lower authority that says what a ``user`` or ``operator``
                fact says with a value changed ("black tea" for "green tea") is left
                out: it stays in its ledger, it does not enter MEMORY.md
    replace     a ``user`` or ``operator`` fact the answer dropped comes back, under its
                heading: only a retirement record in the ledgers retires it (the
                consolidation then leaves out what they retired), never a new line that
                shares its words; a lower line that only rewords it (each holds most of
                the other's words) is left out, so the original is not said twice
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent_harness.memory.facts.authority import (
    ASSISTANT,
    PROTECTED,
    SUPPORT,
    Fact,
    distinctive,
    parse_fact,
    rank,
    strip_tags,
    support,
)
from agent_harness.memory.facts.gate import admit_document
from agent_harness.memory.facts.lifecycle import split_marks

if TYPE_CHECKING:
    from agent_harness.memory.facts.gate import Admitted, Policy

__all__ = ["CHANGED_WORDS", "merge_checked", "said_by", "same_subject"]

#: a line states the same thing as a fact with another value when they share at least
#: two subject words (distinctive words without numbers and codes) and each has at most
#: this many the other lacks ("green tea" / "black tea"; "is Dana Ruiz" / "is Sam Ortiz")
CHANGED_WORDS = 2


def said_by(*documents: str) -> dict[str, str]:
    """Fact lines grouped by authority ("" for lines without one): what each authority
    said, for ``attribute``."""
    said: dict[str, list[str]] = {}
    for document in documents:
        for line in document.splitlines():
            fact = parse_fact(line)
            if fact is not None:
                said.setdefault(fact.authority or "", []).append(fact.text)
    return {authority: "\n".join(lines) for authority, lines in said.items()}


def _subject(text: str) -> set[str]:
    return {w for w in distinctive(text) if not any(c.isdigit() for c in w)}


def same_subject(fact: str, other: str) -> bool:
    """Does ``other`` say what ``fact`` says, about the same thing, with at most a value
    changed? ("lives in Lyon" and "Lyon is sunny" share a word, not a subject; two
    people's facts about adoption share two words and differ in more.)"""
    wanted, given = _subject(fact), _subject(other)
    shared = len(wanted & given)
    changed = max(len(wanted - given), len(given - wanted))
    return shared >= 2 and changed <= CHANGED_WORDS


@dataclass
class _Line:
    text: str  # as stored
    fact: Fact | None


def merge_checked(
    answer: str, *, current: str, entries: str, policy: Policy
) -> tuple[str, Admitted]:
    """The memory model's merged MEMORY.md, checked: authorities from the facts' words,
    the gate, no lower fact over a ``user`` or ``operator`` one. Returns the document to
    write and what the gate did (``counts`` also has ``unsupported_dropped``,
    ``contradictions_dropped``, ``rewordings_dropped`` and ``protected_restored``)."""
    copies, floor, inputs = _inputs(current, entries)

    def assign(text: str) -> str | None:
        return copies.get(_key(text), floor)

    document, admitted = admit_document(answer, previous=current, assign=assign, policy=policy)
    lines: list[_Line] = []
    for raw in document.splitlines():
        fact = parse_fact(raw)
        if (
            fact is not None
            and _key(fact.text) not in copies
            and support(fact.text, inputs) < SUPPORT
        ):
            admitted.counts["unsupported_dropped"] += 1
            continue
        lines.append(_Line(raw, fact))
    protected = [f for f in map(parse_fact, current.splitlines()) if f and f.authority in PROTECTED]

    kept: list[_Line] = []
    for line in lines:
        fact = line.fact
        over = fact is not None and any(
            rank(fact.authority) < rank(p.authority)
            and same_subject(p.text, fact.text)
            and distinctive(p.text) != distinctive(fact.text)
            for p in protected
        )
        if over:
            admitted.counts["contradictions_dropped"] += 1
        else:
            kept.append(line)
    for p in protected:
        # a trusted fact the answer dropped comes back: only a retirement record in the
        # ledgers retires it (the caller drops those: consolidate's truth), never a new
        # line that shares its words
        if not _represented(p, kept):
            reworded = [line for line in kept if _rewords(line, p)]
            for line in reworded:  # the lower rewording says nothing the original does not
                kept.remove(line)
            admitted.counts["rewordings_dropped"] += len(reworded)
            _restore(p, kept, current)
            admitted.counts["protected_restored"] += 1
    text = "\n".join(line.text for line in kept).strip("\n")
    return (text + "\n" if text else ""), admitted


def _key(text: str) -> str:
    """A fact's words for telling a copy: marks, case, spacing and end stop aside."""
    return " ".join(split_marks(strip_tags(text))[0].casefold().split()).rstrip(".!")


def _inputs(current: str, entries: str) -> tuple[dict[str, str | None], str | None, str]:
    """What a consolidation call was shown: each input fact's words -> its authority (the
    highest, for words two authorities both hold), the lowest authority among them (the
    call's), and every input fact's text (what a line of the answer must come from)."""
    copies: dict[str, str | None] = {}
    seen: list[str | None] = []
    texts: list[str] = []
    for document in (current, entries):
        for line in document.splitlines():
            fact = parse_fact(line)
            if fact is None:
                continue
            key = _key(fact.text)
            if key not in copies or rank(fact.authority) > rank(copies[key]):
                copies[key] = fact.authority
            seen.append(fact.authority)
            texts.append(fact.text)
    floor = min(seen, key=rank) if seen else ASSISTANT
    return copies, floor, "\n".join(texts)


def _represented(fact: Fact, lines: list[_Line]) -> bool:
    return any(
        line.fact is not None
        and rank(line.fact.authority) >= rank(fact.authority)
        and support(fact.text, line.fact.text) >= SUPPORT
        for line in lines
    )


def _rewords(line: _Line, fact: Fact) -> bool:
    """Is ``line`` a lower restatement of ``fact`` (each holds most of the other's
    distinctive words, identifiers verbatim, the same negation)? A merge that reworded a
    trusted fact beside lower text carries the lower label; the original comes back and
    the copy would only repeat it."""
    other = line.fact
    return (
        other is not None
        and rank(other.authority) < rank(fact.authority)
        and support(other.text, fact.text) >= SUPPORT
        and support(fact.text, other.text) >= SUPPORT
    )


def _restore(fact: Fact, lines: list[_Line], current: str) -> None:
    """Put ``fact`` back under the heading it had in ``current`` (at the end of that
    heading's lines), or at the end when the answer has no such heading."""
    heading = None
    for line in current.splitlines():
        if line.startswith("#"):
            heading = line.strip()
        elif parse_fact(line) == fact:
            break
    at = len(lines)
    if heading is not None:
        starts = [i for i, line in enumerate(lines) if line.text.strip() == heading]
        if starts:
            at = starts[0] + 1
            while at < len(lines) and not lines[at].text.startswith("#"):
                at += 1
            while at > starts[0] + 1 and not lines[at - 1].text.strip():
                at -= 1
    lines.insert(at, _Line(fact.line(), fact))
