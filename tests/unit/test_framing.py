"""How memory reaches the agent model (``HARNESS_MEMORY_FRAMING``, agent.context.framed):
user-role reference messages, or the result of a synthetic memory_read call."""

from __future__ import annotations

import json

import httpx

from agent_harness import markup
from agent_harness.agent.turn import run_turn
from agent_harness.ids import User
from agent_harness.models.anthropic import AnthropicChatModel
from agent_harness.settings import Settings
from tests.fakes import ScriptedModel, make_runtime
from tests.unit.test_provider_wire import ANTHROPIC, Recorder

ALICE = User.from_id("alice")
LEDGER = (
    "\n## Flush — 2026-03-02T10:00:00Z\n> source: session=old turns=4 model=offline\n"
    "- [user] Alice's sister Maria lives in Porto\n"
)


def runtime(framing: str, agent: object | None = None):
    model = agent or ScriptedModel("ok", "ok")
    rt = make_runtime(agent=model, settings=Settings(memory_framing=framing))  # type: ignore[arg-type]
    rt.store.put(ALICE, "MEMORY.md", "# Memory\n- [user] Alice prefers green tea.\n")
    rt.store.put(ALICE, "memory/2026-03-02.md", LEDGER)
    return rt, model


def test_message_framing_sends_memory_as_user_role_reference_messages() -> None:
    rt, model = runtime("message")
    run_turn(rt, ALICE, "s1", "Where does my sister Maria live?")
    messages = model.requests[0].messages
    framed = [m for m in messages[1:] if markup.HARNESS_CONTEXT in m.content]
    assert [m.role for m in framed] == ["user", "user"]
    assert not any(m.tool_calls for m in messages)


def test_tool_result_framing_sends_memory_as_the_result_of_a_memory_read_call() -> None:
    rt, model = runtime("tool_result")
    run_turn(rt, ALICE, "s1", "Where does my sister Maria live?")
    messages = model.requests[0].messages
    assert [m.role for m in messages] == [
        "system",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "user",
    ]
    calls = [c for m in messages for c in m.tool_calls]
    results = [m for m in messages if m.role == "tool"]
    assert [c.name for c in calls] == ["memory_read", "memory_read"]
    assert [r.tool_call_id for r in results] == [c.id for c in calls]  # each call answered
    assert 'source="MEMORY.md"' in results[0].content and "green tea" in results[0].content
    assert 'source="recall"' in results[1].content and "Porto" in results[1].content
    # the memory is never a user-role message, and the new message comes last, alone
    assert not any(m.role == "user" and markup.HARNESS_CONTEXT in m.content for m in messages)
    assert messages[-1].content == "Where does my sister Maria live?"


def test_the_offline_model_answers_from_memory_in_either_framing() -> None:
    for framing in ("message", "tool_result"):
        rt, _ = runtime(framing, agent=None)
        rt.models._overrides.pop("agent", None)  # the configured (offline) model
        reply = run_turn(rt, ALICE, f"s-{framing}", "Which tea do I prefer?").reply
        assert reply is not None and "green tea" in reply, framing


def test_a_framed_turn_reaches_anthropic_as_a_tool_result_with_the_tool_declared() -> None:
    recorder = Recorder(ANTHROPIC["plain"])
    client = httpx.Client(transport=httpx.MockTransport(recorder))
    agent = AnthropicChatModel("claude-sonnet-4-5", api_key="ak", client=client)
    rt, _ = runtime("tool_result", agent=agent)
    run_turn(rt, ALICE, "s1", "Where does my sister Maria live?")
    sent = json.loads(recorder.requests[0].content)
    kinds = [block["type"] for m in sent["messages"] for block in m["content"]]
    assert "tool_result" in kinds and "tool_use" in kinds
    assert "memory_read" in {t["name"] for t in sent["tools"]}  # declared, as the API needs
    user_text = [
        block["text"]
        for m in sent["messages"]
        if m["role"] == "user"
        for block in m["content"]
        if block["type"] == "text"
    ]
    assert not any("harness_context" in text for text in user_text)


def test_auto_framing_is_a_tool_result_on_the_hosted_apis_and_messages_elsewhere() -> None:
    hosted = [
        Settings(agent_model="anthropic:claude-sonnet-4-5"),
        Settings(agent_model="bedrock:anthropic.claude-sonnet-4-5-v1:0"),
        Settings(agent_model="openai:gpt-4.1-mini"),
    ]
    local = [
        Settings(),  # offline
        Settings(agent_model="ollama:llama3.1"),
        Settings(agent_model="openai:qwen2.5", openai_base_url="http://127.0.0.1:8000/v1"),
    ]
    assert [s.framing for s in hosted] == ["tool_result"] * 3
    assert [s.framing for s in local] == ["message"] * 3
    explicit = Settings(agent_model="anthropic:claude-sonnet-4-5", memory_framing="message")
    assert explicit.framing == "message"
