"""The bounded ReAct loop.

    messages --> model --> tool calls? --no--> reply
                  ^            | yes
                  |            v
                  +---- tool results (errors are results, never raised)

At most ``max_calls`` model calls per turn; the last allowed call is made without
tools, so the loop always ends with an answer. Key insight: the loop never changes;
new behaviour arrives as tools.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from agent_harness.models.base import ChatRequest, Message, ToolCall, ToolSpec, Usage

if TYPE_CHECKING:
    from agent_harness.models.base import ChatModel

__all__ = ["LoopResult", "ToolBox", "run_loop"]


class ToolBox(Protocol):
    def specs(self) -> list[ToolSpec]: ...

    def call(self, call: ToolCall) -> str:
        """Run one tool call; failures come back as ``Error: ...`` text."""
        ...


@dataclass
class LoopResult:
    messages: list[Message]  # what the turn added: assistant and tool messages
    reply: str
    usage: Usage
    model_calls: int
    model: str


def run_loop(
    model: ChatModel, messages: list[Message], *, tools: ToolBox | None, max_calls: int
) -> LoopResult:
    added: list[Message] = []
    usage = Usage()
    specs = tools.specs() if tools else []
    for call_no in range(1, max_calls + 1):
        offered = specs if call_no < max_calls else []
        response = model.complete(
            ChatRequest(messages=[*messages, *added], tools=offered, purpose="agent")
        )
        usage += response.usage
        message = response.message
        if message.tool_calls and not offered:
            # no tools were offered (last call): calls are not executed, the text is the answer
            message = Message(role="assistant", content=message.content)
        added.append(message)
        if not message.tool_calls:
            return LoopResult(added, message.content, usage, call_no, response.model)
        for tool_call in message.tool_calls:
            result = tools.call(tool_call) if tools else f"Error: unknown tool {tool_call.name}"
            added.append(
                Message(role="tool", content=result, tool_call_id=tool_call.id, name=tool_call.name)
            )
    raise AssertionError("unreachable: the last call offers no tools")  # pragma: no cover
