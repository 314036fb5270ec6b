"""thread_search: every past message of a user, searchable without reading turn objects.

The post-turn job appends the messages of each new turn to a derived search segment, one
per month (in the configured zone):

    index/threads/2026-11.jsonl   one line per message:
        {"s": session, "t": turn, "i": n, "r": role, "at": time, "x": text}

A record is one log entry (one message). Segments are appended with the same CAS loop
as ledgers, in order per user (FIFO group), and de-duplicated by (session, turn), so a
redelivered job adds nothing. They are derived data: running ``index_turns`` over a
user's turn objects recreates a lost or damaged segment. A search is one LIST plus one
GET per month whose ETag is not cached (DESIGN §7), with the match modes of
memory_search. The calls and results of the tools that act (the caller's, remote ones)
are indexed as data, results with role ``tool``; the memory tools' traffic is not. The
same segments give ranked memory_search the messages of the turns a ledger section names
(``load_turn_texts``); the other way round, ranked thread_search scores a message with the
ledger facts naming its turn (one more LIST, of memory/, and GETs of the ledgers not
cached).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from itertools import groupby
from typing import TYPE_CHECKING

from agent_harness.memory import MEMORY_TOOLS
from agent_harness.memory import search as ranking
from agent_harness.memory.prompts import TOOL_ARG_CHARS
from agent_harness.memory.search import (
    Hit,
    Mode,
    _FileIndex,
    date_words,
    linked_texts,
    load_cached,
    load_fact_texts,
    search_files,
)

if TYPE_CHECKING:
    from datetime import tzinfo
    from zoneinfo import ZoneInfo

    from agent_harness.ids import User
    from agent_harness.memory.search import LinkedTexts, MemoryIndexCache
    from agent_harness.models.base import Message
    from agent_harness.records import TurnRecord
    from agent_harness.runtime import Runtime

__all__ = [
    "ThreadHit",
    "format_thread_hits",
    "index_turns",
    "load_turn_texts",
    "search_threads",
    "segment_path",
]

SEGMENT_DIR = "index/threads"
MAX_RECORD_CHARS = 4000
_KEY = re.compile(r'^\{"s": "([^"]+)", "t": (\d+),', re.MULTILINE)


@dataclass(frozen=True)
class ThreadHit:
    session_id: str
    turn: int
    role: str
    at: str
    text: str
    score: float | None = None


def segment_path(record: TurnRecord, zone: ZoneInfo) -> str:
    return f"{SEGMENT_DIR}/{record.created().astimezone(zone):%Y-%m}.jsonl"


def _record_text(message: Message) -> str:
    """What thread search finds of a message: its text, and the calls and results of the
    tools that act (the caller's and remote ones), as data; memory tools' traffic is
    memory itself and is left out."""
    if message.role == "tool":
        if message.name in MEMORY_TOOLS:
            return ""
        return f"[tool_result: {message.name or 'tool'}] {message.content}"
    acting = [c for c in message.tool_calls if c.name not in MEMORY_TOOLS]
    calls = [f"[tool_call: {c.name}({c.arguments[:TOOL_ARG_CHARS]})]" for c in acting]
    return "\n".join([message.content.strip(), *calls]).strip()


def _entries(record: TurnRecord) -> list[str]:
    rows = []
    for number, message in enumerate(record.messages):
        text = _record_text(message) if message.role != "system" else ""
        if not text:
            continue
        row = {
            "s": record.session_id,
            "t": record.turn,
            "i": number,
            "r": message.role,
            "at": record.created_at,
            "x": text[:MAX_RECORD_CHARS],
        }
        rows.append(json.dumps(row, ensure_ascii=False))
    return rows


def indexed_turns(segment: str) -> set[tuple[str, int]]:
    return {(s, int(t)) for s, t in _KEY.findall(segment)}


def index_turns(rt: Runtime, user: User, records: list[TurnRecord]) -> int:
    """Append the messages of ``records`` to their month segments, skipping turns a
    segment already holds (re-checked after every lost race). Returns entries added."""
    added = 0
    ordered = sorted(records, key=lambda r: (segment_path(r, rt.settings.zone), r.turn))
    for path, group in groupby(ordered, key=lambda r: segment_path(r, rt.settings.zone)):
        batch = list(group)
        written = [0]

        def build(
            existing: str, batch: list[TurnRecord] = batch, written: list[int] = written
        ) -> str | None:
            done = indexed_turns(existing)
            rows = [row for r in batch if (r.session_id, r.turn) not in done for row in _entries(r)]
            written[0] = len(rows)
            return "".join(f"{row}\n" for row in rows) or None

        if rt.store.append(user, path, build) is not None:
            added += written[0]
    return added


@dataclass
class _Segment:
    """A month segment, indexed for search: record texts plus their metadata."""

    index: _FileIndex
    meta: list[tuple[str, int, str, str]]  # session, turn, role, at
    size: int


def _day_words(at: str, zone: tzinfo) -> str:
    try:
        day = datetime.fromisoformat(at).astimezone(zone)
    except ValueError:
        return ""
    return date_words(day.year, day.month, day.day)


def _load_segment(path: str, text: str, zone: tzinfo = UTC) -> _Segment:
    """A segment's messages, each ranked with the day it was sent (in ``zone``)."""
    texts: list[str] = []
    meta: list[tuple[str, int, str, str]] = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a torn or hand-edited line: skip it, the rest stays searchable
        texts.append(" ".join(str(row.get("x", "")).split()))
        meta.append(
            (str(row.get("s")), int(row.get("t", 0)), str(row.get("r")), str(row.get("at")))
        )
    sessions = [m[0] for m in meta]  # a message's neighbours are from its own session
    days = [_day_words(m[3], zone) for m in meta]
    turns = [(m[0], m[1]) for m in meta]
    index = _FileIndex.from_lines(texts, len(text), groups=sessions, fields=days, links=turns)
    return _Segment(index=index, meta=meta, size=len(text))


def _segments(rt: Runtime, user: User, cache: MemoryIndexCache) -> list[tuple[str, _Segment]]:
    parse = partial(_load_segment, zone=rt.settings.zone)
    return load_cached(rt, user, cache, SEGMENT_DIR, ".jsonl", parse)


def load_turn_texts(rt: Runtime, user: User, cache: MemoryIndexCache) -> LinkedTexts:
    """Every indexed turn's messages (one LIST, GETs of the months not cached)."""
    segments = [segment.index for _, segment in _segments(rt, user, cache)]
    return linked_texts(cache, user, "#turn-texts", segments)


def search_threads(
    rt: Runtime, user: User, query: str, mode: Mode, limit: int, cache: MemoryIndexCache
) -> list[ThreadHit]:
    if not query or not query.strip():
        return []
    segments = _segments(rt, user, cache)
    by_path = dict(segments)
    facts, weight = None, ranking.FACT_WEIGHT
    if mode == "ranked" and weight:
        facts = load_fact_texts(rt, user, cache)
    indexes = [(p, s.index) for p, s in segments]
    hits: list[Hit] = search_files(indexes, query, mode, limit, facts, weight)
    out = []
    for hit in hits:
        session_id, turn, role, at = by_path[hit.path].meta[hit.line - 1]
        out.append(ThreadHit(session_id, turn, role, at, hit.text, hit.score))
    return out


def format_thread_hits(query: str, hits: list[ThreadHit]) -> str:
    if not query or not query.strip():
        return "No query provided"
    if not hits:
        return f"No past messages found for: {query}"
    rows = [
        f"Session {h.session_id}, turn {h.turn} ({h.role}, {h.at}): {h.text[:300]}" for h in hits
    ]
    noun = "message" if len(hits) == 1 else "messages"
    return f"Found {len(hits)} {noun} for: {query}\n" + "\n".join(rows)
