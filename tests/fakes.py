"""In-memory fakes of the seams, with the same conditional semantics as S3 and DynamoDB.

Unit tests run the real services on these (no AWS, no network); integration tests run
the same services on moto, so a fake that drifted from AWS would show there.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from agent_harness.errors import (
    ConflictError,
    InvalidRequestError,
    ModelError,
    PreconditionFailedError,
    SessionBusyError,
    SessionNotFoundError,
    StoreError,
)
from agent_harness.ids import User, validate_relative_path
from agent_harness.jobs import ConsolidationJob, IndexJob, PostTurnJob
from agent_harness.keys import due_shard
from agent_harness.models import ModelRegistry
from agent_harness.models.base import ChatRequest, ChatResponse, Message, ToolCall, Usage
from agent_harness.paths import turn_path, user_root
from agent_harness.ports import (
    ROLES,
    Admission,
    AdmissionCheck,
    Budget,
    DayUsage,
    DueUser,
    FlushDue,
    GateClaim,
    ImportCheck,
    LeaseAdmission,
    Member,
    ObjectInfo,
    PauseMark,
    Place,
    SessionState,
    StoredObject,
    UsageDelta,
    UserState,
    VersionInfo,
    cas_append,
    check_day,
    check_usage,
    writer_label,
)
from agent_harness.records import TurnRecord
from agent_harness.runtime import Runtime
from agent_harness.settings import Settings
from agent_harness.tokens import TokenCounter


class ManualClock:
    def __init__(self, start: datetime | None = None) -> None:
        self.current = start or datetime(2026, 11, 30, 9, 0, 0, tzinfo=UTC)

    def now(self) -> datetime:
        return self.current

    def advance(self, **kwargs: float) -> None:
        self.current += timedelta(**kwargs)


@dataclass
class _Version:
    data: bytes
    etag: str
    version_id: str
    at: datetime
    writer: str | None = None


class MemoryStore:
    """A versioned bucket in memory: If-Match, If-None-Match, ranges, versions.

    Every rule follows S3WorkspaceStore on S3 (tests/contract/test_workspace_store.py)."""

    def __init__(self, clock: ManualClock | None = None) -> None:
        #: keys that exist: every version of the key, oldest first, the last one current
        #: (versions from before a delete included: S3 keeps them as noncurrent versions)
        self.objects: dict[str, list[_Version]] = {}
        #: keys whose latest is a delete marker: their versions, still listed and readable
        self.deleted: dict[str, list[_Version]] = {}
        #: delete markers per key: S3 writes one on every delete (moto: of a key it has)
        self.markers: dict[str, int] = {}
        self.clock = clock or ManualClock()
        self.lock = threading.Lock()
        self.calls: list[tuple[str, str]] = []
        self.fail_puts: Callable[[str], bool] = lambda key: False
        self.append_attempts = 8
        self.latency = 0.0  # seconds per request, so concurrent callers really interleave
        self._ids = itertools.count(1)

    @staticmethod
    def key(user: User, path: str) -> str:
        return f"{user_root(user.key)}{validate_relative_path(path)}"

    def text(self, user: User, path: str) -> str | None:
        versions = self.objects.get(self.key(user, path))
        return versions[-1].data.decode() if versions else None

    def _obj(self, path: str, v: _Version, data: bytes | None = None) -> StoredObject:
        body = v.data if data is None else data
        # the adapter decodes with errors="replace": a split character becomes U+FFFD
        text = body.decode("utf-8", errors="replace")
        return StoredObject(path, text, v.etag, len(v.data), v.at, v.version_id, v.writer)

    def get(self, user: User, path: str) -> StoredObject | None:
        self.calls.append(("get", path))
        if self.latency:
            time.sleep(self.latency)
        with self.lock:
            versions = self.objects.get(self.key(user, path))
            return self._obj(path, versions[-1]) if versions else None

    def get_from(self, user: User, path: str, offset: int) -> StoredObject | None:
        if offset <= 0:  # the adapter sends no Range then: the whole object, not the tail
            return self.get(user, path)
        self.calls.append(("get_from", path))
        with self.lock:
            versions = self.objects.get(self.key(user, path))
            if not versions:
                return None
            v = versions[-1]
            if offset >= len(v.data):  # S3's 416: the adapter's empty read has no version id
                return StoredObject(path, "", v.etag, len(v.data), v.at)
            return self._obj(path, v, v.data[offset:])

    def get_many(self, user: User, paths: list[str]) -> dict[str, StoredObject]:
        found = {p: self.get(user, p) for p in paths}
        return {p: o for p, o in found.items() if o is not None}

    def put(
        self,
        user: User,
        path: str,
        content: str,
        *,
        if_match: str | None = None,
        create_only: bool = False,
        writer: str | None = None,
    ) -> str:
        if if_match and create_only:  # the adapter refuses the pair before any request
            raise ValueError("if_match and create_only are exclusive")
        key = self.key(user, path)
        self.calls.append(("put", path))
        if self.latency:
            time.sleep(self.latency)
        if self.fail_puts(path):
            raise StoreError(f"injected failure writing {path}")
        with self.lock:
            versions = self.objects.get(key)
            if create_only and versions:
                raise PreconditionFailedError(f"{path} exists")
            if if_match and (not versions or versions[-1].etag != if_match):
                raise PreconditionFailedError(f"{path} changed")
            data = content.encode()
            # S3 (SSE-S3, single-part PUT): the ETag is the MD5 of the bytes, so the same
            # content has the same ETag; every write is still a new version
            etag = '"' + hashlib.md5(data).hexdigest() + '"'
            # the adapter keeps the writer as the version's metadata, clipped the same way
            version = _Version(
                data, etag, f"v{next(self._ids)}", self.clock.now(), writer_label(writer)
            )
            # a rewrite after a delete keeps the versions from before it (noncurrent)
            self.objects[key] = [*(versions or self.deleted.pop(key, [])), version]
            return etag

    def delete(self, user: User, path: str, *, if_match: str | None = None) -> None:
        key = self.key(user, path)
        self.calls.append(("delete", path))
        with self.lock:
            versions = self.objects.get(key)
            if not versions:
                if key in self.deleted:  # deleting a deleted key stacks one more marker
                    self.markers[key] += 1
                return
            if if_match and versions[-1].etag != if_match:
                raise PreconditionFailedError(f"{path} changed")
            # a versioned bucket puts a delete marker on top and keeps every version
            self.deleted[key] = self.objects.pop(key)
            self.markers[key] = self.markers.get(key, 0) + 1

    def changed_since(self, user: User, since: datetime) -> list[str]:
        base = user_root(user.key)
        self.calls.append(("changed_since", ""))
        with self.lock:
            keys = {
                key[len(base) :]
                for table in (self.objects, self.deleted)
                for key, versions in table.items()
                if key.startswith(base) and any(v.at >= since for v in versions)
            }
        return sorted(keys)

    def delete_versions(self, user: User, path: str, version_ids: list[str]) -> int:
        key = self.key(user, path)
        self.calls.append(("delete_versions", path))
        doomed = set(version_ids)
        with self.lock:
            for table in (self.objects, self.deleted):
                if key not in table:
                    continue
                kept = [v for v in table[key] if v.version_id not in doomed]
                if kept:
                    table[key] = kept
                else:  # S3: no version left, no object (a delete marker alone stays)
                    del table[key]
        return len(version_ids)

    def purge(self, user: User) -> int:
        base = user_root(user.key)
        with self.lock:
            # S3 deletes (and the adapter counts) every version and every delete marker
            keys = [k for k in {*self.objects, *self.deleted, *self.markers} if k.startswith(base)]
            return sum(
                len(self.objects.pop(k, [])) + len(self.deleted.pop(k, [])) + self.markers.pop(k, 0)
                for k in keys
            )

    def append(
        self,
        user: User,
        path: str,
        build: Callable[[str], str | None],
        *,
        writer: str | None = None,
    ) -> str | None:
        # the production CAS loop, on this store's atomic conditional put
        return cas_append(self, user, path, build, attempts=self.append_attempts, writer=writer)

    def list(self, user: User, prefix: str, *, recursive: bool = True) -> list[ObjectInfo]:
        base = user_root(user.key)
        # the adapter validates the prefix like a path: no "..", no leading "/"
        full = base + (validate_relative_path(prefix.rstrip("/")) + "/" if prefix else "")
        out = []
        for key in sorted(self.objects):
            if not key.startswith(full):
                continue
            rest = key[len(full) :]
            if not recursive and "/" in rest:
                continue
            v = self.objects[key][-1]
            out.append(ObjectInfo(key[len(base) :], len(v.data), v.etag, v.at))
        return out

    def list_together(
        self, user: User, folders: tuple[str, ...], *, expect: int
    ) -> dict[str, list[ObjectInfo]]:
        return {folder: self.list(user, folder) for folder in folders}

    def list_users(self, prefix: str = "", *, limit: int = 100) -> list[str]:
        if "/" in prefix:
            raise InvalidRequestError("a user key prefix must not contain '/'")
        if limit < 1:
            raise InvalidRequestError("limit must be at least 1")
        with self.lock:
            # S3 lists a user while a current object is under users/<key>/ (not after a
            # delete, whose versions stay but are not listed)
            keys = {k.split("/", 2)[1] for k in self.objects if k.startswith("users/" + prefix)}
        return sorted(keys)[:limit]

    def _versions(self, key: str) -> list[_Version]:
        """Every version of the key, oldest first, whether it exists or is deleted."""
        return self.objects.get(key) or self.deleted.get(key, [])

    def list_versions(self, user: User, path: str) -> list[VersionInfo]:
        key = self.key(user, path)
        versions = self._versions(key)
        latest = versions[-1] if key in self.objects else None  # a delete marker is latest
        return [
            VersionInfo(v.version_id, v.at, v.etag, len(v.data), v is latest)
            for v in reversed(versions)
        ]

    def list_versions_page(
        self, user: User, path: str, *, limit: int, after: str | None = None
    ) -> tuple[list[VersionInfo], str | None]:
        versions = self.list_versions(user, path)
        if after is not None:
            ids = [v.version_id for v in versions]
            versions = versions[ids.index(after) + 1 :] if after in ids else []
        page = versions[:limit]
        return page, page[-1].version_id if len(versions) > limit else None

    def get_version(self, user: User, path: str, version_id: str) -> StoredObject | None:
        # S3 reads any version by id, a deleted object's too
        for v in self._versions(self.key(user, path)):
            if v.version_id == version_id:
                return self._obj(path, v)
        return None


def _pinned(state: SessionState | None) -> tuple[object, ...] | None:
    """What the lease-and-admission write checks of a session (None: no item)."""
    return None if state is None else (state.turn, state.pause, state.flush_gate_ms)


@dataclass
class _SessionItem:
    state: SessionState = field(default_factory=SessionState)
    lease_owner: str | None = None
    lease_expires_ms: int = 0
    user_id: str = ""
    flush_shard: str | None = None
    flush_due_at: str | None = None
    #: the cursors ever set: a DynamoDB item has no cursor attribute until the first advance
    cursors: set[str] = field(default_factory=set)


@dataclass
class _UserItem:
    state: UserState = field(default_factory=UserState)
    user_id: str = ""
    shard: str | None = None
    due_at: str | None = None
    cons_owner: str | None = None
    cons_expires_ms: int = 0


class MemoryTable:
    """The state table in memory, with the conditions DynamoStateTable sends.

    On an item that does not exist a condition fails as on DynamoDB (never a KeyError),
    and an update whose condition allows a missing item (the cursors) creates it.
    """

    def __init__(self) -> None:
        self.sessions: dict[tuple[str, str], _SessionItem] = {}
        self.users: dict[str, _UserItem] = {}
        #: (user key, day) -> that day's usage (the D#<day> items)
        self.usage: dict[tuple[str, str], DayUsage] = {}
        #: (user key, day) -> [admitted, turn_tokens, reserved]: the turn budget's counts
        self.budget: dict[tuple[str, str], list[int]] = {}
        #: (user key, day) -> turns imported that day
        self.imported: dict[tuple[str, str], int] = {}
        #: user key -> the operator's budget override
        self.overrides: dict[str, Budget] = {}
        #: (user key, place key) -> the place (the P#<key> items)
        self.places: dict[tuple[str, str], Place] = {}
        #: user key -> (shard, due_at) of its next expiry (the EXPIRY item)
        self.expiries: dict[str, tuple[str, str]] = {}
        #: (scope, user key) -> the membership; the scopes that have had a member
        self.members: dict[tuple[str, str], Member] = {}
        self.scopes: set[str] = set()
        #: (user key, scope) -> the first time the scope's memory named the user
        self.writers: dict[tuple[str, str], str] = {}
        self.lock = threading.Lock()
        self.calls: list[str] = []

    def acquire_session_lease(
        self,
        user: User,
        session_id: str,
        owner: str,
        now_ms: int,
        lease_ms: int,
        *,
        must_exist: bool = False,
    ) -> SessionState:
        self.calls.append("acquire_session_lease")
        with self.lock:
            if must_exist and (user.key, session_id) not in self.sessions:
                raise SessionNotFoundError(f"session {session_id} has no turns")
            item = self.sessions.setdefault((user.key, session_id), _SessionItem())
            if item.lease_owner and item.lease_expires_ms >= now_ms:
                retry = max(1, math.ceil((item.lease_expires_ms - now_ms) / 1000))
                raise SessionBusyError(f"session {session_id} is busy", retry_after=retry)
            item.lease_owner, item.lease_expires_ms = owner, now_ms + lease_ms
            return item.state

    def lease_and_admit(
        self,
        user: User,
        session_id: str,
        owner: str,
        now_ms: int,
        lease_ms: int,
        *,
        expected: SessionState | None,
        check: AdmissionCheck,
    ) -> LeaseAdmission:
        check_day(check.day)
        self.calls.append("lease_and_admit")
        with self.lock:  # what one transaction decides, in the adapter's order
            stored = self.overrides.get(user.key)
            if stored != check.override:
                return LeaseAdmission(taken=False, override_changed=True, override=stored)
            counts = self.budget.get((user.key, check.day), [0, 0, 0])
            over_turns = check.count_turn and 0 < check.turn_limit <= counts[0]
            if check.admits and (over_turns or 0 < check.token_limit <= counts[2]):
                return LeaseAdmission(taken=False, refused=Admission(False, *counts))
            item = self.sessions.get((user.key, session_id))
            if item is not None and item.lease_owner and item.lease_expires_ms >= now_ms:
                retry = max(1, math.ceil((item.lease_expires_ms - now_ms) / 1000))
                raise SessionBusyError(f"session {session_id} is busy", retry_after=retry)
            state = item.state if item is not None else None
            if _pinned(state) != _pinned(expected):
                return LeaseAdmission(taken=False, session_changed=True, session=state)
            item = self.sessions.setdefault((user.key, session_id), _SessionItem())
            item.lease_owner, item.lease_expires_ms = owner, now_ms + lease_ms
            if check.admits:
                self.budget[(user.key, check.day)] = [
                    counts[0] + int(check.count_turn),
                    counts[1],
                    counts[2] + check.estimate,
                ]
                self.usage.setdefault(  # the write makes the day's item, as on DynamoDB
                    (user.key, check.day),
                    DayUsage(check.day, dict.fromkeys(ROLES, (0, 0)), dict.fromkeys(ROLES, 0), 0),
                )
            return LeaseAdmission(taken=True)

    def commit_turn(
        self,
        user: User,
        session_id: str,
        owner: str,
        turn: int,
        now_iso: str,
        *,
        usage: UsageDelta | None = None,
        places: Sequence[Place] = (),
    ) -> None:
        self.calls.append("commit_turn")
        if usage is not None:
            check_usage(usage)
        with self.lock:
            item = self.sessions.get((user.key, session_id))
            if item is None or item.lease_owner != owner:  # lease_owner = :o fails on no item
                raise ConflictError("lease lost")  # and the usage is not added (one transaction)
            item.state = replace(item.state, turn=turn, pause=None)
            item.lease_owner = None
            if usage is not None and not usage.empty():
                self._add_usage(user, usage)
            self.places.update({(user.key, p.key): p for p in places})

    def pause_turn(
        self,
        user: User,
        session_id: str,
        owner: str,
        mark: PauseMark,
        turn: int,
        *,
        usage: UsageDelta | None = None,
        places: Sequence[Place] = (),
    ) -> None:
        self.calls.append("pause_turn")
        if usage is not None:
            check_usage(usage)
        with self.lock:
            item = self.sessions.get((user.key, session_id))
            if item is None or item.lease_owner != owner:
                raise ConflictError("lease lost")
            item.state = replace(item.state, pause=mark, turn=turn)
            item.lease_owner = None
            if usage is not None and not usage.empty():
                self._add_usage(user, usage)
            self.places.update({(user.key, p.key): p for p in places})

    def release_session_lease(self, user: User, session_id: str, owner: str) -> None:
        self.calls.append("release_session_lease")
        with self.lock:
            item = self.sessions.get((user.key, session_id))
            if item and item.lease_owner == owner:
                item.lease_owner = None

    def get_place(self, user: User, key: str) -> Place | None:
        self.calls.append("get_place")
        return self.places.get((user.key, key))

    def delete_place(self, user: User, key: str) -> bool:
        self.calls.append("delete_place")
        with self.lock:
            return self.places.pop((user.key, key), None) is not None

    def get_session(self, user: User, session_id: str) -> SessionState | None:
        self.calls.append("get_session")
        item = self.sessions.get((user.key, session_id))
        return item.state if item else None

    def advance_flush_cursor(
        self, user: User, session_id: str, to_turn: int, now_iso: str, *, clear_due: bool = False
    ) -> bool:
        return self._advance(user, session_id, "flush_cursor", to_turn, clear_due)

    def advance_index_cursor(self, user: User, session_id: str, to_turn: int) -> bool:
        return self._advance(user, session_id, "index_cursor", to_turn)

    def _advance(
        self, user: User, session_id: str, cursor: str, to_turn: int, clear_due: bool = False
    ) -> bool:
        with self.lock:
            # UpdateItem upserts: a session never written (or purged) gets an item
            item = self.sessions.setdefault((user.key, session_id), _SessionItem())
            # attribute_not_exists(cursor) OR cursor < :t (so a fresh cursor moves to 0)
            if cursor in item.cursors and getattr(item.state, cursor) >= to_turn:
                return False
            item.cursors.add(cursor)
            item.state = replace(item.state, **{cursor: to_turn})
            if clear_due:
                item.flush_shard = item.flush_due_at = None
            return True

    def claim_flush_gate(self, user: User, session_id: str, now_ms: int, gap_ms: int) -> GateClaim:
        with self.lock:
            item = self.sessions.get((user.key, session_id))
            if item is None:  # attribute_exists(pk) fails; no old item, so nothing held
                return GateClaim(False, now_ms, held_ms=None)
            held = item.state.flush_gate_ms
            if held is not None and held > now_ms - gap_ms:
                return GateClaim(False, now_ms, held_ms=held)
            item.state = replace(item.state, flush_gate_ms=now_ms)
            return GateClaim(True, now_ms, previous_ms=held)

    def release_flush_gate(self, user: User, session_id: str, claim: GateClaim) -> None:
        with self.lock:
            item = self.sessions.get((user.key, session_id))
            if item is not None and item.state.flush_gate_ms == claim.claimed_ms:
                item.state = replace(item.state, flush_gate_ms=claim.previous_ms)

    def mark_flush_due(self, user: User, session_id: str, due_at_iso: str, shards: int) -> None:
        with self.lock:
            item = self.sessions.get((user.key, session_id))
            if item is not None:
                item.user_id = user.id
                item.flush_shard = due_shard(user.key, shards, "flush")
                item.flush_due_at = due_at_iso

    def clear_flush_due(self, user: User, session_id: str) -> None:
        with self.lock:
            item = self.sessions.get((user.key, session_id))
            if item is not None:
                item.flush_shard = item.flush_due_at = None

    def query_flush_due(self, shard: str, now_iso: str) -> list[FlushDue]:
        return [
            FlushDue(item.user_id, session_id, item.state.turn, item.flush_due_at)
            for (_, session_id), item in sorted(self.sessions.items())
            if item.flush_shard == shard and item.flush_due_at and item.flush_due_at <= now_iso
        ]

    def mark_consolidation_due(self, user: User, now_iso: str, shards: int) -> None:
        with self.lock:
            item = self.users.setdefault(user.key, _UserItem())
            item.user_id = user.id
            item.shard = due_shard(user.key, shards)
            item.due_at = item.due_at or now_iso
            item.state = replace(item.state, due_seq=item.state.due_seq + 1, is_due=True)

    def get_user(self, user: User) -> UserState:
        item = self.users.get(user.key)
        return item.state if item else UserState()

    def acquire_consolidation_lease(
        self, user: User, owner: str, now_ms: int, lease_ms: int
    ) -> UserState:
        with self.lock:
            item = self.users.setdefault(user.key, _UserItem(user_id=user.id))
            if item.cons_owner and item.cons_expires_ms >= now_ms:
                raise ConflictError("consolidation running")
            item.cons_owner, item.cons_expires_ms = owner, now_ms + lease_ms
            return item.state

    def complete_consolidation(
        self, user: User, owner: str, consumed: dict[str, int], due_seq: int, now_iso: str
    ) -> bool:
        with self.lock:
            item = self.users.get(user.key)
            if item is None or item.cons_owner != owner:  # cons_owner = :o fails on no item
                raise ConflictError("lease lost")
            item.cons_owner = None
            cleared = item.state.due_seq == due_seq
            if cleared:
                item.shard = item.due_at = None
            item.state = replace(
                item.state,
                consumed=dict(consumed),
                last_consolidated_at=now_iso,
                is_due=item.state.is_due and not cleared,
                failures=0,
                failed_at=None,
                last_error=None,
                retry_at=None,
            )
            return cleared

    def fail_consolidation(
        self, user: User, owner: str, error: str, now_iso: str, retry_at_iso: str, shards: int
    ) -> None:
        with self.lock:
            item = self.users.get(user.key)
            if item is None or item.cons_owner != owner:
                return
            item.cons_owner = None
            item.user_id = user.id
            item.shard, item.due_at = due_shard(user.key, shards), retry_at_iso
            item.state = replace(
                item.state,
                is_due=True,
                failures=item.state.failures + 1,
                failed_at=now_iso,
                last_error=error[:1000],
                retry_at=retry_at_iso,
            )

    def release_consolidation_lease(self, user: User, owner: str) -> None:
        with self.lock:
            item = self.users.get(user.key)
            if item and item.cons_owner == owner:
                item.cons_owner = None

    def abandon_consolidation(self, user: User, owner: str) -> bool:
        with self.lock:
            item = self.users.get(user.key)
            if item is None or item.cons_owner != owner or item.state != UserState():
                return False
            del self.users[user.key]
            return True

    def purge_user(self, user: User) -> int:
        with self.lock:
            doomed = [k for k in self.sessions if k[0] == user.key]
            for k in doomed:
                del self.sessions[k]
            days = sorted({k for k in [*self.usage, *self.budget] if k[0] == user.key})
            for k in days:
                self.usage.pop(k, None)
                self.budget.pop(k, None)
                self.imported.pop(k, None)
            had_override = self.overrides.pop(user.key, None) is not None
            had_user = self.users.pop(user.key, None) is not None
            places = [k for k in self.places if k[0] == user.key]
            for k in places:
                del self.places[k]
            expiry = self.expiries.pop(user.key, None) is not None
            memberships = [k for k in self.members if k[1] == user.key]
            for k in memberships:
                del self.members[k]
            wrote = [k for k in self.writers if k[0] == user.key]
            for k in wrote:
                del self.writers[k]
            removed = len(doomed) + len(days) + int(had_user) + int(had_override)
            return removed + len(places) + int(expiry) + len(memberships) + len(wrote)

    def add_usage(self, user: User, delta: UsageDelta) -> None:
        """Records a call only when it writes (an empty delta makes no request)."""
        check_usage(delta)
        if delta.empty():
            return
        self.calls.append("add_usage")
        with self.lock:
            self._add_usage(user, delta)

    def _add_usage(self, user: User, delta: UsageDelta) -> None:
        old = self.usage.get((user.key, delta.day)) or DayUsage(
            delta.day, dict.fromkeys(ROLES, (0, 0)), dict.fromkeys(ROLES, 0), 0
        )
        tokens = dict(old.tokens)
        for role, (tokens_in, tokens_out) in delta.tokens.items():
            tokens[role] = (tokens[role][0] + tokens_in, tokens[role][1] + tokens_out)
        calls = dict(old.model_calls)
        for role, n in delta.model_calls.items():
            calls[role] += n
        self.usage[(user.key, delta.day)] = DayUsage(
            delta.day, tokens, calls, old.turns + delta.turns, old.imported
        )
        counts = self.budget.setdefault((user.key, delta.day), [0, 0, 0])
        counts[0] += delta.unadmitted
        counts[1] += delta.turn_tokens
        counts[2] += delta.turn_tokens - delta.released

    def release_admission(self, user: User, day: str, *, estimate: int, count_turn: bool) -> None:
        check_day(day)
        self.calls.append("release_admission")
        with self.lock:
            counts = self.budget.setdefault((user.key, day), [0, 0, 0])
            counts[0] -= int(count_turn)
            counts[2] -= estimate

    def admit_imports(self, user: User, check: ImportCheck) -> Admission | None:
        check_day(check.day)
        self.calls.append("admit_imports")
        with self.lock:
            counts = self.budget.get((user.key, check.day), [0, 0, 0])
            day = (user.key, check.day)
            imported = self.imported.get(day, 0)
            if (
                0 < check.turn_limit <= counts[0]
                or 0 < check.token_limit <= counts[2]
                or (check.import_limit > 0 and imported + check.turns > check.import_limit)
            ):
                return Admission(False, *counts, imported=imported)
            self.imported[day] = imported + check.turns
            old = self.usage.get(day) or DayUsage(
                check.day, dict.fromkeys(ROLES, (0, 0)), dict.fromkeys(ROLES, 0), 0
            )
            self.usage[day] = replace(old, imported=old.imported + check.turns)
            return None

    def release_imports(self, user: User, day: str, turns: int) -> None:
        check_day(day)
        self.calls.append("release_imports")
        with self.lock:
            key = (user.key, day)
            self.imported[key] = self.imported.get(key, 0) - turns
            if key in self.usage:
                self.usage[key] = replace(self.usage[key], imported=self.imported[key])

    def get_budget(self, user: User) -> Budget | None:
        self.calls.append("get_budget")
        return self.overrides.get(user.key)

    def put_member(
        self, scope: str, user: User, role: Literal["member", "maintainer"], at: str
    ) -> None:
        self.calls.append("put_member")
        with self.lock:
            self.members[(scope, user.key)] = Member(scope, user.id, role, at)
            self.scopes.add(scope)

    def delete_member(self, scope: str, user: User) -> bool:
        self.calls.append("delete_member")
        with self.lock:
            return self.members.pop((scope, user.key), None) is not None

    def get_member(self, scope: str, user: User) -> Member | None:
        self.calls.append("get_member")
        return self.members.get((scope, user.key))

    def list_members(self, scope: str) -> list[Member]:
        return [m for (s, _), m in self.members.items() if s == scope]

    def list_scopes(self) -> list[str]:
        return sorted(self.scopes)

    def scopes_of(self, user: User) -> list[Member]:
        self.calls.append("scopes_of")
        return [m for (_, key), m in self.members.items() if key == user.key]

    def note_writer(self, scope: str, user: User, at: str) -> None:
        self.calls.append("note_writer")
        with self.lock:
            self.writers.setdefault((user.key, scope), at)

    def written_by(self, user: User) -> dict[str, str]:
        self.calls.append("written_by")
        return {scope: at for (key, scope), at in sorted(self.writers.items()) if key == user.key}

    def set_budget(self, user: User, budget: Budget | None) -> None:
        self.calls.append("set_budget")
        with self.lock:
            if budget is None:
                self.overrides.pop(user.key, None)
            else:
                self.overrides[user.key] = budget

    def usage_days(self, user: User, first_day: str, last_day: str) -> list[DayUsage]:
        self.calls.append("usage_days")
        check_day(first_day)
        check_day(last_day)
        return [
            usage
            for (key, day), usage in sorted(self.usage.items())
            if key == user.key and first_day <= day <= last_day
        ]

    def top_users(self, day: str, limit: int) -> list[tuple[str, DayUsage]]:
        check_day(day)
        found = [(key, usage) for (key, d), usage in self.usage.items() if d == day]
        found.sort(key=lambda row: (-row[1].total_tokens, row[0]))
        return found[: max(limit, 0)]

    def query_due(self, shard: str) -> list[DueUser]:
        return [
            DueUser(key, item.due_at or "", item.state.last_consolidated_at)
            for key, item in sorted(self.users.items())
            if item.shard == shard
        ]

    def mark_expiry_due(self, user: User, due_at_iso: str, shards: int) -> None:
        with self.lock:
            self.expiries[user.key] = (due_shard(user.key, shards, "expire"), due_at_iso)

    def clear_expiry_due(self, user: User) -> None:
        with self.lock:
            self.expiries.pop(user.key, None)

    def query_expiry_due(self, shard: str, now_iso: str) -> list[DueUser]:
        return [
            DueUser(key, due_at, None)
            for key, (at, due_at) in sorted(self.expiries.items())
            if at == shard and due_at <= now_iso
        ]


#: SQS FIFO's deduplication interval
DEDUP_WINDOW = timedelta(minutes=5)


class RecordingQueue:
    """The two queues as lists of what a consumer receives (tests pop jobs off them; the
    post-turn queue's index jobs are in ``index``).

    The post-turn queue dedupes like SQS FIFO without content-based deduplication: a send
    whose MessageDeduplicationId (SqsJobQueue's: user key, session, turn, reason, after)
    was delivered less than five minutes ago, by ``clock``, is accepted and dropped, even
    if that job was consumed since. The consolidation queue (standard) keeps duplicates."""

    def __init__(self, clock: ManualClock | None = None) -> None:
        self.post_turn: list[PostTurnJob] = []
        self.index: list[IndexJob] = []
        self.consolidation: list[ConsolidationJob] = []
        #: the dead-letter queues' messages, as job bodies
        self.dead: list[dict[str, Any]] = []
        self.fail = False
        self.clock = clock or ManualClock()
        #: deduplication id -> when a send with it was delivered
        self.delivered_at: dict[tuple[str, str, int, str, int], datetime] = {}

    def send_post_turn(self, user: User, job: PostTurnJob) -> None:
        if self.fail:
            raise StoreError("injected queue failure")
        dedup = (user.key, job.session_id, job.turn, job.reason, job.after)
        now = self.clock.now()
        first = self.delivered_at.get(dedup)
        if first is not None and now - first < DEDUP_WINDOW:
            return  # a duplicate does not restart the interval
        self.delivered_at[dedup] = now
        self.post_turn.append(job)

    def send_index(self, owner: User, job: IndexJob) -> None:
        if self.fail:
            raise StoreError("injected queue failure")
        self.index.append(job)

    def send_consolidation(self, jobs: list[ConsolidationJob]) -> None:
        self.consolidation.extend(jobs)

    def drop_dead_letters(self, user: User) -> int:
        """The dead letters (``dead``: failed jobs' bodies) naming ``user``, deleted."""
        kept = [job for job in self.dead if job.get("user_id") != user.id]
        dropped, self.dead[:] = len(self.dead) - len(kept), kept
        return dropped


Step = str | Message | Exception | Callable[[ChatRequest], "str | Message"]


def obeys(planted: str, answer: str, otherwise: str = "NO_REPLY") -> Callable[[ChatRequest], str]:
    """A step of a model that obeys text planted in what it reads: ``answer`` when a
    message of the request holds ``planted``, ``otherwise`` when it never saw it (a
    model can only obey what reaches it)."""

    def step(request: ChatRequest) -> str:
        seen = any(planted in m.content for m in request.messages)
        return answer if seen else otherwise

    return step


class ScriptedModel:
    """Replays scripted answers and records every request it got."""

    def __init__(self, *steps: Step, name: str = "scripted:test") -> None:
        self.steps = list(steps)
        self.requests: list[ChatRequest] = []
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def complete(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        if not self.steps:
            raise AssertionError("ScriptedModel ran out of steps")
        step = self.steps.pop(0)
        if callable(step) and not isinstance(step, Message):
            step = step(request)
        if isinstance(step, Exception):
            raise step
        message = step if isinstance(step, Message) else Message(role="assistant", content=step)
        return ChatResponse(
            message=message, usage=Usage(input_tokens=10, output_tokens=5), model=self.name
        )


#: a tool of the caller's, as the tests declare it (OpenAI's form: ``openai_tool(ORDER_TOOL)``)
ORDER_TOOL = {
    "name": "lookup_order",
    "description": "Find an order by its number",
    "parameters": {
        "type": "object",
        "properties": {"order_id": {"type": "integer"}},
        "required": ["order_id"],
    },
}


def openai_tool(tool: dict) -> dict:
    """A tool declaration in OpenAI's wrapped form."""
    return {"type": "function", "function": tool}


_TAG = re.compile(r"^(\s*- )\[[a-z]+(?::[\w.\-]+)?\] ", re.MULTILINE)


def untagged(text: str) -> str:
    """``text`` with each fact line's authority tag left out (``- [user] x`` -> ``- x``):
    for tests about something else than who said a fact."""
    return _TAG.sub(r"\1", text)


def failing(message: str = "provider down") -> ModelError:
    return ModelError(message)


def tool_call(name: str, arguments: str = "{}", call_id: str = "call_1") -> Message:
    return Message(
        role="assistant", tool_calls=[ToolCall(id=call_id, name=name, arguments=arguments)]
    )


def committed_turn(rt: Runtime, user: User, record: TurnRecord) -> None:
    """``record`` stored and committed as its session's next turn, as a turn's save does
    (its lease taken and released by the commit): what a flush then reads."""
    session, n = record.session_id, record.turn
    rt.store.put(user, turn_path(session, n), record.model_dump_json())
    rt.table.acquire_session_lease(user, session, f"o{n}", 0, 1)
    rt.table.commit_turn(user, session, f"o{n}", n, record.created_at)


def make_runtime(
    *,
    settings: Settings | None = None,
    agent: object | None = None,
    memory: object | None = None,
    compaction: object | None = None,
    clock: ManualClock | None = None,
    **overrides: object,
) -> Runtime:
    """A Runtime on in-memory fakes; ``agent``, ``memory`` and ``compaction`` replace
    those roles' models (an unset role uses the configured model, as deployed)."""
    # a busy session answers at once here (deployed, it is waited for a few seconds)
    settings = settings or Settings(consolidation_min_gap_seconds=0, session_wait_seconds=0)
    clock = clock or ManualClock()
    counter = TokenCounter()
    chosen = {"agent": agent, "memory": memory, "compaction": compaction}
    roles = {k: v for k, v in chosen.items() if v is not None}
    ids = itertools.count(1)
    rt = Runtime(
        settings=settings,
        store=MemoryStore(clock),
        table=MemoryTable(),
        queue=RecordingQueue(clock),
        models=ModelRegistry(settings, counter=counter, overrides=roles),  # type: ignore[arg-type]
        counter=counter,
        clock=clock,
        new_id=lambda: f"id-{next(ids)}",
    )
    for name, value in overrides.items():
        setattr(rt, name, value)
    return rt
