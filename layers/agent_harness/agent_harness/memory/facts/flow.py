"""Authority by information flow: a model's output claims at most the lowest authority of
the text it was given, never more because its words happen to match someone's.

The flush reads a window of turns in passes, one model call each:

    trusted     the user's own messages (an import's: ``import``), shown with only the
                facts of at least that authority          -> its facts are ``user``'s
    untrusted   tool and MCP results, and the assistant's words beside them, or an
                imported assistant message; shown everything -> the lowest label among
                what it was shown (``tool:<name>``, ``assistant``)

A window with nothing untrusted (the common turn: a message, an answer without tools
other than the memory tools, whose traffic is memory itself and is read in no pass)
costs one call; only a window with tool output or imported assistant text costs two.
An imported reply that only acknowledges the user ("Noted, Sam!", "Congratulations!":
no word beyond the user's own and courtesy, no negation, no identifier) holds no fact
the trusted pass does not read, and costs no second call.
Text planted in a tool result is never in the call whose output is the user's, so it
cannot speak as the user nor retire what the user said (``related.checked_marks``
refuses a mark above its line's authority). The assistant's own replies in a window
without tool output are left out: they are derived from the user's words and memory
already, and extracting them as facts would let them speak for neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent_harness.memory import MEMORY_TRAFFIC
from agent_harness.memory.facts.authority import (
    ASSISTANT,
    IMPORT,
    USER,
    attribute,
    distinctive,
    identifiers_in,
    message_authority,
    negated,
    parse_fact,
    rank,
)
from agent_harness.text import terms

if TYPE_CHECKING:
    from collections.abc import Iterable

    from agent_harness.models.base import Message
    from agent_harness.records import TurnRecord

__all__ = ["FlushPass", "acknowledges", "floor_view", "flush_passes", "label_of", "lowest"]


@dataclass(frozen=True)
class FlushPass:
    """One model call of a flush: the turns with only the messages it may see, and the
    authorities of what it sees (its output claims the lowest of them)."""

    turns: list[TurnRecord]
    authorities: tuple[str, ...]
    trusted: bool

    @property
    def floor(self) -> str:
        return lowest(self.authorities)

    def messages(self) -> list[str]:
        return [m.content for r in self.turns for m in r.messages if m.content]


def lowest(authorities: Iterable[str]) -> str:
    """The least trusted of ``authorities`` (on a tie, the first)."""
    ordered = list(authorities)
    return min(ordered, key=rank) if ordered else ASSISTANT


def _authority(message: Message, record: TurnRecord) -> str | None:
    return message_authority(message.role, message.name, imported=record.source == "import")


#: words a reply may add to the user's own and still only acknowledge them (stemmed)
COURTESY = frozenset(
    terms(
        "noted note ok okay sure thanks thank welcome great good nice lovely glad happy "
        "congratulations congrats wonderful awesome fantastic perfect cool fine right yes "
        "hello hi hey bye goodbye see later soon luck enjoy got understood will keep mind "
        "remember done absolutely course choice sounds fun exciting news sorry hear "
        "now too also really very indeed definitely ll ve re tell telling let letting "
        "know knowing share sharing"
    )
)


def acknowledges(reply: str, said: str) -> bool:
    """Does ``reply`` only acknowledge ``said`` (the user's words of the window): every
    word that says what is the user's own or courtesy, with no negation and no identifier
    the user did not give? Such a reply states nothing the user's pass does not read."""
    words = distinctive(reply)
    if not words:
        return True
    if negated(reply) or not identifiers_in(reply, said):
        return False
    return words <= COURTESY | set(terms(said))


def _untrusted(message: Message, record: TurnRecord, said: str) -> bool:
    if message.role == "tool":
        return message.name not in MEMORY_TRAFFIC
    if message.role != "assistant" or record.source != "import" or not message.content:
        return False
    return not acknowledges(message.content, said)


def flush_passes(records: list[TurnRecord]) -> list[FlushPass]:
    """The passes of a window: the trusted one when a user spoke, the untrusted one when
    a tool answered or an imported assistant said more than an acknowledgement (see the
    module)."""
    trusted: list[TurnRecord] = []
    untrusted: list[TurnRecord] = []
    trusted_by: list[str] = []
    untrusted_by: list[str] = []
    said = "\n".join(
        m.content for r in records for m in r.messages if m.role == "user" and m.content
    )
    any_untrusted = any(_untrusted(m, r, said) for r in records for m in r.messages)
    for record in records:
        mine = [m for m in record.messages if m.role == "user" and m.content]
        if mine:
            trusted.append(record.model_copy(update={"messages": mine}))
            trusted_by.append(IMPORT if record.source == "import" else USER)
        if not any_untrusted:
            continue
        theirs = [
            m
            for m in record.messages
            if _untrusted(m, record, said)
            or (m.role == "assistant" and (m.content or m.tool_calls))
        ]
        if theirs:
            untrusted.append(record.model_copy(update={"messages": theirs}))
            untrusted_by += [a for m in theirs if (a := _authority(m, record)) is not None]
    passes = []
    if trusted:
        passes.append(FlushPass(trusted, tuple(dict.fromkeys(trusted_by)), trusted=True))
    if untrusted:
        passes.append(FlushPass(untrusted, tuple(dict.fromkeys(untrusted_by)), trusted=False))
    return passes


def label_of(fact: str, flush_pass: FlushPass) -> str:
    """The authority a line of ``flush_pass``'s answer is written with: its floor; among
    several of that same rank (two tools), the one whose words hold the line (a choice
    between equals: it never raises a line above the floor)."""
    floor = flush_pass.floor
    equals = [a for a in flush_pass.authorities if rank(a) == rank(floor)]
    if len(equals) < 2:
        return floor
    said: dict[str, list[str]] = {a: [] for a in equals}
    for record in flush_pass.turns:
        for message in record.messages:
            who = _authority(message, record)
            if who in said:
                said[who].append(message.content)
    chosen = attribute(fact, {a: "\n".join(w) for a, w in said.items()}, fallback=floor)
    return chosen if chosen in said else floor


def floor_view(text: str, floor: str) -> str:
    """``text`` (MEMORY.md, a ledger) with only the fact lines of at least ``floor``'s
    authority: what a trusted call may be shown (headings and source lines stay)."""
    wanted = rank(floor)
    kept = []
    for line in text.split("\n"):
        fact = parse_fact(line)
        if fact is None or rank(fact.authority) >= wanted:
            kept.append(line)
    return "\n".join(kept)
