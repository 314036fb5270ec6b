"""Message conversion for providers whose APIs want strictly alternating user/assistant
turns with typed content blocks (Anthropic Messages, Bedrock Converse).

    system messages            -> one system text
    user / assistant text      -> text parts
    assistant tool calls       -> tool_use parts
    tool results               -> tool_result parts in a *user* turn
    consecutive same-role turns are merged; the first turn is a user turn
    sampling options           -> each API's names (both take temperature 0-1, no seed)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from agent_harness.models.base import ChatRequest, Message

__all__ = [
    "Part",
    "Turn",
    "alternating_turns",
    "history_tools",
    "parse_arguments",
    "sampling",
]


@dataclass(frozen=True)
class Part:
    kind: Literal["text", "tool_use", "tool_result"]
    text: str = ""
    id: str = ""
    name: str = ""
    input: dict[str, Any] = field(default_factory=dict)


@dataclass
class Turn:
    role: Literal["user", "assistant"]
    parts: list[Part]


def parse_arguments(arguments: str) -> dict[str, Any]:
    """Tool-call arguments as an object; text that is not a JSON object is kept whole."""
    try:
        value = json.loads(arguments or "{}")
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
        return {"_raw": arguments}
    return value if isinstance(value, dict) else {"_value": value}


def alternating_turns(messages: list[Message]) -> tuple[str, list[Turn]]:
    system: list[str] = []
    turns: list[Turn] = []
    for message in messages:
        if message.role == "system":
            system.append(message.content)
            continue
        role: Literal["user", "assistant"] = "assistant" if message.role == "assistant" else "user"
        parts: list[Part] = []
        if message.role == "tool":
            parts.append(Part("tool_result", text=message.content, id=message.tool_call_id or ""))
        else:
            if message.content.strip():
                parts.append(Part("text", text=message.content))
            parts.extend(
                Part("tool_use", id=c.id, name=c.name, input=parse_arguments(c.arguments))
                for c in message.tool_calls
            )
        if not parts:
            continue
        if turns and turns[-1].role == role:
            turns[-1].parts.extend(parts)
        else:
            turns.append(Turn(role, parts))
    if turns and turns[0].role == "assistant":
        turns.insert(0, Turn("user", [Part("text", text="(conversation continues)")]))
    return "\n\n".join(system), turns


def history_tools(turns: list[Turn]) -> list[str]:
    """The names of the tools the history called, in order, once each: Anthropic and
    Bedrock refuse a history with tool blocks unless tools are declared, even on a call
    that offers none (the loop's last call)."""
    return list(dict.fromkeys(p.name for t in turns for p in t.parts if p.kind == "tool_use"))


def sampling(request: ChatRequest, *, top_p: str, stop: str) -> dict[str, Any]:
    """The request's sampling options under an API's names for top_p and the stop
    sequences; the temperature is capped at 1 (both APIs' range is 0-1) and the seed is
    left out (neither has one: docs/models.md)."""
    out: dict[str, Any] = {}
    if request.temperature is not None:
        out["temperature"] = min(request.temperature, 1.0)
    if request.top_p is not None:
        out[top_p] = request.top_p
    if request.stop:
        out[stop] = request.stop
    return out
