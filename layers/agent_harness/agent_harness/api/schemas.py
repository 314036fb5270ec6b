"""Request bodies of the HTTP API, validated with pydantic (unknown fields rejected)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictStr

__all__ = ["MAX_MEMORY_CHARS", "MemoryPutBody", "MessageBody", "RollbackBody"]

MAX_MEMORY_CHARS = 512_000


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MessageBody(_Body):
    message: StrictStr


class MemoryPutBody(_Body):
    content: StrictStr


class RollbackBody(_Body):
    version_id: StrictStr = Field(min_length=1, max_length=1024)
