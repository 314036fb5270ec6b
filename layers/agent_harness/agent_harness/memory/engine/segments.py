"""The thread-search segment format: one JSON line per message, one file per month.

    index/threads/2026-11.jsonl
        {"s": session, "t": turn, "i": n, "r": role, "at": time, "x": text}

The one owner of that format: ``entries`` writes a turn's rows (their secrets redacted
as the gate redacts a fact's: the derived index never holds a password or a card
number), ``indexed_turns`` reads which turns a segment holds (to skip them on a
redelivered job), ``parse_segment`` reads a segment for search. The calls and results
of the tools that act (the caller's, remote ones) are rows too, as data; the memory
tools' traffic is memory itself and is left out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from agent_harness.memory import MEMORY_TOOLS
from agent_harness.memory.engine.file_index import FileIndex, Links
from agent_harness.memory.engine.index import date_words
from agent_harness.memory.facts.secrets import without_secrets
from agent_harness.memory.jobs.prompts import TOOL_ARG_CHARS

if TYPE_CHECKING:
    from datetime import tzinfo

    from agent_harness.models.base import Message
    from agent_harness.records import TurnRecord

__all__ = [
    "MAX_RECORD_CHARS",
    "Segment",
    "entries",
    "indexed_turns",
    "parse_segment",
    "record_text",
]

MAX_RECORD_CHARS = 4000
_KEY = re.compile(r'^\{"s": "([^"]+)", "t": (\d+),', re.MULTILINE)


def _record_text(message: Message) -> str:
    """What thread search finds of a message: its text, and the calls and results of the
    tools that act, as data."""
    if message.role == "tool":
        if message.name in MEMORY_TOOLS:
            return ""
        return f"[tool_result: {message.name or 'tool'}] {message.content}"
    acting = [c for c in message.tool_calls if c.name not in MEMORY_TOOLS]
    calls = [f"[tool_call: {c.name}({c.arguments[:TOOL_ARG_CHARS]})]" for c in acting]
    return "\n".join([message.content.strip(), *calls]).strip()


def record_text(message: Message) -> str:
    """A message's text as its segment row keeps it (empty: not indexed)."""
    return _record_text(message)[:MAX_RECORD_CHARS] if message.role != "system" else ""


def entries(record: TurnRecord) -> list[str]:
    """The rows of one turn's messages (system messages and empty texts left out), each
    text with its secrets redacted (here, in the post-turn job, not in the turn)."""
    rows = []
    for number, message in enumerate(record.messages):
        text = record_text(message)
        if not text:
            continue
        text = without_secrets(text)
        row = {
            "s": record.session_id,
            "t": record.turn,
            "i": number,
            "r": message.role,
            "at": record.created_at,
            "x": text,
        }
        rows.append(json.dumps(row, ensure_ascii=False))
    return rows


def indexed_turns(segment: str) -> set[tuple[str, int]]:
    """The (session, turn) pairs a segment's text already holds."""
    return {(s, int(t)) for s, t in _KEY.findall(segment)}


@dataclass
class Segment:
    """A month segment, indexed for search: record texts plus their metadata, as columns
    (the sessions and turns are the index's ``links``)."""

    index: FileIndex
    roles: list[str]
    at: list[str]
    size: int

    def meta(self, number: int) -> tuple[str, int, str, str]:
        """Record ``number``'s session, turn, role and time."""
        links = self.index.links
        assert links is not None  # a segment's index is always built with its links
        return (*links.key(number), self.roles[number], self.at[number])


def _day_words(at: str, zone: tzinfo) -> str:
    try:
        day = datetime.fromisoformat(at).astimezone(zone)
    except ValueError:
        return ""
    return date_words(day.year, day.month, day.day)


def parse_segment(path: str, text: str, zone: tzinfo = UTC) -> Segment:
    """A segment's messages, each ranked with the day it was sent (in ``zone``)."""
    texts: list[str] = []
    links = Links([], [])
    roles: list[str] = []
    at: list[str] = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a torn or hand-edited line: skip it, the rest stays searchable
        texts.append(" ".join(str(row.get("x", "")).split()))
        links.sessions.append(str(row.get("s")))
        links.turns.append(int(row.get("t", 0)))
        roles.append(str(row.get("r")))
        at.append(str(row.get("at")))
    days = [_day_words(when, zone) for when in at]
    # a message's neighbours are from its own session
    index = FileIndex.from_lines(texts, len(text), groups=links.sessions, fields=days, links=links)
    return Segment(index=index, roles=roles, at=at, size=len(text))
