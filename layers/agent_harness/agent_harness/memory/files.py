"""MEMORY.md and the ledgers as a person sees them: read, edit (If-Match), versions,
rollback, ledger days. Writes are conditional so an edit never silently overwrites a
consolidation, and a consolidation never overwrites an edit (DESIGN §3.5).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent_harness.clock import iso
from agent_harness.errors import NotFoundError, PreconditionRequiredError
from agent_harness.ids import MEMORY_FILE, ledger_path, validate_day
from agent_harness.memory.ledger import DAY_FILE

if TYPE_CHECKING:
    from agent_harness.aws.workspace import VersionInfo
    from agent_harness.ids import User
    from agent_harness.runtime import Runtime

__all__ = [
    "MemoryDocument",
    "get_ledger_day",
    "get_memory",
    "list_ledger_days",
    "list_memory_versions",
    "put_memory",
    "rollback_memory",
]


@dataclass(frozen=True)
class MemoryDocument:
    content: str
    etag: str | None


def get_memory(rt: Runtime, user: User) -> MemoryDocument:
    obj = rt.store.get(user, MEMORY_FILE)
    return MemoryDocument(obj.content, obj.etag) if obj else MemoryDocument("", None)


def put_memory(
    rt: Runtime, user: User, content: str, *, if_match: str | None, if_none_match: str | None
) -> MemoryDocument:
    """A person's edit: ``If-Match`` replaces that version, ``If-None-Match: *`` creates."""
    if if_match:
        etag = rt.store.put(user, MEMORY_FILE, content, if_match=if_match)
    elif if_none_match == "*":
        etag = rt.store.put(user, MEMORY_FILE, content, create_only=True)
    else:
        raise PreconditionRequiredError(
            "send If-Match: <etag> to replace MEMORY.md, or If-None-Match: * to create it"
        )
    return MemoryDocument(content, etag)


def list_memory_versions(rt: Runtime, user: User) -> list[VersionInfo]:
    return rt.store.list_versions(user, MEMORY_FILE)


def rollback_memory(rt: Runtime, user: User, version_id: str) -> MemoryDocument:
    """Restore an earlier version; the restore is written as a new version (If-Match)."""
    old = rt.store.get_version(user, MEMORY_FILE, version_id)
    if old is None:
        raise NotFoundError(f"MEMORY.md has no version {version_id!r}")
    current = rt.store.get(user, MEMORY_FILE)
    if current is None:
        etag = rt.store.put(user, MEMORY_FILE, old.content, create_only=True)
    else:
        etag = rt.store.put(user, MEMORY_FILE, old.content, if_match=current.etag)
    return MemoryDocument(old.content, etag)


def list_ledger_days(rt: Runtime, user: User) -> list[dict[str, object]]:
    days = []
    for info in rt.store.list(user, "memory", recursive=False):
        match = DAY_FILE.fullmatch(info.path)
        if match:
            days.append(
                {
                    "day": match.group(1),
                    "size": info.size,
                    "last_modified": iso(info.last_modified) if info.last_modified else None,
                }
            )
    return sorted(days, key=lambda d: str(d["day"]))


def get_ledger_day(rt: Runtime, user: User, day: str) -> str:
    obj = rt.store.get(user, ledger_path(validate_day(day)))
    if obj is None:
        raise NotFoundError(f"no ledger for {day}")
    return obj.content
