"""``response_format`` for providers without an equivalent that works on every model
(Anthropic Messages, Bedrock Converse): one more tool, whose input schema is the asked
format and whose input is the answer, and a tool choice that makes the model call a tool.

    offered        the request's tools + ANSWER_TOOL; the choice is "any" (some tool:
                   a memory tool may still run first), or ANSWER_TOOL itself when no
                   other tool is offered (the loop's last call, a corrective retry;
                   Bedrock sends "any" for it, which more of its models take)
    answered       a call of ANSWER_TOOL is the answer: its input as JSON text, the
                   response's other calls dropped (the turn ends with it)

Not used when the caller's tool_choice is "required" or names a tool: that turn ends in
a call of the caller's tool, never in an answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent_harness.models.base import ToolSpec, forced_tool

if TYPE_CHECKING:
    from agent_harness.models.base import ChatRequest, Message

__all__ = ["ANSWER_TOOL", "Offer", "answered", "offer"]

ANSWER_TOOL = "final_answer_json"


@dataclass(frozen=True)
class Offer:
    """The tools to declare and the choice to send: ``auto``, ``any``, ``none`` or a
    tool's name (``tool``), in the provider-neutral words both adapters map."""

    tools: list[ToolSpec]
    choice: str | None
    tool: str | None = None
    emulated: bool = False


def offer(request: ChatRequest) -> Offer:
    """What to declare for ``request``: its tools and choice, with the answer tool when
    it asks for a format."""
    name = forced_tool(request.tool_choice)
    if name is not None:
        return Offer(list(request.tools), "tool", name)
    if request.tool_choice == "required" and request.tools:
        return Offer(list(request.tools), "any")
    fmt = request.response_format
    if fmt is None:
        choice = request.tool_choice if request.tools and request.tool_choice == "auto" else None
        return Offer(list(request.tools), choice)
    schema: dict[str, Any] = fmt.json_schema or {"type": "object"}
    if schema.get("type") != "object":  # a tool's input is an object
        schema = {"type": "object", **schema}
    answer = ToolSpec(
        name=ANSWER_TOOL,
        description=(
            "Give your final answer to the user by calling this tool: its input is the "
            f"answer, as {fmt.name} ({fmt.description or 'the format the user asked for'})."
        ),
        parameters=schema,
    )
    if not request.tools:
        return Offer([answer], "tool", ANSWER_TOOL, emulated=True)
    return Offer([*request.tools, answer], "any", emulated=True)


def answered(message: Message, emulated: bool) -> Message:
    """The response as the loop reads it: a call of the answer tool becomes the answer."""
    if not emulated:
        return message
    call = next((c for c in message.tool_calls if c.name == ANSWER_TOOL), None)
    if call is None:
        return message
    try:
        value = json.loads(call.arguments or "{}")
    except ValueError:
        value = None
    text = json.dumps(value, ensure_ascii=False) if value is not None else call.arguments
    return message.model_copy(update={"content": text, "tool_calls": []})
