"""Request bodies of the HTTP API, validated with pydantic (unknown fields rejected)."""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

from agent_harness.agent.request import MAX_TOOL_CALL_ID_CHARS, MAX_TOOL_RESULTS
from agent_harness.memory.engine.index import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    MAX_QUERY_CHARS,
    Mode,
    parse_match_mode,
)

__all__ = [
    "MemberBody",
    "MemoryPutBody",
    "MemorySaveBody",
    "MemorySearchBody",
    "MessageBody",
    "ReviewBody",
    "RollbackBody",
    "SaveSource",
    "SearchBody",
    "SupersedeBody",
    "ToolDeclaration",
    "ToolResultBody",
]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class ToolDeclaration(_Body):
    """A tool of the caller: ``{"name", "description", "parameters"}`` (a JSON Schema
    object). OpenAI's ``{"type": "function", "function": {...}}`` and Anthropic's
    ``input_schema`` are read as the same thing."""

    name: StrictStr = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: StrictStr = ""
    parameters: Any = None

    @field_validator("description", mode="before")
    @classmethod
    def _no_description(cls, value: Any) -> Any:
        return "" if value is None else value  # some clients send null

    @model_validator(mode="before")
    @classmethod
    def _unwrap(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if data.get("type") == "function" and isinstance(data.get("function"), dict):
            data = {k: v for k, v in data.items() if k not in ("type", "function")} | dict(
                data["function"]
            )
        elif data.get("type") == "custom":  # Anthropic's client tools
            data = {k: v for k, v in data.items() if k != "type"}
        if "input_schema" in data and "parameters" not in data:
            data = {k: v for k, v in data.items() if k != "input_schema"} | {
                "parameters": data["input_schema"]
            }
        # hints of the providers' own APIs that mean nothing here
        return {k: v for k, v in data.items() if k not in ("strict", "cache_control")}


class _TextPart(_Body):
    type: Literal["text"]
    text: StrictStr


class ToolResultBody(_Body):
    """The caller's result of one tool call of a paused turn."""

    tool_call_id: StrictStr = Field(min_length=1, max_length=MAX_TOOL_CALL_ID_CHARS)
    content: StrictStr | list[_TextPart]
    is_error: StrictBool = False

    @property
    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n".join(part.text for part in self.content)


#: a message's options for the agent model (api/openai_options)
OPTION_FIELDS = (
    "response_format",
    "tool_choice",
    "temperature",
    "top_p",
    "max_tokens",
    "stop",
    "seed",
)


class MessageBody(_Body):
    """One of: a new ``message`` (with the caller's ``tools``), the ``tool_results`` of
    the turn that awaits them (``tools`` may come again), or ``cancel`` of that turn."""

    model_config = ConfigDict(
        extra="forbid",
        defer_build=True,
        json_schema_extra={
            "oneOf": [
                {"required": ["message"]},
                {"required": ["tool_results"]},
                {"required": ["cancel"], "properties": {"cancel": {"const": True}}},
            ]
        },
    )

    message: StrictStr | None = None
    tools: list[ToolDeclaration] | None = None
    tool_results: list[ToolResultBody] | None = Field(default=None, max_length=MAX_TOOL_RESULTS)
    cancel: StrictBool | None = None
    #: the shared scopes a session's first message binds (agent.scoped)
    scopes: list[StrictStr] | None = Field(default=None, max_length=64)
    # the agent model's options, in OpenAI's words (api/openai_options checks them)
    response_format: dict[str, Any] | None = None
    tool_choice: StrictStr | dict[str, Any] | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: StrictStr | list[StrictStr] | None = None
    seed: int | None = None

    def options_fields(self) -> dict[str, Any]:
        """The options this body sets, as ``turn_options`` reads them."""
        return self.model_dump(include=set(OPTION_FIELDS), exclude_none=True)

    @model_validator(mode="after")
    def _one_action(self) -> MessageBody:
        if self.cancel is False:
            raise ValueError("cancel must be true when given")
        given = [self.message is not None, self.tool_results is not None, bool(self.cancel)]
        if sum(given) != 1:
            raise ValueError("send exactly one of message, tool_results or cancel")
        return self


class MemoryPutBody(_Body):
    content: StrictStr


class ReviewBody(_Body):
    """A person's decision on a line held for review (``decision`` is the same field)."""

    action: Literal["approve", "reject"] = Field(
        validation_alias=AliasChoices("action", "decision")
    )
    #: a shared scope's queue, which its maintainers decide (default: the caller's own)
    scope: StrictStr | None = Field(default=None, max_length=80)


class RollbackBody(_Body):
    version_id: StrictStr = Field(min_length=1, max_length=1024)


class SearchBody(_Body):
    query: StrictStr | None = Field(max_length=MAX_QUERY_CHARS)
    #: null or absent means phrase (validated even when absent); "" and unknown modes are
    #: errors
    match_mode: Any = Field(default=None, validate_default=True)
    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)

    @field_validator("match_mode")
    @classmethod
    def _mode(cls, value: Any) -> Mode:
        return parse_match_mode(value)


class MemorySearchBody(SearchBody):
    """memory_search's: current facts only, unless ``include_superseded``; ``as_of`` a day
    (YYYY-MM-DD) answers from the ledgers as they stood at its end."""

    include_superseded: StrictBool = False
    as_of: StrictStr | None = Field(default=None, pattern=r"^\d{4}-\d{2}-\d{2}$")
    #: whose memory: ``user`` (the caller's, the default) or a shared scope they are a
    #: member of (``project:apollo``; ``scopes.resolve`` decides)
    scope: StrictStr | None = Field(default=None, max_length=80)

    @field_validator("as_of")
    @classmethod
    def _day(cls, value: str | None) -> str | None:
        if value is not None:
            date.fromisoformat(value)  # 2026-02-30 is no day
        return value


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
    #: whose memory: ``user`` (the default) or a shared scope the caller maintains
    scope: StrictStr | None = Field(default=None, max_length=80)


class PromoteBody(_Body):
    """Facts of the caller's proposed for a shared scope (memory.facts.promotion)."""

    scope: StrictStr = Field(max_length=80)
    content: StrictStr
    #: the turns of the caller's session the facts came from: kept as their provenance
    source: SaveSource | None = None


class SupersedeBody(_Body):
    """POST /v1/memory/facts/{id}/supersede: ``by``, the corrected fact (absent or null:
    retract it); ``reason``, why a retraction retracts (a default otherwise). Their length
    is capped at HARNESS_MAX_MESSAGE_CHARS (413) by the library."""

    by: StrictStr | None = None
    reason: StrictStr | None = None
    #: whose fact: ``user`` (the default) or a shared scope the caller maintains
    scope: StrictStr | None = Field(default=None, max_length=80)

    @field_validator("by", "reason")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be blank (omit it instead)")
        return value


#: the most an operator's budget override may set, of any of its three limits
MAX_BUDGET = 10**12


class MemberBody(_Body):
    """An operator's grant of a role in a shared scope: reading takes ``member``,
    writing ``maintainer``."""

    role: Literal["member", "maintainer"]


class BudgetBody(_Body):
    """An operator's override of one user's daily limits: a number (0: unlimited) or
    null (the stack's default) for each."""

    # DynamoDB numbers hold 38 digits; no day needs more than a trillion
    tokens: int | None = Field(default=None, ge=0, le=MAX_BUDGET)
    turns: int | None = Field(default=None, ge=0, le=MAX_BUDGET)
    memory_tokens: int | None = Field(default=None, ge=0, le=MAX_BUDGET)
