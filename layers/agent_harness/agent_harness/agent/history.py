"""Reading a session's thread log (GET /v1/sessions/{id}/messages)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_harness.ids import validate_session_id
from agent_harness.paths import turn_path, turns_prefix
from agent_harness.records import TurnRecord

if TYPE_CHECKING:
    from agent_harness.ids import User
    from agent_harness.runtime import Runtime

__all__ = ["list_turns", "turn_numbers"]


def turn_numbers(rt: Runtime, user: User, session_id: str) -> list[int]:
    """Numbers of the session's turn objects, committed or not, in order (one LIST)."""
    names = (info.path.rsplit("/", 1)[1] for info in rt.store.list(user, turns_prefix(session_id)))
    return sorted(int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit())


def list_turns(
    rt: Runtime, user: User, session_id: str, *, after: int = 0, limit: int = 100
) -> tuple[list[TurnRecord], int | None]:
    """Turns numbered above ``after``, oldest first, at most ``limit``; and the ``after``
    value of the next page (None on the last page). One LIST, then concurrent GETs."""
    validate_session_id(session_id)
    page = [n for n in turn_numbers(rt, user, session_id) if n > after]
    more = len(page) > limit
    page = page[:limit]
    objects = rt.store.get_many(user, [turn_path(session_id, n) for n in page])
    parsed = (TurnRecord.parse_or_none(objects[p].content) for p in sorted(objects))
    records = [r for r in parsed if r is not None]
    return records, (page[-1] if more and page else None)
