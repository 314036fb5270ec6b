"""The provider-agnostic chat interface.

A ``ChatModel`` takes a ``ChatRequest`` (messages, optional tools, and the purpose of
the call) and returns a ``ChatResponse``. Providers translate to and from their wire
format; nothing else in the package knows one. ``purpose`` tells which of the three
roles of docs/design.md#models is calling (agent, flush/consolidate = memory, compact); real
providers only log it, the offline model uses it to pick its deterministic behaviour.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ChatModel",
    "ChatRequest",
    "ChatResponse",
    "Message",
    "Purpose",
    "ResponseFormat",
    "ToolCall",
    "ToolChoice",
    "ToolSpec",
    "Usage",
    "forced_tool",
]

Purpose = Literal["agent", "flush", "consolidate", "compact"]
Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    id: str
    name: str
    arguments: str = "{}"  # JSON text, as the model produced it


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None


class ToolSpec(BaseModel):
    model_config = ConfigDict(defer_build=True)

    name: str
    description: str
    parameters: dict[str, Any]


class Usage(BaseModel):
    model_config = ConfigDict(defer_build=True)

    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
        )


class ResponseFormat(BaseModel):
    """What the answer's text must be: a JSON object, or one valid against ``schema``
    (OpenAI's ``response_format``; emulated with a forced tool where a provider has none)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    type: Literal["json_object", "json_schema"]
    name: str = "response"
    json_schema: dict[str, Any] | None = None
    strict: bool = False
    description: str | None = None


def forced_tool(choice: ToolChoice | None) -> str | None:
    """The name of the one tool ``choice`` forces, if it forces one."""
    return choice.get("name") if isinstance(choice, dict) else None


#: ``auto`` (the model decides), ``none``, ``required`` (some tool), or one tool by name
ToolChoice = Literal["auto", "none", "required"] | dict[str, str]


class ChatRequest(BaseModel):
    model_config = ConfigDict(defer_build=True)

    messages: list[Message]
    tools: list[ToolSpec] = Field(default_factory=list)
    purpose: Purpose = "agent"
    max_output_tokens: int | None = None
    #: None: the provider's default (auto when tools are offered); ``{"name": ...}`` forces one
    tool_choice: ToolChoice | None = None
    response_format: ResponseFormat | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: list[str] = Field(default_factory=list)
    seed: int | None = None
    #: seconds this attempt may take (set by the resilience layer from the deadline)
    timeout: float | None = None


class ChatResponse(BaseModel):
    model_config = ConfigDict(defer_build=True)

    message: Message
    usage: Usage = Field(default_factory=Usage)
    model: str
    finish_reason: str | None = None


class ChatModel(Protocol):
    """Anything that can answer a chat request. Raise ``ModelError`` subclasses on failure."""

    @property
    def name(self) -> str: ...

    def complete(self, request: ChatRequest) -> ChatResponse: ...
