"""The messages that cross the queues. Versioned, validated on both ends."""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ConsolidationJob", "FlushQueueJob", "IndexJob", "PostTurnJob", "flush_queue_job"]


class PostTurnJob(BaseModel):
    """One per turn, on FlushQueue (FIFO, group = user): flush up to ``turn``."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    v: Literal[1] = 1
    kind: Literal["post_turn"] = "post_turn"
    user_id: str = Field(min_length=1)
    session_id: str = Field(min_length=1)
    turn: int = Field(ge=1)
    #: why the job exists: a turn; an import; a compaction ("flush everything now",
    #: past any throttle); a tail sweep (a throttled session's trailing turns)
    reason: Literal["turn", "import", "compaction", "tail"] = "turn"
    #: a continuation of a job too big for one run (e.g. an import) starts after this turn
    after: int = Field(default=0, ge=0)
    queued_at: str


class ConsolidationJob(BaseModel):
    """One per due user, on ConsolidationQueue. ``force`` ignores the minimum gap."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    v: Literal[1] = 1
    kind: Literal["consolidate"] = "consolidate"
    user_id: str = Field(min_length=1)
    #: a shared scope's consolidation (``project:apollo``; ``user_id`` repeats it): its
    #: memory is ``User.for_scope``'s, never the user's whose id is the same text
    scope: str | None = None
    force: bool = False
    requested_at: str


class IndexJob(BaseModel):
    """On FlushQueue (group = the user): derive what a write outside a turn left behind
    (a save, an edit or rollback, an approval) off its request path: the memory's
    vectors. A shared scope's memory is indexed by its consolidation (memory_flush's
    role reaches users' prefixes only)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    v: Literal[1] = 1
    kind: Literal["index"] = "index"
    user_id: str = Field(min_length=1)
    queued_at: str


FlushQueueJob = PostTurnJob | IndexJob


def flush_queue_job(body: str) -> FlushQueueJob:
    """A FlushQueue message, by its ``kind`` (a body without one is a post-turn job)."""
    try:
        kind = json.loads(body).get("kind")
    except (ValueError, AttributeError):
        kind = None
    if kind == "index":
        return IndexJob.model_validate_json(body)
    return PostTurnJob.model_validate_json(body)
