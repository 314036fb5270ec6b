"""MEMORY.md and the ledgers as a person sees them: read, edit (If-Match), versions,
rollback, ledger days, saves. Writes are conditional so an edit never silently overwrites
a consolidation, and a consolidation never overwrites an edit
(docs/design.md#consolidation-safe). Every write passes the gate (memory.facts.gate):
an edit's new lines are the editor's (``operator``, or ``user`` for their own), a
save's the saver's (``save:api``, ``save:mcp``, ``save:agent``); what the gate holds
goes to the review queue.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from agent_harness.clock import iso
from agent_harness.errors import (
    InvalidRequestError,
    MemoryFullError,
    NotFoundError,
    PayloadTooLargeError,
    PreconditionRequiredError,
    ValidationFailedError,
)
from agent_harness.ids import validate_day, validate_relative_path, validate_session_id
from agent_harness.import_budget import imports_admitted
from agent_harness.memory.facts.ledger import (
    Source,
    by_field,
    by_writer,
    format_turns,
    saved_by,
)
from agent_harness.memory.owner import Memory
from agent_harness.paths import LEDGER_DIR, MEMORY_FILE, ledger_day, ledger_path

if TYPE_CHECKING:
    from datetime import datetime

    from agent_harness.ids import User
    from agent_harness.ports import ObjectInfo, VersionInfo
    from agent_harness.runtime import Runtime

__all__ = [
    "MAX_CLOCK_SKEW",
    "MAX_GET_CHARS",
    "MAX_GET_LINES",
    "MAX_VERSIONS_LIMIT",
    "VERSIONS_LIMIT",
    "MemoryDocument",
    "Saved",
    "get_ledger_day",
    "get_memory",
    "ledger_files",
    "list_ledger_days",
    "list_memory_versions",
    "memory_lines",
    "memory_versions_page",
    "put_memory",
    "read_lines",
    "rollback_memory",
    "save_facts",
    "save_source",
]

#: a saved fact's timestamp may run this far ahead of our clock (the client's may differ)
MAX_CLOCK_SKEW = timedelta(minutes=5)


@dataclass(frozen=True)
class MemoryDocument:
    content: str
    etag: str | None
    #: lines the gate held for review instead of writing them (an edit, a rollback)
    held: int = 0


def get_memory(rt: Runtime, user: User) -> MemoryDocument:
    obj = rt.store.get(user, MEMORY_FILE)
    return MemoryDocument(obj.content, obj.etag) if obj else MemoryDocument("", None)


def put_memory(
    rt: Runtime,
    user: User,
    content: str,
    *,
    if_match: str | None,
    if_none_match: str | None,
    writer: str = "api",
    authority: str = "operator",
) -> MemoryDocument:
    """A person's edit: ``If-Match`` replaces that version, ``If-None-Match: *`` creates;
    at most ``max_memory_chars`` (413). Through the gate: lines the replaced version held
    stay as they were, every other line is ``authority``'s (an operator's, or the user's
    own edit: ``user``). ``writer`` is recorded on the new version."""
    limit = rt.settings.max_memory_chars
    if len(content) > limit:
        raise MemoryFullError(len(content), limit)
    if not if_match and if_none_match != "*":
        raise PreconditionRequiredError(
            "send If-Match: <etag> to replace MEMORY.md, or If-None-Match: * to create it"
        )
    # the version the PUT replaces: if it is not the one read here, the PUT fails (412)
    current = rt.store.get(user, MEMORY_FILE) if if_match else None
    document, etag, held = Memory(rt, user).replace(
        content,
        current=current.content if current else "",
        etag=if_match or None,
        authority=authority,
        writer=writer,
        by=writer,
        via="memory_put",
    )
    return MemoryDocument(document, etag, held)


def list_memory_versions(rt: Runtime, user: User) -> list[VersionInfo]:
    """Every version (the operator's CLI); the API and the console read pages."""
    return rt.store.list_versions(user, MEMORY_FILE)


#: versions in a page of GET /v1/memory/versions: the default and the most
VERSIONS_LIMIT, MAX_VERSIONS_LIMIT = 50, 200


def memory_versions_page(
    rt: Runtime, user: User, *, limit: int = VERSIONS_LIMIT, cursor: str | None = None
) -> tuple[list[VersionInfo], str | None]:
    """A page of MEMORY.md's versions, newest first, older than ``cursor`` (the last
    version id of the page before); and the next page's cursor, None at the oldest."""
    return rt.store.list_versions_page(user, MEMORY_FILE, limit=limit, after=cursor)


def rollback_memory(
    rt: Runtime, user: User, version_id: str, *, writer: str = "api", authority: str = "operator"
) -> MemoryDocument:
    """Restore an earlier version; the restore is written as a new version (If-Match),
    its writer ``"<writer>: rollback to <version_id>"``. It passes the gate: its facts
    keep their authorities, anything else becomes the restorer's (``authority``), and a
    version from before the gate is checked as any write is."""
    old = rt.store.get_version(user, MEMORY_FILE, version_id)
    if old is None:
        raise NotFoundError(f"MEMORY.md has no version {version_id!r}")
    limit = rt.settings.max_memory_chars  # versions from before the cap may be over it
    if len(old.content) > limit:
        raise MemoryFullError(len(old.content), limit, f"version {version_id}")
    current = rt.store.get(user, MEMORY_FILE)
    document, etag, held = Memory(rt, user).replace(
        old.content,
        current=old.content,  # its facts keep their labels: it is their own version
        etag=current.etag if current is not None else None,
        authority=authority,
        writer=f"{writer}: rollback to {version_id}",
        by=writer,
        via="rollback",
        what=f"version {version_id} with its tags",
    )
    return MemoryDocument(document, etag, held)


def ledger_files(rt: Runtime, user: User) -> dict[str, ObjectInfo]:
    """The active daily ledgers (not the archive), by day, in day order: one LIST."""
    found = {}
    for info in rt.store.list(user, LEDGER_DIR, recursive=False):
        day = ledger_day(info.path)
        if day:
            found[day] = info
    return dict(sorted(found.items()))


def list_ledger_days(rt: Runtime, user: User) -> list[dict[str, object]]:
    return [
        {
            "day": day,
            "size": info.size,
            "last_modified": iso(info.last_modified) if info.last_modified else None,
        }
        for day, info in ledger_files(rt, user).items()
    ]


def get_ledger_day(rt: Runtime, user: User, day: str) -> str:
    obj = rt.store.get(user, ledger_path(validate_day(day)))
    if obj is None:
        raise NotFoundError(f"no ledger for {day}")
    return obj.content


MAX_GET_LINES = 400
MAX_GET_CHARS = 40_000


def read_lines(
    rt: Runtime, user: User, path: str, start: int | None = None, end: int | None = None
) -> str:
    """memory_get: lines ``start..end`` (1-based, inclusive) as ``N|text`` rows.

    The file is split on newlines, so a trailing newline counts as a last, empty line
    (numbered as the reference numbers them). ``start`` below 1 reads from 1; ``end``
    before ``start`` is empty; ``start`` past the end is an error. The path may be any
    file of the caller's own workspace and nothing else; of a shared scope's, only its
    memory (MEMORY.md, the ledgers): its review queue holds members' proposals, which
    only its maintainers see."""
    validate_relative_path(path)
    if user.is_scope and path != MEMORY_FILE and not path.startswith(LEDGER_DIR):
        raise NotFoundError(
            f"file not found: {path} (a shared scope's memory is MEMORY.md and memory/)"
        )
    obj = rt.store.get(user, path)
    if obj is None or not obj.content.strip():
        raise NotFoundError(f"file not found: {path}")
    lines = obj.content.split("\n")
    first = max(1, start or 1)
    last = len(lines) if end is None else min(end, len(lines))
    if first > len(lines):
        raise InvalidRequestError(f"startLine {first} exceeds file length {len(lines)}")
    rows: list[str] = []
    size = 0
    for number in range(first, last + 1):
        row = f"{number}|{lines[number - 1]}"
        if len(rows) >= MAX_GET_LINES or size + len(row) > MAX_GET_CHARS:
            rows.append(f"[truncated at line {number - 1}; ask for startLine={number} to go on]")
            break
        rows.append(row)
        size += len(row) + 1
    return "\n".join(rows)


def memory_lines(content: str) -> list[str]:
    """What memory_save stores: the content's non-blank lines; blank content is an error."""
    lines = [line.rstrip() for line in content.splitlines() if line.strip()]
    if not lines:
        raise ValidationFailedError("content is required")
    return lines


def save_source(rt: Runtime, user: User, session_id: str, turns: list[int]) -> str:
    """The provenance line of facts saved from ``turns`` of one of the caller's sessions:
    every turn must have been committed (one read of the session's state)."""
    state = rt.table.get_session(user, session_id)
    last = state.turn if state is not None else 0
    missing = sorted(t for t in set(turns) if t > last)
    if missing:
        raise ValidationFailedError(
            f"source: session {session_id} has no turn{'s' if len(missing) > 1 else ''} "
            f"{format_turns(missing)}"
            + (f" (its last turn is {last})" if last else " (it has no turns)")
        )
    return Source(session_id, tuple(sorted(set(turns))), via="memory_save").render()


@dataclass(frozen=True)
class Saved:
    count: int
    at: datetime
    #: lines held for a person's review instead
    held: int = 0


def save_facts(
    rt: Runtime,
    user: User,
    content: str,
    *,
    timestamp: datetime | None,
    source: tuple[str, list[int]] | None,
    origin: str,
    by: User | None = None,
) -> Saved:
    """POST /v1/memory/save and the MCP memory_save tool: the size caps (413: the body,
    and MEMORY.md with the lines, ``memory_full``), non-blank
    lines, a timestamp not in the future, a source naming committed turns of one of the
    caller's sessions (422); all checked before the first write. ``origin`` (``api``,
    ``mcp``) is the saver: the lines' authority is ``save:<origin>``, and it names the
    caller in the provenance of a save without a source. ``by``: the member who saved
    into a shared scope's memory (``user`` is then its owner), named in the provenance
    (``by=<user key>``) and the version's writer."""
    limit = rt.settings.max_memory_chars
    if len(content) > limit:
        raise PayloadTooLargeError(f"content is limited to {limit} characters")
    lines = memory_lines(content)
    now = rt.clock.now()
    at = timestamp or now
    if at > now + MAX_CLOCK_SKEW:
        raise ValidationFailedError("timestamp must not be in the future")
    provenance = saved_by(origin, "memory_save") + (f" {by_field(by)}" if by else "")
    if source is not None:
        session_id = validate_session_id(source[0], rt.settings.max_session_id_chars)
        provenance = save_source(rt, user, session_id, source[1])
    with imports_admitted(rt, user, 1, "memory save"):  # a write no turn counted
        if by is not None:
            from agent_harness.scopes import note_writer

            note_writer(rt, by, user)
        # no turn follows a save through the API: its lines get their vectors in a job
        # of their own (the owner's index step; search embeds the few newest until then)
        admitted = Memory(rt, user).save(
            lines,
            authority=f"save:{origin}",
            provenance=provenance,
            at=at,
            writer=f"{origin}: memory_save" + (f" {by_writer(by)}" if by else ""),
        )
    return Saved(len(admitted.lines), at, len(admitted.held))
