"""The ports: what the services need from storage, queues and tool servers, and the
records that cross them. The adapters (``aws/``: S3, DynamoDB, SQS; ``mcp/``: remote tool
servers) and the test fakes implement these Protocols; services import only this module,
so they never depend on an adapter, and a contract suite runs every port against both.

    WorkspaceStore      a user's files (S3): conditional writes, versions (each with its
                        writer), appends, and the users that have files
    SessionTable        a session's lease, turn counter and pause mark (the hot path)
    FlushTable          flush cursors, the flush throttle gate and its due marks
    ConsolidationTable  a user's consolidation lease, watermark, due marks and failures
                        (``consolidation_ports``, re-exported here)
    UsageTable          per-user, per-day usage counters and budgets (``usage_ports``,
                        re-exported here)
    MembershipTable     shared scopes' members and roles (``member_ports``, re-exported)
    StateTable          all five plus forgetting a user (one DynamoDB table)
    JobQueue            the post-turn and consolidation queues (SQS)
    ToolServers         the remote tool servers of a container (MCP)
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from agent_harness.consolidation_ports import ConsolidationTable, DueUser, UserState
from agent_harness.erasure_ports import Eraser, ForgetOutcome, Scrubbed
from agent_harness.errors import PreconditionFailedError, StoreError
from agent_harness.member_ports import Member, MembershipTable
from agent_harness.usage_ports import (
    ROLES,
    TURN_ROLES,
    Admission,
    Budget,
    DayUsage,
    ImportCheck,
    UsageDelta,
    UsageTable,
    check_day,
    check_usage,
)

if TYPE_CHECKING:
    import builtins
    from datetime import datetime

    from agent_harness.ids import User
    from agent_harness.jobs import ConsolidationJob, IndexJob, PostTurnJob

__all__ = [
    "MAX_WRITER_CHARS",
    "ROLES",
    "TURN_ROLES",
    "Admission",
    "AdmissionCheck",
    "AppendBuilder",
    "Budget",
    "ConsolidationTable",
    "DayUsage",
    "DueUser",
    "Eraser",
    "FlushDue",
    "FlushTable",
    "ForgetOutcome",
    "GateClaim",
    "ImportCheck",
    "JobQueue",
    "LeaseAdmission",
    "Member",
    "MembershipTable",
    "ObjectInfo",
    "PauseMark",
    "Scrubbed",
    "SessionState",
    "SessionTable",
    "StateTable",
    "StoredObject",
    "ToolServers",
    "UsageDelta",
    "UsageTable",
    "UserState",
    "VersionInfo",
    "WorkspaceStore",
    "cas_append",
    "check_day",
    "check_usage",
    "writer_label",
]


# -- the workspace (S3) ------------------------------------------------------------------


@dataclass(frozen=True)
class StoredObject:
    path: str
    content: str
    etag: str
    size: int
    last_modified: datetime | None = None
    version_id: str | None = None
    #: who wrote this version (``put(..., writer=...)``); None when not recorded
    writer: str | None = None


@dataclass(frozen=True)
class ObjectInfo:
    path: str
    size: int
    etag: str
    last_modified: datetime | None


@dataclass(frozen=True)
class VersionInfo:
    version_id: str
    last_modified: datetime | None
    etag: str
    size: int
    is_latest: bool


#: ``build(existing_text)`` returns the text to append, or None to append nothing.
AppendBuilder = Callable[[str], "str | None"]

MAX_WRITER_CHARS = 200
#: S3 allows 2 KB of user metadata; percent-encoded, 600 UTF-8 bytes stay under 1,800
_MAX_WRITER_BYTES = 600


def writer_label(writer: str | None) -> str | None:
    """The writer a store records for a version: None for none (or empty), otherwise at
    most ``MAX_WRITER_CHARS`` characters (and 600 UTF-8 bytes), cut at a character."""
    if not writer:
        return None
    clipped = writer[:MAX_WRITER_CHARS].encode()[:_MAX_WRITER_BYTES]
    return clipped.decode("utf-8", errors="ignore")


class WorkspaceStore(Protocol):
    def get(self, user: User, path: str) -> StoredObject | None: ...

    def get_from(self, user: User, path: str, offset: int) -> StoredObject | None: ...

    def get_many(self, user: User, paths: list[str]) -> dict[str, StoredObject]: ...

    def put(
        self,
        user: User,
        path: str,
        content: str,
        *,
        if_match: str | None = None,
        create_only: bool = False,
        writer: str | None = None,
    ) -> str: ...

    def append(
        self, user: User, path: str, build: AppendBuilder, *, writer: str | None = None
    ) -> str | None: ...

    def list(self, user: User, prefix: str, *, recursive: bool = True) -> list[ObjectInfo]: ...

    def list_together(
        self, user: User, folders: tuple[str, ...], *, expect: int
    ) -> dict[str, builtins.list[ObjectInfo]]:
        """Each folder's objects (recursive), listed at once: on S3 one request when the
        keys from the first folder to the end of the last are about ``expect``."""
        ...

    # builtins.list: the method above shadows list in the rest of the class body
    def list_versions(self, user: User, path: str) -> builtins.list[VersionInfo]: ...

    def list_versions_page(
        self, user: User, path: str, *, limit: int, after: str | None = None
    ) -> tuple[builtins.list[VersionInfo], str | None]:
        """At most ``limit`` versions, newest first, those older than version ``after``
        when given; and the cursor of the next page (the last version id returned), None
        when no older version remains. A cursor that names no version gives no versions."""
        ...

    def list_users(self, prefix: str = "", *, limit: int = 100) -> builtins.list[str]:
        """The keys (``User.key``) of users with at least one object, sorted, starting
        with ``prefix`` (an encoded key prefix, no "/"), at most ``limit``."""
        ...

    def get_version(self, user: User, path: str, version_id: str) -> StoredObject | None: ...

    def delete(self, user: User, path: str, *, if_match: str | None = None) -> None: ...

    def changed_since(self, user: User, since: datetime) -> builtins.list[str]:
        """The paths under the user's root with a version written at or after ``since``,
        sorted, deleted ones too (their versions are still stored): one listing of every
        version under the root."""
        ...

    def delete_versions(self, user: User, path: str, version_ids: builtins.list[str]) -> int:
        """Delete these versions of one object for good (not a delete marker: forgetting
        a writer removes the versions that name them); how many were deleted. Deleting
        the current version makes the one before it current."""
        ...

    def purge(self, user: User) -> int: ...


def cas_append(
    store: WorkspaceStore,
    user: User,
    path: str,
    build: AppendBuilder,
    *,
    attempts: int = 8,
    sleep: Callable[[float], None] = time.sleep,
    writer: str | None = None,
) -> str | None:
    """Append ``build(existing)`` to ``path``: GET, then PUT conditioned on what was read
    (If-Match, or If-None-Match when absent). After a lost race (412) the object is read
    again and ``build`` called again, so it can re-check what is already there
    (idempotent appends). Returns the new ETag, or None when ``build`` added nothing.
    Correct as long as the store's conditional write is atomic, as S3's is. ``writer`` is
    recorded on the version written, as by ``put``."""
    for attempt in range(attempts):
        current = store.get(user, path)
        existing = current.content if current else ""
        addition = build(existing)
        if not addition:
            return None
        try:
            if current is None:
                return store.put(user, path, addition, create_only=True, writer=writer)
            return store.put(user, path, existing + addition, if_match=current.etag, writer=writer)
        except PreconditionFailedError:
            sleep(random.uniform(0, min(1.0, 0.02 * 2**attempt)))
    raise StoreError(f"appending to {path} failed: too many concurrent writers")


# -- the state table (DynamoDB) ----------------------------------------------------------


@dataclass(frozen=True)
class PauseMark:
    """A turn paused for the caller's tool results: the commit point of the pause (the
    working context holds the turn itself under the same ``pause_id``)."""

    pause_id: str
    turn: int
    paused_at_ms: int


@dataclass(frozen=True)
class Place:
    """Where a reply of a stateless client's conversation was given (api/chat_sessions):
    written by the write that ends the turn, so it never names a turn that was not."""

    key: str  # "chat:<digest>" or "resp:<response id>"
    session_id: str
    turn: int
    expires_at: int  # epoch seconds; later, a reader treats it as missing (TTL is lazy)
    body: str | None = None  # a stored response object (JSON), for GET /v1/responses/{id}


@dataclass(frozen=True)
class SessionState:
    turn: int = 0
    flush_cursor: int = 0
    index_cursor: int = 0
    #: the flush throttle gate: epoch ms of the last claimed flush slot
    flush_gate_ms: int | None = None
    pause: PauseMark | None = None


@dataclass(frozen=True)
class FlushDue:
    """A session whose trailing turns wait behind the flush throttle."""

    user_id: str
    session_id: str
    turn: int
    due_at: str


@dataclass(frozen=True)
class GateClaim:
    """The outcome of a throttle-gate claim: ``held_ms`` is the claim in force when
    ours lost; ``previous_ms`` is what ours replaced (to give it back on failure)."""

    claimed: bool
    claimed_ms: int
    previous_ms: int | None = None
    held_ms: int | None = None


@dataclass(frozen=True)
class AdmissionCheck:
    """What a turn asks of its user's day in the write that takes its session lease."""

    day: str
    #: tokens reserved while the turn runs (0 without a token limit)
    estimate: int
    #: a new message counts a turn; a paused turn's resume does not
    count_turn: bool
    turn_limit: int
    token_limit: int
    #: the override the limits came from: the write checks it is still the one stored
    override: Budget | None

    @property
    def admits(self) -> bool:
        """Is there a limit to admit under (else the write only checks the override)?"""
        return self.turn_limit > 0 or self.token_limit > 0


@dataclass(frozen=True)
class LeaseAdmission:
    """One try at a session lease with its turn's admission. ``taken``: both done. Else
    what differed: the override stored (``override_changed``: it is ``override``), the
    budget (``refused``: the day's counts), or the session (``session_changed``: it is
    ``session``, None for no item)."""

    taken: bool
    override_changed: bool = False
    override: Budget | None = None
    refused: Admission | None = None
    session_changed: bool = False
    session: SessionState | None = None


class SessionTable(Protocol):
    """The agent's turn: one lease per (user, session), the turn counter, the pause mark."""

    def acquire_session_lease(
        self,
        user: User,
        session_id: str,
        owner: str,
        now_ms: int,
        lease_ms: int,
        *,
        must_exist: bool = False,
    ) -> SessionState: ...

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
        """One atomic write: take the lease of a session that is as ``expected`` (None: a
        session never written), check the user's override is still ``check.override``
        and admit the turn under ``check``'s limits. Nothing is written unless all three
        hold; the answer then says what was found instead. ``SessionBusyError`` when
        another holder has the lease (and neither the override nor the budget refused)."""
        ...

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
        """Record ``turn``, clear any pause mark and release the lease, atomically; with a
        non-empty ``usage``, add it to the user's day, and put ``places``, in the same
        atomic write (nothing happens when the lease was lost: ``ConflictError``)."""
        ...

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
        """Mark the turn paused and release the lease; with a non-empty ``usage``, add it
        to the user's day and put ``places`` in the same atomic write, as ``commit_turn``
        does."""
        ...

    def get_place(self, user: User, key: str) -> Place | None:
        """The place under ``key`` (expired or not: the reader judges), None if none."""
        ...

    def delete_place(self, user: User, key: str) -> bool:
        """Delete the place under ``key``; whether there was one."""
        ...

    def release_session_lease(self, user: User, session_id: str, owner: str) -> None: ...

    def get_session(self, user: User, session_id: str) -> SessionState | None: ...


class FlushTable(Protocol):
    """The post-turn job and the schedule tick: cursors, the throttle gate, due marks."""

    def advance_flush_cursor(
        self, user: User, session_id: str, to_turn: int, now_iso: str, *, clear_due: bool = False
    ) -> bool: ...

    def claim_flush_gate(
        self, user: User, session_id: str, now_ms: int, gap_ms: int
    ) -> GateClaim: ...

    def release_flush_gate(self, user: User, session_id: str, claim: GateClaim) -> None: ...

    def mark_flush_due(self, user: User, session_id: str, due_at_iso: str, shards: int) -> None: ...

    def query_flush_due(self, shard: str, now_iso: str) -> list[FlushDue]: ...

    def clear_flush_due(self, user: User, session_id: str) -> None: ...

    def advance_index_cursor(self, user: User, session_id: str, to_turn: int) -> bool: ...


class StateTable(
    SessionTable, FlushTable, ConsolidationTable, UsageTable, MembershipTable, Protocol
):
    """The one DynamoDB table holding all of the above, and forgetting a user."""

    def purge_user(self, user: User) -> int: ...


# -- queues and tool servers ---------------------------------------------------------------


class JobQueue(Protocol):
    def send_post_turn(self, user: User, job: PostTurnJob) -> None: ...

    def send_index(self, owner: User, job: IndexJob) -> None: ...

    def send_consolidation(self, jobs: list[ConsolidationJob]) -> None: ...

    def drop_dead_letters(self, user: User) -> int:
        """Delete the failed jobs naming ``user`` (forgetting them); how many."""
        ...


class ToolServers(Protocol):
    """The remote tool servers of a container (``mcp.remote_tools.RemoteToolServers``)."""

    def tools(self, *, remaining: float | None) -> list[Any]: ...

    def call(
        self, tool: Any, arguments: dict[str, Any], *, user_id: str, remaining: float | None
    ) -> str: ...
