"""What the agent writes to the workspace: the thread log and the working context.

    sessions/<s>/turns/<n>.json   TurnRecord, create-only: the source of truth of a turn
    sessions/<s>/context.json     WorkingContext, CAS: what the next call sends the model

Both are plain JSON a person can read. The context may be compacted or trimmed; the
turn objects never are, so no message is ever lost.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent_harness.models.base import Message, Usage

__all__ = ["MemoryInjection", "TurnRecord", "WorkingContext"]


class MemoryInjection(BaseModel):
    model_config = ConfigDict(defer_build=True)

    """How MEMORY.md entered this turn (provenance of what the model was shown)."""

    etag: str | None = None
    tokens: int = 0
    original_tokens: int = 0
    truncated: bool = False


class TurnRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    v: Literal[1] = 1
    session_id: str
    turn: int = Field(ge=1)
    created_at: str
    source: Literal["agent", "import"] = "agent"
    messages: list[Message]
    model: str | None = None
    usage: Usage = Field(default_factory=Usage)
    memory: MemoryInjection = Field(default_factory=MemoryInjection)

    def created(self) -> datetime:
        return datetime.fromisoformat(self.created_at.replace("Z", "+00:00"))

    @classmethod
    def parse_or_none(cls, text: str) -> TurnRecord | None:
        """A stored turn, or None when the object is not one (e.g. edited by hand): the
        raw object stays in S3, and one bad object must not block a user's jobs."""
        try:
            return cls.model_validate_json(text)
        except ValidationError:
            return None


class WorkingContext(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    v: Literal[1] = 1
    session_id: str
    #: AGENTS.md as read when the session started (the session's persona), if any
    agents_md: str | None = None
    summary: str | None = None
    messages: list[Message] = Field(default_factory=list)
    last_turn: int = 0

    @classmethod
    def parse_or_none(cls, text: str) -> WorkingContext | None:
        try:
            return cls.model_validate_json(text)
        except ValidationError:
            return None
