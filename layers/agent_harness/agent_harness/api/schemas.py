"""Request bodies of the HTTP API, validated with pydantic (unknown fields rejected)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    field_validator,
)

from agent_harness.memory.search import DEFAULT_LIMIT, MAX_LIMIT, Mode, parse_match_mode

__all__ = [
    "MemoryPutBody",
    "MemorySaveBody",
    "MessageBody",
    "RollbackBody",
    "SaveSource",
    "SearchBody",
]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class MessageBody(_Body):
    message: StrictStr


class MemoryPutBody(_Body):
    content: StrictStr


class RollbackBody(_Body):
    version_id: StrictStr = Field(min_length=1, max_length=1024)


class SearchBody(_Body):
    query: StrictStr | None
    match_mode: Any = None  # null means phrase; "" and unknown modes are errors
    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)

    @field_validator("match_mode")
    @classmethod
    def _mode(cls, value: Any) -> Mode:
        return parse_match_mode(value)


#: how many turns one save may name as its source
MAX_SOURCE_TURNS = 100


class SaveSource(_Body):
    """The turns of one of the caller's sessions that the saved facts came from."""

    session_id: StrictStr
    turns: list[Annotated[StrictInt, Field(ge=1)]] = Field(
        min_length=1, max_length=MAX_SOURCE_TURNS
    )


class MemorySaveBody(_Body):
    content: StrictStr
    #: when the facts were learned (imported memories keep their date): the day of the
    #: ledger they are recorded in; now if absent. Must carry a UTC offset.
    timestamp: AwareDatetime | None = None
    #: the turns the facts came from: recorded as the section's provenance, and ranked
    #: memory_search reads the facts together with those turns' messages
    source: SaveSource | None = None
