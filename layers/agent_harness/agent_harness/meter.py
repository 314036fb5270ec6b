"""What one request's model calls spent, counted as each call returns.

A turn wraps its models in ``Metered``: every answer's usage lands in the request's
``Meter`` the moment the call returns, so the spend is known however the request ends
(committed, paused, failed, out of time) and ``usage`` counts it in the user's day.
Before every call but the request's first, the meter's ``guard`` may refuse it (a
token budget spent mid-turn), which bounds a turn's overspend to one call's worth.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent_harness.models.base import Usage

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_harness.models.base import ChatModel, ChatRequest, ChatResponse

__all__ = ["Meter", "Metered", "Spend"]


@dataclass(frozen=True)
class Spend:
    """Tokens and calls by role (``agent``, ``compaction``, ...)."""

    tokens: dict[str, Usage] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)

    @property
    def total_tokens(self) -> int:
        return sum(u.input_tokens + u.output_tokens for u in self.tokens.values())

    def empty(self) -> bool:
        return not any(self.calls.values()) and not self.total_tokens

    def __add__(self, other: Spend) -> Spend:
        roles = set(self.tokens) | set(other.tokens) | set(self.calls) | set(other.calls)
        return Spend(
            {r: self.tokens.get(r, Usage()) + other.tokens.get(r, Usage()) for r in roles},
            {r: self.calls.get(r, 0) + other.calls.get(r, 0) for r in roles},
        )


class Meter:
    """One request's spend not yet counted. ``guard`` (given the spend so far, counted
    or not) runs before each call after the first and raises to refuse it."""

    def __init__(self, guard: Callable[[int], None] | None = None) -> None:
        self._pending = Spend()
        self._taken = 0  # tokens already handed to a count: the guard still sees them
        self._calls = 0
        self._guard = guard
        self._lock = threading.Lock()

    def before_call(self) -> None:
        if self._calls and self._guard is not None:
            self._guard(self._taken + self._pending.total_tokens)

    def add(self, role: str, usage: Usage, *, guarded: bool = True) -> None:
        """Count one call's ``usage``. ``guarded``: a model call, after which the guard is
        asked before the next; a query embedding (a few tokens, no answer) is counted
        but leaves the request's first model call its first."""
        with self._lock:
            self._calls += 1 if guarded else 0
            self._pending = self._pending + Spend({role: usage}, {role: 1})

    @property
    def pending(self) -> Spend:
        return self._pending

    def take(self) -> Spend:
        """The spend so far, for one count: the meter starts again from nothing."""
        with self._lock:
            spent, self._pending = self._pending, Spend()
            self._taken += spent.total_tokens
            return spent


class Metered:
    """A model whose every answer is counted in ``meter`` under ``role``."""

    def __init__(self, inner: ChatModel, meter: Meter, role: str) -> None:
        self.inner, self.meter, self.role = inner, meter, role

    @property
    def name(self) -> str:
        return self.inner.name

    def complete(self, request: ChatRequest) -> ChatResponse:
        self.meter.before_call()
        response = self.inner.complete(request)
        self.meter.add(self.role, response.usage)
        return response
