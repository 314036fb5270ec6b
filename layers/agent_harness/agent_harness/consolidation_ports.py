"""The consolidation port: a user's consolidation lease, watermark, due marks and its
last failures, and the records that cross it (``ports`` re-exports every name, so
services import ``ports`` only).

    ConsolidationTable  the lease, the watermark, the due mark (a failed run's backoff),
                        the expiry mark; the schedule's queries over them
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agent_harness.ids import User

__all__ = ["ConsolidationTable", "DueUser", "UserState"]


@dataclass(frozen=True)
class UserState:
    consumed: dict[str, int] = field(default_factory=dict)
    due_seq: int = 0
    is_due: bool = False
    last_consolidated_at: str | None = None
    #: failed consolidations in a row, the last one's time and error, its retry time
    failures: int = 0
    failed_at: str | None = None
    last_error: str | None = None
    retry_at: str | None = None

    def view(self) -> dict[str, Any]:
        """The consolidation's status as the API shows it (GET /v1/usage, POST
        /v1/memory/consolidate): due or not, the last run that finished, and the last
        failure while runs keep failing (null once one finishes)."""
        failure = None
        if self.failures:
            failure = {
                "at": self.failed_at,
                "error": self.last_error,
                "failures": self.failures,
                "retry_at": self.retry_at,
            }
        return {
            "due": self.is_due,
            "last_consolidated_at": self.last_consolidated_at,
            "last_failure": failure,
        }

    def failing(self) -> str | None:
        """A sentence for people while consolidation keeps failing (None: it is not)."""
        if not self.failures:
            return None
        runs = "run" if self.failures == 1 else f"{self.failures} runs in a row"
        return (
            f"Consolidation is failing: the last {runs} failed (at {self.failed_at}: "
            f"{self.last_error}); MEMORY.md keeps its last good version and the schedule "
            f"tries again at {self.retry_at}."
        )


@dataclass(frozen=True)
class DueUser:
    user_key: str
    due_at: str
    last_consolidated_at: str | None


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

    def fail_consolidation(
        self, user: User, owner: str, error: str, now_iso: str, retry_at_iso: str, shards: int
    ) -> None:
        """Release the lease, record a failed run (failures in a row, time, error) and
        move the due mark to ``retry_at_iso``; a finished run clears it all."""

    def query_due(self, shard: str) -> list[DueUser]: ...

    def abandon_consolidation(self, user: User, owner: str) -> bool: ...

    def mark_expiry_due(self, user: User, due_at_iso: str, shards: int) -> None:
        """The day a fact of the user's expires (its ``until`` passed): the schedule tick
        marks the user due then, so MEMORY.md drops it with no write to announce it."""
        ...

    def clear_expiry_due(self, user: User) -> None: ...

    def query_expiry_due(self, shard: str, now_iso: str) -> list[DueUser]:
        """Users whose expiry mark in ``shard`` is due by ``now_iso``."""
        ...
