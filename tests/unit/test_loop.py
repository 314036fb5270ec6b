from __future__ import annotations

from agent_harness.agent.loop import run_loop
from agent_harness.models.base import Message, ToolCall, ToolSpec
from tests.fakes import ScriptedModel, tool_call


class EchoTools:
    def __init__(self) -> None:
        self.calls: list[ToolCall] = []
        self.seen_requests: list[list[Message]] = []

    def seen(self, messages: list[Message]) -> None:
        self.seen_requests.append(messages)

    def specs(self) -> list[ToolSpec]:
        return [ToolSpec(name="echo", description="echo", parameters={"type": "object"})]

    def call(self, call: ToolCall) -> str:
        self.calls.append(call)
        return (
            f"echo:{call.arguments}" if call.name == "echo" else f"Error: unknown tool {call.name}"
        )


START = [Message(role="user", content="go")]


def test_tool_results_go_back_to_the_model_until_it_answers() -> None:
    tools = EchoTools()
    model = ScriptedModel(tool_call("echo", '{"x":1}'), "done")
    result = run_loop(model, START, tools=tools, max_calls=5)
    assert result.reply == "done" and result.model_calls == 2
    assert [m.role for m in result.messages] == ["assistant", "tool", "assistant"]
    assert (
        result.messages[1].content == 'echo:{"x":1}' and result.messages[1].tool_call_id == "call_1"
    )
    assert model.requests[1].messages[-1].role == "tool"
    assert result.usage.input_tokens == 20


def test_unknown_tools_and_errors_are_returned_as_results_not_raised() -> None:
    model = ScriptedModel(tool_call("nope"), "ok")
    result = run_loop(model, START, tools=EchoTools(), max_calls=5)
    assert result.messages[1].content == "Error: unknown tool nope"
    assert result.reply == "ok"


def test_the_loop_is_bounded_and_the_last_call_offers_no_tools() -> None:
    model = ScriptedModel(tool_call("echo"), tool_call("echo"), "forced answer")
    tools = EchoTools()
    result = run_loop(model, START, tools=tools, max_calls=3)
    assert result.reply == "forced answer" and len(model.requests) == 3
    assert [bool(r.tools) for r in model.requests] == [True, True, False]
    assert len(tools.calls) == 2


def test_without_tools_a_stray_tool_call_is_not_executed() -> None:
    model = ScriptedModel(
        Message(role="assistant", content="text", tool_calls=tool_call("echo").tool_calls)
    )
    result = run_loop(model, START, tools=None, max_calls=4)
    assert result.reply == "text" and result.messages[0].tool_calls == []
