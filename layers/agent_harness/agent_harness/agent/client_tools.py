"""The caller's own function tools: declared with a message, run by the caller.

POST /v1/sessions/{id}/messages  {"message", "tools": [{"name", "description",
                                  "parameters"}]}   (or OpenAI's {"type": "function",
                                                     "function": {...}})
  declare_tools         names unique, not a built-in or a remote tool's, schemas objects,
                        at most 64 tools and 64 KB: else 4xx, nothing written
  ClientTools           a call with bad JSON or arguments outside the schema is answered
                        to the model as ``Error: ...``; a good one is deferred (``None``):
                        the turn pauses and the caller gets it as ``requires_action``
  tool_result_message   the caller's answer as the tool message the model reads
                        (``is_error`` makes it an ``Error: ...`` result, as every failed
                        tool is)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from agent_harness.errors import PayloadTooLargeError, ValidationFailedError
from agent_harness.json_schema import SchemaError, argument_errors, check_tool_schema
from agent_harness.memory import MEMORY_TOOLS
from agent_harness.models.base import Message, ToolCall, ToolSpec

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agent_harness.settings import Settings

__all__ = [
    "BUILT_IN_TOOLS",
    "MAX_TOOLS",
    "MAX_TOOLS_BYTES",
    "ClientTools",
    "Declaration",
    "ToolResult",
    "call_view",
    "declare_tools",
    "tool_result_message",
]

#: names the harness's own tools have, whether or not they are enabled
BUILT_IN_TOOLS = frozenset(MEMORY_TOOLS)
MAX_TOOLS = 64
MAX_TOOLS_BYTES = 64 * 1024
CANCELLED = "Error: cancelled by the caller"
#: a call whose result the caller's conversation went on without (a chat completion)
NOT_RUN = "Error: not run: the conversation went on without this result"


class Declaration(Protocol):
    """A tool as the caller declared it (the body's shape is checked before)."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters(self) -> object: ...


@dataclass(frozen=True)
class ToolResult:
    """The caller's result of one of its tool calls."""

    tool_call_id: str
    content: str
    is_error: bool = False


def declare_tools(tools: Sequence[Declaration], settings: Settings) -> list[ToolSpec]:
    """Check the caller's declarations against each other, the built-in tools and the
    configured tool servers; returns them as tool specs."""
    if len(tools) > MAX_TOOLS:
        raise ValidationFailedError(f"at most {MAX_TOOLS} tools may be declared ({len(tools)})")
    plain = [
        {"name": t.name, "description": t.description, "parameters": t.parameters} for t in tools
    ]
    size = len(json.dumps(plain, ensure_ascii=False).encode())
    if size > MAX_TOOLS_BYTES:
        raise PayloadTooLargeError(
            f"the tool definitions are {size:,} bytes; the limit is {MAX_TOOLS_BYTES:,}"
        )
    prefixes = tuple(f"{server.name}__" for server in settings.mcp_servers)
    seen: set[str] = set()
    declared = []
    for index, tool in enumerate(tools):
        where = f"tools.{index}"
        if tool.name in BUILT_IN_TOOLS:
            raise ValidationFailedError(f"{where}: {tool.name} is the name of a built-in tool")
        if prefixes and tool.name.startswith(prefixes):
            raise ValidationFailedError(
                f"{where}: {tool.name} is in the namespace of a configured tool server"
            )
        if tool.name in seen:
            raise ValidationFailedError(f"{where}: {tool.name} is declared twice")
        seen.add(tool.name)
        raw = {"type": "object", "properties": {}} if tool.parameters is None else tool.parameters
        try:
            schema = check_tool_schema(raw)
        except SchemaError as exc:
            raise ValidationFailedError(f"{where} ({tool.name}).parameters: {exc}") from exc
        if "type" not in schema:  # providers want the object type spelled out
            schema = {"type": "object", **schema}
        declared.append(ToolSpec(name=tool.name, description=tool.description, parameters=schema))
    return declared


class ClientTools:
    """The caller's tools in a turn's tool box: checked here, run by the caller."""

    def __init__(self, tools: list[ToolSpec]) -> None:
        self._tools = {t.name: t for t in tools}

    def __contains__(self, name: str) -> bool:
        return name in self._tools

    def specs(self) -> list[ToolSpec]:
        return list(self._tools.values())

    def call(self, call: ToolCall) -> str | None:
        """``None`` for a well-formed call (deferred to the caller), else the error the
        model reads; the caller never sees a malformed call."""
        tool = self._tools[call.name]
        try:
            arguments = json.loads(call.arguments or "{}")
        except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
            return f"Error: the arguments of {call.name} are not valid JSON"
        if not isinstance(arguments, dict):
            return f"Error: the arguments of {call.name} must be a JSON object"
        problems = argument_errors(arguments, tool.parameters)
        if problems:
            return f"Error: invalid arguments for {call.name}: {'; '.join(problems)}"
        return None


def call_view(call: ToolCall) -> dict[str, Any]:
    """A pending call as the caller sees it: its arguments parsed (they were checked)."""
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError:  # pragma: no cover - deferred calls have valid JSON
        arguments = {}
    return {"id": call.id, "name": call.name, "arguments": arguments}


def tool_result_message(call: ToolCall, content: str, *, is_error: bool = False) -> Message:
    """The tool message the model reads for one of the caller's results."""
    if is_error and not content.startswith("Error:"):
        content = f"Error: {content}" if content.strip() else f"Error: {call.name} failed"
    return Message(role="tool", content=content, tool_call_id=call.id, name=call.name)
