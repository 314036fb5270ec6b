"""POST /v1/chat/completions and GET /v1/models on the in-memory fakes: OpenAI's request
and answer shapes over the agent with memory, sessions by X-Session-Id, history import,
client tools, streaming and OpenAI-shaped errors."""

from __future__ import annotations

import json
from typing import Any

from agent_harness.api.routes import build_app
from agent_harness.errors import ModelUnavailableError
from agent_harness.ids import User
from agent_harness.models.base import Message, ToolCall
from agent_harness.settings import Settings
from local_stack.lambdas import context_for, http_event
from tests.fakes import ORDER_TOOL as PLAIN_ORDER_TOOL
from tests.fakes import ScriptedModel, make_runtime, openai_tool

ALICE = User.from_id("alice")
ORDER_TOOL = openai_tool(PLAIN_ORDER_TOOL)


def runtime(*steps: Any):
    model = ScriptedModel(*steps)
    return make_runtime(settings=Settings(auth_mode="dev"), agent=model), model


def chat(
    rt, payload: object, *, session: str | None = None, user: str | None = "alice"
) -> tuple[int, str, dict[str, str]]:
    headers = {"content-type": "application/json"}
    if user:
        headers["x-user-id"] = user
    if session:
        headers["x-session-id"] = session
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    event = http_event("POST", "/v1/chat/completions", headers=headers, body=body)
    response = build_app(rt).resolve(event, context_for("AgentCallFunction"))
    return response["statusCode"], response["body"], response.get("headers", {})


def test_a_chat_answers_in_openai_shape_and_names_its_new_session() -> None:
    rt, model = runtime("Hello from the agent.")

    status, text, headers = chat(
        rt, {"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi!"}]}
    )

    assert status == 200, text
    answer = json.loads(text)
    assert answer["object"] == "chat.completion" and answer["model"] == "gpt-4o"
    assert answer["id"].startswith("chatcmpl-")
    assert answer["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hello from the agent."},
            "finish_reason": "stop",
            "logprobs": None,
        }
    ]
    assert answer["usage"] == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    session = headers["X-Session-Id"]
    assert session.startswith("chat-")
    assert rt.table.get_session(ALICE, session).turn == 1
    assert model.requests[0].messages[-1].content == "Hi!"


def test_a_named_session_takes_only_what_follows_the_last_assistant_message() -> None:
    rt, model = runtime("First answer.", "Second answer.")
    first = [{"role": "user", "content": "one"}]
    chat(rt, {"model": "m", "messages": first}, session="s1")

    history = [*first, {"role": "assistant", "content": "First answer."}]
    status, text, _ = chat(
        rt, {"model": "m", "messages": [*history, {"role": "user", "content": "two"}]}, session="s1"
    )

    assert status == 200 and json.loads(text)["choices"][0]["message"]["content"] == (
        "Second answer."
    )
    sent = [m.content for m in model.requests[1].messages if m.role != "system"]
    assert sent == ["one", "First answer.", "two"]  # the session's history, once
    assert rt.table.get_session(ALICE, "s1").turn == 2


def test_a_new_session_with_earlier_history_imports_it_and_takes_the_system_persona() -> None:
    rt, model = runtime("Noted, captain.")
    messages = [
        {"role": "system", "content": "You are a pirate assistant."},
        {"role": "user", "content": "I prefer window seats."},
        {"role": "assistant", "content": "Got it."},
        {"role": "user", "content": [{"type": "text", "text": "And aisle for short hops."}]},
    ]

    status, text, _ = chat(rt, {"model": "m", "messages": messages}, session="pirate")

    assert status == 200, text
    request = model.requests[0].messages
    assert request[0].role == "system" and request[0].content.startswith(
        "You are a pirate assistant."
    )
    assert [m.content for m in request[1:]] == [
        "I prefer window seats.",
        "Got it.",
        "And aisle for short hops.",
    ]
    log = sorted(k for k in rt.store.objects if "/pirate/turns/" in k)
    assert len(log) == 2  # the imported turn, then the new one
    imported = json.loads(rt.store.text(ALICE, "sessions/pirate/turns/00000001.json"))
    assert imported["source"] == "import"
    assert rt.table.get_session(ALICE, "pirate").turn == 2
    assert [j.turn for j in rt.queue.post_turn] == [2]  # one job flushes both


def test_a_failed_first_turn_imports_nothing() -> None:
    rt, _ = runtime(ModelUnavailableError("down"))
    messages = [
        {"role": "user", "content": "I prefer tea."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "Thanks"},
    ]
    status, text, _ = chat(rt, {"model": "m", "messages": messages}, session="s9")
    assert status == 502 and json.loads(text)["error"]["type"] == "server_error"
    assert rt.store.objects == {}


def test_a_client_tool_call_ends_with_tool_calls_and_tool_messages_resume_the_turn() -> None:
    call = ToolCall(id="call_7", name="lookup_order", arguments='{"order_id": 7}')
    rt, model = runtime(Message(role="assistant", tool_calls=[call]), "Order 7 is in transit.")
    asked = [{"role": "user", "content": "Where is order 7?"}]

    _, text, _ = chat(rt, {"model": "m", "messages": asked, "tools": [ORDER_TOOL]}, session="t")
    paused = json.loads(text)["choices"][0]

    assert paused["finish_reason"] == "tool_calls"
    assert paused["message"] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_7",
                "type": "function",
                "function": {"name": "lookup_order", "arguments": '{"order_id": 7}'},
            }
        ],
    }
    follow = [
        *asked,
        paused["message"],
        {"role": "tool", "tool_call_id": "call_7", "content": "in transit"},
    ]
    status, text, _ = chat(
        rt, {"model": "m", "messages": follow, "tools": [ORDER_TOOL]}, session="t"
    )

    assert status == 200 and json.loads(text)["choices"][0]["finish_reason"] == "stop"
    assert model.requests[1].messages[-1].content == "in transit"
    assert rt.table.get_session(ALICE, "t").turn == 1


def test_streaming_answers_openai_chunks_then_done() -> None:
    rt, _ = runtime("x" * 450)

    status, text, headers = chat(
        rt,
        {
            "model": "m",
            "messages": [{"role": "user", "content": "stream please"}],
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )

    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    events = [line[len("data: ") :] for line in text.split("\n\n") if line]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    text_out = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text_out == "x" * 450 and len(chunks) == 6  # role, 3 pieces, finish, usage
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == 15


def test_errors_come_in_openai_shape_with_our_status_codes() -> None:
    rt, _ = runtime()
    cases = [
        (b"{nope", 400, "invalid_request_error", "invalid_request"),
        ({"model": "m"}, 422, "invalid_request_error", "validation_error"),
        ({"model": "m", "messages": []}, 422, "invalid_request_error", "validation_error"),
        (
            {"model": "m", "messages": [{"role": "user", "content": "a"}], "n": 2},
            422,
            "invalid_request_error",
            "validation_error",
        ),
        (
            {"model": "m", "messages": [{"role": "assistant", "content": "a"}]},
            422,
            "invalid_request_error",
            "validation_error",
        ),
    ]
    for payload, status, kind, code in cases:
        got, text, _ = chat(rt, payload)
        error = json.loads(text)["error"]
        assert (got, error["type"], error["code"]) == (status, kind, code), text
        assert error["message"]
    got, text, _ = chat(
        rt, {"model": "m", "messages": [{"role": "user", "content": "a"}]}, user=None
    )
    assert got == 401 and json.loads(text)["error"]["type"] == "authentication_error"
    got, text, _ = chat(
        rt, {"model": "m", "messages": [{"role": "user", "content": "a"}]}, session="bad id!"
    )
    assert got == 422
    assert rt.store.objects == {}


def test_the_model_list_names_the_agent() -> None:
    rt, _ = runtime()
    event = http_event("GET", "/v1/models", headers={"x-user-id": "alice"})
    response = build_app(rt).resolve(event, context_for("AgentCallFunction"))
    listed = json.loads(response["body"])
    assert response["statusCode"] == 200 and listed["object"] == "list"
    assert [m["id"] for m in listed["data"]] == ["agent-harness"]


def tool_messages(count: int, *, same_id: bool = False) -> list[dict[str, Any]]:
    calls = [{"role": "user", "content": "Look it up."}, {"role": "assistant", "content": None}]
    return calls + [
        {"role": "tool", "tool_call_id": "c" if same_id else f"c{n}", "content": "found"}
        for n in range(count)
    ]


def test_thirty_thousand_tool_messages_are_refused_well_under_a_second() -> None:
    import time

    rt, model = runtime("never called")
    started = time.perf_counter()
    status, text, _ = chat(rt, {"messages": tool_messages(30_000)}, session="s1")
    elapsed = time.perf_counter() - started

    assert status == 422 and "at most 2,000" in json.loads(text)["error"]["message"]
    assert elapsed < 1.0
    assert rt.store.objects == {} and model.requests == []


def test_more_tool_messages_than_a_turn_can_await_are_refused_before_the_lease() -> None:
    rt, model = runtime("never called")
    status, text, _ = chat(rt, {"messages": tool_messages(129)}, session="s1")
    assert status == 422 and "at most 128" in json.loads(text)["error"]["message"]
    status, text, _ = chat(rt, {"messages": tool_messages(128, same_id=True)}, session="s1")
    assert status == 422 and "c is answered twice" in json.loads(text)["error"]["message"]
    assert rt.store.objects == {} and rt.table.calls == [] and model.requests == []


def test_a_persona_longer_than_a_message_is_413_and_writes_nothing() -> None:
    rt, model = runtime("never called")
    limit = rt.settings.max_message_chars
    persona = {"role": "system", "content": "p" * limit}
    payload = {
        "messages": [
            persona,
            {"role": "developer", "content": "q"},
            {"role": "user", "content": "Hi"},
        ]
    }
    status, text, _ = chat(rt, payload)
    assert status == 413 and json.loads(text)["error"]["code"] == "payload_too_large"
    assert rt.store.objects == {} and model.requests == []


def test_an_overlong_tool_call_id_or_model_name_is_refused_before_the_lease() -> None:
    rt, model = runtime("never called")
    messages = tool_messages(1)
    messages[-1]["tool_call_id"] = "c" * 257
    status, text, _ = chat(rt, {"messages": messages}, session="s1")
    assert status == 422 and "limited to 256" in json.loads(text)["error"]["message"]
    status, _, _ = chat(rt, {"model": "m" * 257, "messages": tool_messages(1)}, session="s1")
    assert status == 422
    assert rt.store.objects == {} and rt.table.calls == [] and model.requests == []


def test_a_busy_session_asks_for_a_short_retry_and_final_conflicts_for_none() -> None:
    settings = Settings(auth_mode="dev", session_wait_seconds=0)
    rt = make_runtime(settings=settings, agent=ScriptedModel())
    now_ms = int(rt.clock.now().timestamp() * 1000)
    rt.table.acquire_session_lease(ALICE, "b", "someone", now_ms, 60_000)

    status, text, headers = chat(rt, {"messages": [{"role": "user", "content": "x"}]}, session="b")

    assert status == 409 and json.loads(text)["error"]["code"] == "session_busy"
    # the holder just began: a typical turn's 2 s, not the lease's 60
    assert (headers["Retry-After"], headers["retry-after-ms"]) == ("2", "2000")
    assert headers["x-should-retry"] == "true"
    tool_only = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    tool_only.append({"role": "tool", "tool_call_id": "c", "content": "r"})
    status, text, headers = chat(rt, {"messages": tool_only}, session="never")
    assert status == 409 and json.loads(text)["error"]["code"] == "no_pending_tool_calls"
    assert headers["x-should-retry"] == "false"
    status, _, headers = chat(rt, {"messages": []})
    assert status == 422 and headers["x-should-retry"] == "false"
