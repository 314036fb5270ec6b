"""POST /v1/chat/completions treats the client's conversation as the truth: a message
that does not answer a paused turn closes it, results and a message come together, a
conversation without X-Session-Id keeps one session, each request's instructions reach
the model, and the stack's own tools are not declared twice. On the in-memory fakes."""

from __future__ import annotations

import json
from typing import Any

from agent_harness.agent.client_tools import NOT_RUN
from agent_harness.agent.context import DEFAULT_PERSONA
from agent_harness.models.base import Message, ToolCall
from tests.unit.test_openai_compat import ALICE, ORDER_TOOL, chat, runtime


def order_call(call_id: str = "call_1") -> Message:
    return Message(
        role="assistant",
        tool_calls=[ToolCall(id=call_id, name="lookup_order", arguments='{"order_id": 1}')],
    )


def answer(text: str) -> dict[str, Any]:
    return json.loads(text)["choices"][0]


def turn_record(rt, session: str, turn: int) -> dict[str, Any]:
    return json.loads(rt.store.text(ALICE, f"sessions/{session}/turns/{turn:08d}.json"))


def sessions_of(rt) -> set[str]:
    return {k.split("/sessions/")[1].split("/")[0] for k in rt.store.objects if "/turns/" in k}


def test_a_new_message_closes_the_paused_turn_without_a_model_call() -> None:
    rt, model = runtime(order_call(), "Hello again.")
    asked = [{"role": "user", "content": "Where is order 1?"}]
    chat(rt, {"messages": asked, "tools": [ORDER_TOOL]}, session="s")

    status, text, _ = chat(rt, {"messages": [{"role": "user", "content": "Hi"}]}, session="s")

    assert status == 200, text
    assert answer(text)["message"]["content"] == "Hello again."
    assert len(model.requests) == 2  # the closed turn made no model call
    closed = turn_record(rt, "s", 1)
    assert closed["messages"][-1]["content"] == NOT_RUN
    sent = model.requests[1].messages
    assert [m.role for m in sent[-3:]] == ["assistant", "tool", "user"]
    assert rt.table.get_session(ALICE, "s").turn == 2


def test_tool_results_then_a_user_message_are_taken_in_that_order() -> None:
    rt, model = runtime(order_call(), "Next question answered.")
    asked = [{"role": "user", "content": "Where is order 1?"}]
    _, text, _ = chat(rt, {"messages": asked, "tools": [ORDER_TOOL]}, session="s")
    consumed = [
        *asked,
        answer(text)["message"],
        {"role": "tool", "tool_call_id": "call_1", "content": "Final result processed."},
        {"role": "user", "content": "And order 2?"},
    ]

    status, text, _ = chat(rt, {"messages": consumed, "tools": [ORDER_TOOL]}, session="s")

    assert status == 200, text
    assert turn_record(rt, "s", 1)["messages"][-1]["content"] == "Final result processed."
    sent = [(m.role, m.content) for m in model.requests[1].messages[-2:]]
    assert sent == [("tool", "Final result processed."), ("user", "And order 2?")]
    assert len(model.requests) == 2


def test_without_a_session_id_a_conversation_with_a_tool_loop_keeps_one_session() -> None:
    rt, model = runtime(order_call("call_9"), "Order 1 shipped.", "You are welcome.")
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Where is order 1?"}]

    _, text, first = chat(rt, {"messages": messages, "tools": [ORDER_TOOL]})
    messages += [
        answer(text)["message"],
        {"role": "tool", "tool_call_id": "call_9", "content": "shipped"},
    ]
    _, text, second = chat(rt, {"messages": messages, "tools": [ORDER_TOOL]})
    messages += [answer(text)["message"], {"role": "user", "content": "Thanks!"}]
    status, text, third = chat(rt, {"messages": messages, "tools": [ORDER_TOOL]})

    assert status == 200 and answer(text)["message"]["content"] == "You are welcome."
    session = first["X-Session-Id"]
    assert second["X-Session-Id"] == third["X-Session-Id"] == session
    assert sessions_of(rt) == {session}  # nothing imported into another session
    assert all(turn_record(rt, session, n)["source"] == "agent" for n in (1, 2))
    users = [m.content for m in model.requests[2].messages if m.role == "user"]
    assert users[-2:] == ["Where is order 1?", "Thanks!"]  # the history once


def test_an_edited_conversation_or_a_new_chat_gets_a_session_of_its_own() -> None:
    rt, _ = runtime("One.", "Two.", "Edited two.", "Hi back.")
    start = [{"role": "user", "content": "one"}]
    _, _, first = chat(rt, {"messages": start})
    grown = [*start, {"role": "assistant", "content": "One."}, {"role": "user", "content": "two"}]
    _, _, second = chat(rt, {"messages": grown})
    edited = [*grown[:2], {"role": "user", "content": "two, edited"}]

    _, _, branch = chat(rt, {"messages": edited})
    _, _, fresh = chat(rt, {"messages": start})

    assert second["X-Session-Id"] == first["X-Session-Id"]
    assert branch["X-Session-Id"] not in (first["X-Session-Id"], fresh["X-Session-Id"])
    assert turn_record(rt, branch["X-Session-Id"], 1)["source"] == "import"
    assert rt.table.get_session(ALICE, first["X-Session-Id"]).turn == 2  # left as it was


def test_two_chats_whose_replies_read_alike_keep_their_own_sessions() -> None:
    rt, _ = runtime("Hello! How can I help?", "Hello! How can I help?", "A.", "B.")
    chat_a = [{"role": "user", "content": "hi, about my order"}]
    chat_b = [{"role": "user", "content": "hi, about my invoice"}]
    _, _, first_a = chat(rt, {"messages": chat_a})
    _, _, first_b = chat(rt, {"messages": chat_b})
    greeting = {"role": "assistant", "content": "Hello! How can I help?"}

    _, _, next_a = chat(rt, {"messages": [*chat_a, greeting, {"role": "user", "content": "a"}]})
    _, _, next_b = chat(rt, {"messages": [*chat_b, greeting, {"role": "user", "content": "b"}]})

    assert next_a["X-Session-Id"] == first_a["X-Session-Id"]
    assert next_b["X-Session-Id"] == first_b["X-Session-Id"] != first_a["X-Session-Id"]


def test_each_requests_instructions_reach_the_model_and_none_means_the_persona() -> None:
    rt, model = runtime("a", "b", "c")
    first = [{"role": "system", "content": "You are the triage agent."}]
    first.append({"role": "user", "content": "Help"})
    chat(rt, {"messages": first}, session="h")
    handed = [
        {"role": "system", "content": "You are the billing agent."},
        *first[1:],
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "My invoice"},
    ]
    chat(rt, {"messages": handed}, session="h")
    chat(rt, {"messages": [{"role": "user", "content": "Plain"}]}, session="h")

    prompts = [r.messages[0].content for r in model.requests]
    assert prompts[0].startswith("You are the triage agent.")
    assert prompts[1].startswith("You are the billing agent.")
    assert "Long-term memory" in prompts[1]  # the memory guidance is kept
    assert prompts[2].startswith("You are the triage agent.")  # the session's persona
    assert not prompts[2].startswith(DEFAULT_PERSONA)
    assert turn_record(rt, "h", 2)["instructions"] == "You are the billing agent."
    assert turn_record(rt, "h", 3)["instructions"] is None


def test_the_stacks_own_tools_declared_by_the_client_are_dropped_not_refused() -> None:
    rt, model = runtime("fine")
    mine = {"type": "function", "function": {"name": "memory_search", "parameters": {}}}
    prefixed = {"type": "function", "function": {"name": "mem__memory_save"}}
    payload = {
        "messages": [{"role": "user", "content": "x"}],
        "tools": [mine, prefixed, ORDER_TOOL],
    }

    status, text, _ = chat(rt, payload, session="d")

    assert status == 200, text
    names = [t.name for t in model.requests[0].tools]
    assert names.count("memory_search") == 1 and "mem__memory_save" not in names
    assert "lookup_order" in names
