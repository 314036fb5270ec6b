"""The ports: what the services need from storage, queues and tool servers, and the
records that cross them. The adapters (``aws/``: S3, DynamoDB, SQS; ``mcp/``: remote tool
servers) and the test fakes implement these Protocols; services import only this module,
so they never depend on an adapter, and a contract suite runs every port against both.

    WorkspaceStore      a user's files (S3): conditional writes, versions (each with its
                        writer), appends, and the users that have files
    SessionTable        a session's lease, turn counter and pause mark (the hot path)
    FlushTable          flush cursors, the flush throttle gate and its due marks
    ConsolidationTable  a user's consolidation lease, watermark and due marks
    UsageTable          per-user, per-day usage counters (tokens and calls by role, turns)
    StateTable          all four plus forgetting a user (one DynamoDB table)
    JobQueue            the post-turn and consolidation queues (SQS)
    ToolServers         the remote tool servers of a container (MCP)
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any, Protocol

from agent_harness.errors import PreconditionFailedError, StoreError

if TYPE_CHECKING:
    import builtins
    from datetime import datetime

    from agent_harness.ids import User
    from agent_harness.jobs import ConsolidationJob, PostTurnJob

__all__ = [
    "MAX_WRITER_CHARS",
    "ROLES",
    "TURN_ROLES",
    "Admission",
    "AppendBuilder",
    "Budget",
    "ConsolidationTable",
    "DayUsage",
    "DueUser",
    "FlushDue",
    "FlushTable",
    "GateClaim",
    "JobQueue",
    "ObjectInfo",
    "PauseMark",
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

    # builtins.list: the method above shadows list in the rest of the class body
    def list_versions(self, user: User, path: str) -> builtins.list[VersionInfo]: ...

    def list_users(self, prefix: str = "", *, limit: int = 100) -> builtins.list[str]:
        """The keys (``User.key``) of users with at least one object, sorted, starting
        with ``prefix`` (an encoded key prefix, no "/"), at most ``limit``."""
        ...

    def get_version(self, user: User, path: str, version_id: str) -> StoredObject | None: ...

    def delete(self, user: User, path: str, *, if_match: str | None = None) -> None: ...

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
class SessionState:
    turn: int = 0
    flush_cursor: int = 0
    index_cursor: int = 0
    #: the flush throttle gate: epoch ms of the last claimed flush slot
    flush_gate_ms: int | None = None
    pause: PauseMark | None = None


@dataclass(frozen=True)
class UserState:
    consumed: dict[str, int] = field(default_factory=dict)
    due_seq: int = 0
    is_due: bool = False
    last_consolidated_at: str | None = None


@dataclass(frozen=True)
class DueUser:
    user_key: str
    due_at: str
    last_consolidated_at: str | None


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

    def commit_turn(
        self,
        user: User,
        session_id: str,
        owner: str,
        turn: int,
        now_iso: str,
        *,
        usage: UsageDelta | None = None,
    ) -> None:
        """Record ``turn``, clear any pause mark and release the lease, atomically; with a
        non-empty ``usage``, add it to the user's day in the same atomic write (neither
        happens when the lease was lost: ``ConflictError``)."""
        ...

    def pause_turn(
        self, user: User, session_id: str, owner: str, mark: PauseMark, turn: int
    ) -> None: ...

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


class ConsolidationTable(Protocol):
    """Consolidation and the schedule tick: the user's lease, watermark and due mark."""

    def mark_consolidation_due(self, user: User, now_iso: str, shards: int) -> None: ...

    def get_user(self, user: User) -> UserState: ...

    def acquire_consolidation_lease(
        self, user: User, owner: str, now_ms: int, lease_ms: int
    ) -> UserState: ...

    def complete_consolidation(
        self, user: User, owner: str, consumed: dict[str, int], due_seq: int, now_iso: str
    ) -> bool: ...

    def release_consolidation_lease(self, user: User, owner: str) -> None: ...

    def query_due(self, shard: str) -> list[DueUser]: ...

    def abandon_consolidation(self, user: User, owner: str) -> bool: ...


#: the model roles whose spend is counted
ROLES = ("agent", "compaction", "memory")
#: the roles a turn budget counts (memory has its own budget)
TURN_ROLES = ("agent", "compaction")


@dataclass(frozen=True)
class UsageDelta:
    """Spend to add to one user's day (the day in HARNESS_TIMEZONE)."""

    day: str
    #: role -> (input tokens, output tokens)
    tokens: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: role -> model calls
    model_calls: dict[str, int] = field(default_factory=dict)
    turns: int = 0
    #: the estimate this turn's admission reserved, given back as its real tokens land
    released: int = 0
    #: a turn no admission counted (no limit when it began), so a later limit sees it
    unadmitted: int = 0

    def empty(self) -> bool:
        """Nothing to add: every count is zero (or absent)."""
        counts = [self.turns, self.released, self.unadmitted, *self.model_calls.values()]
        return not any(counts) and not any(i or o for i, o in self.tokens.values())

    @property
    def turn_tokens(self) -> int:
        return sum(sum(self.tokens.get(r, (0, 0))) for r in TURN_ROLES)


@dataclass(frozen=True)
class Budget:
    """Daily limits (0: unlimited); in an override, None keeps the stack's default."""

    tokens: int | None = None
    turns: int | None = None
    memory_tokens: int | None = None


@dataclass(frozen=True)
class Admission:
    """A turn's admission, with the day's counts it left (refused: found)."""

    admitted: bool
    #: turns admitted today (completed, running or failed), this one included if admitted
    turns: int
    #: agent and compaction tokens of committed turns
    turn_tokens: int
    #: ``turn_tokens`` plus the estimates of the turns still running
    reserved: int


@dataclass(frozen=True)
class DayUsage:
    """One user's spend on one day."""

    day: str
    #: every role of ROLES, (0, 0) when none
    tokens: dict[str, tuple[int, int]]
    #: every role of ROLES, 0 when none
    model_calls: dict[str, int]
    turns: int

    @property
    def total_tokens(self) -> int:
        """Every role's input and output tokens."""
        return sum(i + o for i, o in self.tokens.values())

    @property
    def turn_tokens(self) -> int:
        return sum(sum(self.tokens.get(r, (0, 0))) for r in TURN_ROLES)


def check_day(day: str) -> str:
    """``day`` if it is a YYYY-MM-DD date, else ValueError."""
    try:
        if len(day) == 10 and date.fromisoformat(day).isoformat() == day:
            return day
    except (TypeError, ValueError):
        pass
    raise ValueError(f"not a YYYY-MM-DD day: {day!r}")


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_usage(delta: UsageDelta) -> None:
    """ValueError unless the day is YYYY-MM-DD, every role is one of ROLES and every
    count a non-negative int (what both ``UsageTable`` implementations accept)."""
    check_day(delta.day)
    for role in (*delta.tokens, *delta.model_calls):
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}: expected one of {', '.join(ROLES)}")
    pairs = delta.tokens.values()
    if not all(isinstance(p, tuple | list) and len(p) == 2 and all(map(_count, p)) for p in pairs):
        raise ValueError("token counts must be (input, output) pairs of non-negative ints")
    counts = [*delta.model_calls.values(), delta.turns, delta.released, delta.unadmitted]
    if not all(map(_count, counts)):
        raise ValueError("model calls, turns and released tokens must be non-negative ints")


class UsageTable(Protocol):
    """Per-user, per-day usage counters: one item per (user, day), added to atomically.

    Each method raises ValueError for a malformed day, an unknown role or a negative
    count, and StoreError when the table fails."""

    def add_usage(self, user: User, delta: UsageDelta) -> None:
        """Add ``delta`` to the user's day (creating it); an empty delta writes nothing."""
        ...

    def usage_days(self, user: User, first_day: str, last_day: str) -> list[DayUsage]:
        """The user's days from ``first_day`` to ``last_day`` (both included) that have
        usage, oldest first; days without any are left out."""
        ...

    def top_users(self, day: str, limit: int) -> list[tuple[str, DayUsage]]:
        """The users (``User.key``) with the most tokens on ``day``, at most ``limit``
        (none below 1), highest first, ties by key."""
        ...

    def admit_turn(
        self,
        user: User,
        day: str,
        *,
        estimate: int,
        count_turn: bool,
        turn_limit: int,
        token_limit: int,
    ) -> Admission:
        """One conditional write: admit while admitted turns < ``turn_limit`` and reserved
        tokens < ``token_limit`` (0: none), reserving ``estimate``; refused: no write."""
        ...

    def release_admission(self, user: User, day: str, *, estimate: int, count_turn: bool) -> None:
        """Give back an admission whose turn ended without a commit (failed, or paused)."""
        ...

    def get_budget(self, user: User) -> Budget | None:
        """The user's budget override (an operator's), or None."""
        ...

    def set_budget(self, user: User, budget: Budget | None) -> None:
        """Replace the user's override; None removes it."""
        ...


class StateTable(SessionTable, FlushTable, ConsolidationTable, UsageTable, Protocol):
    """The one DynamoDB table holding all of the above, and forgetting a user."""

    def purge_user(self, user: User) -> int: ...


# -- queues and tool servers ---------------------------------------------------------------


class JobQueue(Protocol):
    def send_post_turn(self, user: User, job: PostTurnJob) -> None: ...

    def send_consolidation(self, jobs: list[ConsolidationJob]) -> None: ...


class ToolServers(Protocol):
    """The remote tool servers of a container (``mcp.remote_tools.RemoteToolServers``)."""

    def tools(self, *, remaining: float | None) -> list[Any]: ...

    def call(
        self, tool: Any, arguments: dict[str, Any], *, user_id: str, remaining: float | None
    ) -> str: ...
