"""MEMORY.md's size cap (``HARNESS_MAX_MEMORY_CHARS``): the one rule every append to it
checks (a save, the agent's saves at commit, a review approval), and the room a turn's
saves may still take. A PUT, a rollback and a consolidation check the whole document
they write against the same limit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_harness.errors import MemoryFullError
from agent_harness.paths import MEMORY_FILE

if TYPE_CHECKING:
    from agent_harness.ids import User
    from agent_harness.runtime import Runtime

__all__ = ["memory_room", "within_cap"]


def within_cap(rt: Runtime, existing: str, addition: str) -> str:
    """``addition`` to MEMORY.md (``existing``), or MemoryFullError when the file would
    pass its cap: every append checks it on each compare-and-swap attempt, so no race
    can pass it."""
    if len(existing) + len(addition) > rt.settings.max_memory_chars:
        raise MemoryFullError(len(existing) + len(addition), rt.settings.max_memory_chars)
    return addition


def memory_room(rt: Runtime, user: User) -> int:
    """How many characters a save may still add to MEMORY.md (one GET)."""
    current = rt.store.get(user, MEMORY_FILE)
    return rt.settings.max_memory_chars - len(current.content if current else "")
