"""The usage port: per-user, per-day spend counters, budgets and turn admissions, and the
records that cross it (``ports`` re-exports every name, so services import ``ports`` only).

    UsageTable          per-user, per-day usage counters (tokens and calls by role, turns,
                        imported turns), the release of a turn's admission, the admission
                        of an import, budget overrides
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from agent_harness.ids import User

__all__ = [
    "ROLES",
    "TURN_ROLES",
    "Admission",
    "Budget",
    "DayUsage",
    "ImportCheck",
    "UsageDelta",
    "UsageTable",
    "check_day",
    "check_usage",
]


#: the model roles whose spend is counted (``embedding``: the vectors of recall by
#: meaning, indexing and queries; counted with memory in the memory budget)
ROLES = ("agent", "compaction", "memory", "embedding")
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
    """The day's admission counts, as a refused admission found them."""

    admitted: bool
    #: turns admitted today (completed, running or failed)
    turns: int
    #: agent and compaction tokens of committed turns
    turn_tokens: int
    #: ``turn_tokens`` plus the estimates of the turns still running
    reserved: int
    #: turns imported today (imports and memory saves)
    imported: int = 0


@dataclass(frozen=True)
class ImportCheck:
    """What an import (or a memory save) asks of its user's day: its ``turns`` are added
    to the day's imported turns while the turns, the tokens and the imported turns are
    under their limits (0: no limit). Nothing is reserved: an import calls no model on
    its way in; its flush spends memory tokens under their own budget."""

    day: str
    turns: int
    turn_limit: int
    token_limit: int
    import_limit: int


@dataclass(frozen=True)
class DayUsage:
    """One user's spend on one day."""

    day: str
    #: every role of ROLES, (0, 0) when none
    tokens: dict[str, tuple[int, int]]
    #: every role of ROLES, 0 when none
    model_calls: dict[str, int]
    turns: int
    #: turns imported (imports and memory saves)
    imported: int = 0

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

    def release_admission(self, user: User, day: str, *, estimate: int, count_turn: bool) -> None:
        """Give back an admission whose turn ended without a commit (failed, or paused)."""
        ...

    def admit_imports(self, user: User, check: ImportCheck) -> Admission | None:
        """Add ``check.turns`` to the day's imported turns if every limit of ``check``
        allows it, in one conditional write: None when admitted, else the day's counts
        as found (nothing written)."""
        ...

    def release_imports(self, user: User, day: str, turns: int) -> None:
        """Give back the imported turns of an import that wrote nothing."""
        ...

    def get_budget(self, user: User) -> Budget | None:
        """The user's budget override (an operator's), or None."""
        ...

    def set_budget(self, user: User, budget: Budget | None) -> None:
        """Replace the user's override; None removes it."""
        ...
