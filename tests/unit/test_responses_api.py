"""POST /v1/responses and GET /v1/responses/{id} on the in-memory fakes: OpenAI's
Responses shapes over the same turn as a chat completion: input items, instructions,
function tools and their outputs, previous_response_id onto sessions and turns, store,
streamed events, and OpenAI-shaped errors that write nothing."""

from __future__ import annotations

import json
from typing import Any

from agent_harness.api.routes import build_app
from agent_harness.ids import User
from agent_harness.models.base import Message, ToolCall
from agent_harness.settings import Settings
from local_stack.lambdas import context_for, http_event
from tests.fakes import ORDER_TOOL as PLAIN_ORDER_TOOL
from tests.fakes import ScriptedModel, make_runtime

ALICE = User.from_id("alice")
#: a function tool in the Responses API's flat form
ORDER_TOOL = {"type": "function", **PLAIN_ORDER_TOOL, "strict": True}
ORDER_CALL = Message(
    role="assistant",
    content="",
    tool_calls=[ToolCall(id="call_1", name="lookup_order", arguments='{"order_id": 7}')],
)


def runtime(*steps: Any):
    model = ScriptedModel(*steps)
    return make_runtime(settings=Settings(auth_mode="dev"), agent=model), model


def respond(
    rt, payload: object, *, session: str | None = None, user: str | None = "alice"
) -> tuple[int, Any, dict[str, str]]:
    headers = {"content-type": "application/json"}
    if user:
        headers["x-user-id"] = user
    if session:
        headers["x-session-id"] = session
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    event = http_event("POST", "/v1/responses", headers=headers, body=body)
    response = build_app(rt).resolve(event, context_for("AgentCallFunction"))
    text = response["body"]
    is_json = response.get("headers", {}).get("Content-Type") == "application/json"
    return response["statusCode"], json.loads(text) if is_json else text, response["headers"]


def fetch(rt, response_id: str, user: str = "alice") -> tuple[int, Any]:
    event = http_event("GET", f"/v1/responses/{response_id}", headers={"x-user-id": user})
    response = build_app(rt).resolve(event, context_for("AgentCallFunction"))
    return response["statusCode"], json.loads(response["body"])


def output_text(answer: dict[str, Any]) -> str:
    return "".join(
        part["text"]
        for item in answer["output"]
        if item["type"] == "message"
        for part in item["content"]
    )


def test_a_string_input_answers_a_response_object_and_names_its_session() -> None:
    rt, model = runtime("Hello from the agent.")

    status, answer, headers = respond(rt, {"model": "gpt-4.1", "input": "Hi!"})

    assert status == 200, answer
    assert answer["object"] == "response" and answer["status"] == "completed"
    assert answer["id"].startswith("resp_") and answer["model"] == "gpt-4.1"
    assert answer["output"] == [
        {
            "type": "message",
            "id": answer["output"][0]["id"],
            "status": "completed",
            "role": "assistant",
            "content": [
                {
                    "type": "output_text",
                    "text": "Hello from the agent.",
                    "annotations": [],
                    "logprobs": [],
                }
            ],
        }
    ]
    assert answer["usage"]["input_tokens"] == 10 and answer["usage"]["output_tokens"] == 5
    assert answer["usage"]["total_tokens"] == 15
    assert headers["X-Session-Id"].startswith("chat-")
    assert model.requests[0].messages[-1].content == "Hi!"


def test_instructions_reach_the_system_prompt_of_that_turn() -> None:
    rt, model = runtime("Arr.")

    respond(rt, {"input": "hello", "instructions": "Talk like a pirate."})

    system = model.requests[0].messages[0]
    assert system.role == "system" and "Talk like a pirate." in system.content


def test_previous_response_id_continues_its_session_at_its_turn() -> None:
    rt, model = runtime("First.", "Second.")
    _, first, headers = respond(rt, {"input": "one"})

    status, second, again = respond(rt, {"input": "two", "previous_response_id": first["id"]})

    assert status == 200 and output_text(second) == "Second."
    assert again["X-Session-Id"] == headers["X-Session-Id"]
    assert second["previous_response_id"] == first["id"]
    assert rt.table.get_session(ALICE, headers["X-Session-Id"]).turn == 2
    said = [m.content for m in model.requests[1].messages if m.role in ("user", "assistant")]
    assert said[-3:] == ["one", "First.", "two"]


def test_a_function_call_completes_the_response_and_its_output_resumes_the_turn() -> None:
    rt, model = runtime(ORDER_CALL, "Order 7 has shipped.")

    status, first, _ = respond(rt, {"input": "Where is order 7?", "tools": [ORDER_TOOL]})

    assert status == 200 and first["status"] == "completed"
    (call,) = first["output"]
    assert call["type"] == "function_call" and call["call_id"] == "call_1"
    assert call["name"] == "lookup_order" and json.loads(call["arguments"]) == {"order_id": 7}
    output = {"type": "function_call_output", "call_id": "call_1", "output": "shipped"}
    status, second, _ = respond(
        rt,
        {"input": [output], "previous_response_id": first["id"], "tools": [ORDER_TOOL]},
    )
    assert status == 200, second
    assert output_text(second) == "Order 7 has shipped."
    tool_message = model.requests[1].messages[-1]
    assert tool_message.role == "tool" and tool_message.content == "shipped"


def test_a_conversation_sent_whole_keeps_one_session_without_ids() -> None:
    rt, _ = runtime(ORDER_CALL, "Shipped.", "You are welcome.")
    ask = {"role": "user", "content": "Where is order 7?"}
    _, first, one = respond(rt, {"input": [ask], "tools": [ORDER_TOOL]})
    call = first["output"][0]
    output = {"type": "function_call_output", "call_id": "call_1", "output": "shipped"}

    _, second, two = respond(rt, {"input": [ask, call, output], "tools": [ORDER_TOOL]})
    thanks = {"role": "user", "content": [{"type": "input_text", "text": "thanks"}]}
    whole = [ask, call, output, *second["output"], thanks]
    status, third, three = respond(rt, {"input": whole, "tools": [ORDER_TOOL]})

    assert status == 200 and output_text(third) == "You are welcome."
    assert one["X-Session-Id"] == two["X-Session-Id"] == three["X-Session-Id"]
    assert rt.table.get_session(ALICE, one["X-Session-Id"]).turn == 2


def test_a_stored_response_is_fetched_as_it_was_answered_and_store_false_keeps_none() -> None:
    rt, _ = runtime("Kept.", "Not kept.")
    _, kept, _ = respond(rt, {"input": "one", "metadata": {"k": "v"}})
    _, unkept, _ = respond(rt, {"input": "two", "store": False})

    assert fetch(rt, kept["id"]) == (200, kept)
    assert kept["metadata"] == {"k": "v"} and kept["store"] is True
    status, error = fetch(rt, unkept["id"])
    assert status == 404 and error["error"]["code"] == "response_not_found"
    status, error, _ = respond(rt, {"input": "three", "previous_response_id": unkept["id"]})
    assert status == 400 and error["error"]["code"] == "previous_response_not_found"


def test_another_users_response_is_not_found_for_get_or_previous_response_id() -> None:
    rt, _ = runtime("Alice's.")
    _, alices, _ = respond(rt, {"input": "secret"})

    status, error = fetch(rt, alices["id"], user="mallory")
    assert status == 404 and "secret" not in json.dumps(error)
    status, error, _ = respond(
        rt, {"input": "tell me", "previous_response_id": alices["id"]}, user="mallory"
    )
    assert status == 400 and error["error"]["code"] == "previous_response_not_found"
    assert rt.table.get_session(User.from_id("mallory"), "x") is None


def test_going_back_to_an_earlier_response_forks_a_session_with_its_history() -> None:
    rt, model = runtime("First.", "Second.", "Second, again.")
    _, first, one = respond(rt, {"input": "one"})
    respond(rt, {"input": "two", "previous_response_id": first["id"]})

    status, retried, other = respond(rt, {"input": "two", "previous_response_id": first["id"]})

    assert status == 200 and output_text(retried) == "Second, again."
    assert other["X-Session-Id"] != one["X-Session-Id"]
    said = [m.content for m in model.requests[2].messages if m.role in ("user", "assistant")]
    assert said[-3:] == ["one", "First.", "two"] and "Second." not in said
    assert rt.table.get_session(ALICE, one["X-Session-Id"]).turn == 2


def test_the_stream_is_openais_event_sequence_ending_in_the_completed_response() -> None:
    rt, _ = runtime("Streamed reply.")

    status, text, headers = respond(rt, {"input": "hi", "stream": True})

    assert status == 200 and headers["Content-Type"] == "text/event-stream"
    blocks = [b for b in text.split("\n\n") if b]
    events = []
    for block in blocks:
        name, data = block.split("\n")
        event = json.loads(data.removeprefix("data: "))
        assert name == f"event: {event['type']}"
        events.append(event)
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds and "response.output_text.done" in kinds
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert deltas == "Streamed reply." == output_text(events[-1]["response"])
    assert events[0]["response"]["status"] == "in_progress"


def test_a_streamed_function_call_sends_its_arguments_as_deltas() -> None:
    rt, _ = runtime(ORDER_CALL)

    _, text, _ = respond(rt, {"input": "order 7?", "tools": [ORDER_TOOL], "stream": True})

    events = [json.loads(b.split("\n")[1][6:]) for b in text.split("\n\n") if b]
    deltas = [e for e in events if e["type"] == "response.function_call_arguments.delta"]
    done = next(e for e in events if e["type"] == "response.function_call_arguments.done")
    assert "".join(e["delta"] for e in deltas) == done["arguments"] == '{"order_id": 7}'
    added = next(e for e in events if e["type"] == "response.output_item.added")
    assert added["item"]["type"] == "function_call" and added["item"]["arguments"] == ""


def test_text_format_tool_choice_and_sampling_reach_the_model() -> None:
    rt, model = runtime('{"city": "Lisbon"}')
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }

    status, answer, _ = respond(
        rt,
        {
            "input": "where?",
            "tools": [ORDER_TOOL],
            "tool_choice": "none",
            "text": {
                "format": {"type": "json_schema", "name": "place", "schema": schema, "strict": True}
            },
            "temperature": 0.2,
            "top_p": 0.5,
            "max_output_tokens": 99,
        },
    )

    assert status == 200, answer
    asked = model.requests[0]
    assert asked.response_format.type == "json_schema"
    assert asked.response_format.name == "place" and asked.response_format.strict
    assert asked.temperature == 0.2 and asked.top_p == 0.5
    assert asked.max_output_tokens == 99
    assert answer["text"]["format"]["name"] == "place" and answer["tool_choice"] == "none"
    names = {t.name for t in model.requests[0].tools or []}
    assert "lookup_order" not in names  # tool_choice none: the caller's tools are not offered


def test_bad_input_is_a_clear_4xx_in_openais_shape_and_writes_nothing() -> None:
    bad = [
        (b"{not json", 400),
        ({"model": "m"}, 422),
        ({"input": ""}, 422),
        ({"input": []}, 422),
        ({"input": [{"type": "item_reference", "id": "x"}]}, 400),
        ({"input": [{"role": "robot", "content": "hi"}]}, 422),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
            400,
        ),
        ({"input": "hi", "tools": [{"type": "web_search"}]}, 400),
        ({"input": "hi", "tools": [{"type": "function", "name": "bad name!"}]}, 422),
        ({"input": "hi", "tool_choice": {"type": "function", "name": "nope"}}, 422),
        ({"input": "hi", "text": {"format": {"type": "xml"}}}, 422),
        ({"input": "hi", "temperature": "hot"}, 422),
        ({"input": "hi", "max_output_tokens": 0}, 422),
        ({"input": "hi", "store": "yes"}, 422),
        ({"input": "hi", "background": True}, 400),
        ({"input": "hi", "conversation": "conv_1"}, 404),  # no such conversation
        ({"input": "hi", "conversation": {"id": 7}}, 422),
        ({"input": "hi", "conversation": "conv_12345678", "previous_response_id": "resp_x"}, 400),
        ({"input": "hi", "metadata": {"k" * 65: "v"}}, 422),
        ({"input": "hi", "previous_response_id": "resp_nothere"}, 400),
        ({"input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]}, 409),
        ({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}, 422),
    ]
    for payload, expected in bad:
        rt, model = runtime()
        status, answer, headers = respond(rt, payload)
        assert status == expected, (payload, answer)
        assert set(answer["error"]) >= {"message", "type", "code"}, answer
        assert headers["x-should-retry"] == "false"
        assert model.requests == [] and rt.table.sessions == {} and rt.table.places == {}


def test_a_request_without_identity_is_a_401_in_openais_shape() -> None:
    rt, _ = runtime()

    status, answer, _ = respond(rt, {"input": "hi"}, user=None)

    assert status == 401 and answer["error"]["type"] == "authentication_error"


def test_a_deleted_response_is_no_longer_found_and_its_session_stays() -> None:
    rt, _ = runtime("Kept a moment.")
    _, made, headers = respond(rt, {"input": "one"})

    event = http_event("DELETE", f"/v1/responses/{made['id']}", headers={"x-user-id": "mallory"})
    foreign = build_app(rt).resolve(event, context_for("AgentCallFunction"))
    assert foreign["statusCode"] == 404 and fetch(rt, made["id"])[0] == 200
    event = http_event("DELETE", f"/v1/responses/{made['id']}", headers={"x-user-id": "alice"})
    deleted = build_app(rt).resolve(event, context_for("AgentCallFunction"))

    assert deleted["statusCode"] == 200
    assert json.loads(deleted["body"]) == {"id": made["id"], "object": "response", "deleted": True}
    assert fetch(rt, made["id"])[0] == 404
    again = build_app(rt).resolve(event, context_for("AgentCallFunction"))
    assert again["statusCode"] == 404
    assert rt.table.get_session(ALICE, headers["X-Session-Id"]).turn == 1
