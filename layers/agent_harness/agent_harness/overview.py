"""What an operator looks at, read through the same services the handlers use: the
users of a stack, one user's workspace at a glance, their sessions, a ledger day cut into
its sections with the consolidation watermark, where a MEMORY.md line came from (down to
the turn's messages), and the user's memory size and tokens over time.

Read-only: the writes an operator makes (edit, rollback, forget, redrive) are the
library's own functions (``memory.files``, ``memory.jobs.forget``, ``aws.dlq``), called as the
CLI calls them. The operator console and the CLI both read through this module.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent_harness.clock import iso
from agent_harness.errors import ValidationFailedError
from agent_harness.ids import User, validate_day, validate_session_id
from agent_harness.memory.facts.ledger import Source, parse_header, source_fields, source_of
from agent_harness.memory.provenance import trace_line
from agent_harness.paths import (
    LEDGER_DIR,
    MEMORY_FILE,
    SEGMENT_DIR,
    SNAPSHOT_DIR,
    archive_day,
    archive_path,
    ledger_day,
    ledger_path,
    turn_path,
)
from agent_harness.records import TurnRecord

if TYPE_CHECKING:
    from agent_harness.memory.provenance import Origin
    from agent_harness.ports import ObjectInfo, UserState
    from agent_harness.runtime import Runtime

__all__ = [
    "LedgerSection",
    "LineOrigin",
    "MemoryVersion",
    "SessionSummary",
    "UserOverview",
    "find_users",
    "ledger_sections",
    "line_origins",
    "list_sessions",
    "memory_sizes",
    "memory_version_page",
    "memory_versions",
    "user_overview",
]

#: the most versions whose writer is read (one GET each)
MAX_VERSIONS = 50
_READERS = 8


def find_users(rt: Runtime, prefix: str = "", *, limit: int = 100) -> list[User]:
    """Users with anything stored whose id starts with ``prefix`` (one LIST)."""
    encoded = User.from_id(prefix).key if prefix else ""
    return [User.from_key(key) for key in rt.store.list_users(encoded, limit=limit)]


@dataclass(frozen=True)
class UserOverview:
    user: User
    objects: int
    memory_bytes: int
    memory_etag: str | None
    ledger_days: int
    ledger_bytes: int
    archive_days: int
    archive_bytes: int
    archived: tuple[str, ...]  # the archived days, in order (all consolidated)
    sessions: int
    turns: int
    derived_bytes: int  # thread segments and ranked snapshots (rebuildable)
    last_activity: str | None
    state: UserState
    #: per ledger day: bytes consolidation has merged / bytes on disk
    watermarks: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def exists(self) -> bool:
        return self.objects > 0

    @property
    def unmerged_bytes(self) -> int:
        """Active-ledger bytes consolidation has not merged yet."""
        return sum(size - done for done, size in self.watermarks.values())


def user_overview(rt: Runtime, user: User) -> UserOverview:
    """One user's workspace at a glance: one LIST of the user's root and the user item."""
    objects = rt.store.list(user, "")
    state = rt.table.get_user(user)
    memory = next((o for o in objects if o.path == MEMORY_FILE), None)
    ledgers = {d: o for o in objects if (d := ledger_day(o.path))}
    archive = {d: o for o in objects if (d := archive_day(o.path))}
    sessions = {o.path.split("/")[1] for o in objects if o.path.startswith("sessions/")}
    turns = [o for o in objects if "/turns/" in o.path and o.path.startswith("sessions/")]
    derived = [o for o in objects if o.path.startswith((SEGMENT_DIR, SNAPSHOT_DIR))]
    last = max((o.last_modified for o in objects if o.last_modified), default=None)
    return UserOverview(
        user=user,
        objects=len(objects),
        memory_bytes=memory.size if memory else 0,
        memory_etag=memory.etag if memory else None,
        ledger_days=len(ledgers),
        ledger_bytes=sum(o.size for o in ledgers.values()),
        archive_days=len(archive),
        archive_bytes=sum(o.size for o in archive.values()),
        archived=tuple(sorted(archive)),
        sessions=len(sessions),
        turns=len(turns),
        derived_bytes=sum(o.size for o in derived),
        last_activity=iso(last) if last else None,
        state=state,
        watermarks={
            day: (min(state.consumed.get(day, 0), o.size), o.size)
            for day, o in sorted(ledgers.items())
        },
    )


@dataclass(frozen=True)
class SessionSummary:
    session_id: str
    turns: int
    first_at: str | None
    last_at: str | None


def list_sessions(rt: Runtime, user: User) -> list[SessionSummary]:
    """The user's sessions, most recently active first (one LIST of sessions/)."""
    grouped: dict[str, list[ObjectInfo]] = {}
    for info in rt.store.list(user, "sessions/"):
        parts = info.path.split("/")
        if len(parts) == 4 and parts[2] == "turns" and parts[3].endswith(".json"):
            grouped.setdefault(parts[1], []).append(info)
    out = []
    for session_id, infos in grouped.items():
        times = sorted(o.last_modified for o in infos if o.last_modified)
        out.append(
            SessionSummary(
                session_id,
                len(infos),
                iso(times[0]) if times else None,
                iso(times[-1]) if times else None,
            )
        )
    out.sort(key=lambda s: s.last_at or "", reverse=True)
    return out


@dataclass(frozen=True)
class LedgerSection:
    kind: str | None  # "Flush", "Memory Save", ... (None: text before the first header)
    at: str | None
    source: str | None  # the raw ``> source:`` fields
    lines: list[tuple[int, str]]  # (1-based line number, text)
    start: int  # byte offsets of the section in the file
    end: int
    merged: bool  # consolidation has read all of it (the watermark is at or past its end)

    @property
    def origin(self) -> Source | None:
        """The session and turns the source line names (None: a save naming none)."""
        return source_of(self.source or "")


def ledger_sections(
    rt: Runtime, user: User, day: str, *, archived: bool = False
) -> tuple[list[LedgerSection], int, int]:
    """A ledger day cut into its sections, each marked merged or not by the user's
    consolidation watermark; also (merged bytes, file bytes). An archived day was
    consolidated whole before it moved (``memory.jobs.maintenance``): all of it is merged."""
    from agent_harness.errors import NotFoundError

    path = (archive_path if archived else ledger_path)(validate_day(day))
    obj = rt.store.get(user, path)
    if obj is None:
        raise NotFoundError(f"no {'archived ' if archived else ''}ledger for {day}")
    watermark = obj.size if archived else rt.table.get_user(user).consumed.get(day, 0)
    consumed = min(watermark, obj.size)
    sections: list[LedgerSection] = []
    current: list[tuple[int, str]] = []
    kind = at = source = None
    start = offset = end = 0  # end: after the section's last non-blank line

    def close() -> None:
        if current or kind:
            merged = end <= consumed  # the blank line before the next header is not its text
            sections.append(LedgerSection(kind, at, source, list(current), start, end, merged))

    for number, line in enumerate(obj.content.splitlines(keepends=True), start=1):
        text = line.rstrip("\n")
        header = parse_header(text)
        if header:
            close()
            current, (kind, at), source, start = [], header, None, offset
        elif source is None and kind and (fields := source_fields(text)):
            source = fields
        elif text.strip():
            current.append((number, text))
        offset += len(line.encode("utf-8"))
        if text.strip():
            end = offset
    close()
    return sections, consumed, obj.size


@dataclass(frozen=True)
class LineOrigin:
    """A ledger line a MEMORY.md line likely came from, with the turns it names."""

    origin: Origin
    session_id: str | None
    turns: list[TurnRecord]


def line_origins(rt: Runtime, user: User, text: str, *, limit: int = 5) -> list[LineOrigin]:
    """``trace`` of a MEMORY.md line, each origin with its source turns' records (the
    messages that produced it; the first 5 turns of each section)."""
    out = []
    for origin in trace_line(rt, user, text, limit=limit):
        source = source_of(origin.source or "")
        session_id, records = None, []
        if source is not None:
            try:
                session_id = validate_session_id(source.session_id)
            except ValidationFailedError:  # a hand-edited ledger: the origin, not its turns
                session_id = None
            else:
                wanted = list(source.turns[:5])
                got = rt.store.get_many(user, [turn_path(session_id, n) for n in wanted])
                parsed = (TurnRecord.parse_or_none(got[p].content) for p in sorted(got))
                records = sorted((r for r in parsed if r), key=lambda r: r.turn)
        out.append(LineOrigin(origin, session_id, records))
    return out


@dataclass(frozen=True)
class MemoryVersion:
    version_id: str
    at: str | None
    size: int
    is_latest: bool
    writer: str | None


def memory_versions(rt: Runtime, user: User, *, limit: int = MAX_VERSIONS) -> list[MemoryVersion]:
    """MEMORY.md's newest versions, each with who wrote it (one GET per version)."""
    return memory_version_page(rt, user, limit=limit)[0]


def memory_version_page(
    rt: Runtime, user: User, *, limit: int = MAX_VERSIONS, cursor: str | None = None
) -> tuple[list[MemoryVersion], str | None]:
    """A page of MEMORY.md's versions, newest first, older than ``cursor``, each with who
    wrote it (one GET per version); and the cursor of the next page, None at the oldest."""
    versions, next_cursor = rt.store.list_versions_page(
        user, MEMORY_FILE, limit=limit, after=cursor
    )

    def writer(version_id: str) -> str | None:
        obj = rt.store.get_version(user, MEMORY_FILE, version_id)
        return obj.writer if obj else None

    with ThreadPoolExecutor(max_workers=_READERS) as pool:
        writers = list(pool.map(writer, [v.version_id for v in versions]))
    page = [
        MemoryVersion(
            v.version_id,
            iso(v.last_modified) if v.last_modified else None,
            v.size,
            v.is_latest,
            w,
        )
        for v, w in zip(versions, writers, strict=True)
    ]
    return page, next_cursor


def memory_sizes(rt: Runtime, user: User) -> dict[str, list[tuple[str, int]]]:
    """Memory size over time, as (day, bytes) points: MEMORY.md at each version (its last
    version of the day), and the ledgers, active and archived, summed up to each day."""
    by_day: dict[str, int] = {}
    for v in reversed(rt.store.list_versions(user, MEMORY_FILE)):  # oldest first
        if v.last_modified:  # a later version of the same day replaces an earlier one
            by_day[v.last_modified.date().isoformat()] = v.size
    ledgers: dict[str, int] = {}
    for info in rt.store.list(user, LEDGER_DIR):
        day = ledger_day(info.path) or archive_day(info.path)
        if day:
            ledgers[day] = ledgers.get(day, 0) + info.size
    running, cumulative = 0, []
    for day in sorted(ledgers):
        running += ledgers[day]
        cumulative.append((day, running))
    return {"MEMORY.md": sorted(by_day.items()), "ledgers": cumulative}
