"""The OpenAI-compatible endpoint driven by the official `openai` Python SDK against the
local stack: a chat, a fact remembered by a new session, a client tool round trip,
streaming, and an error mapped to the SDK's exception. The stack's agent model is the
recording fake, so the tests also see what the model was sent."""

from __future__ import annotations

import json

import openai
import pytest
from openai import OpenAI

from agent_harness import markup
from tests.e2e.conftest import FakeLLM, LocalStackProcess, wait_for
from tests.fakes import ORDER_TOOL as PLAIN_ORDER_TOOL
from tests.fakes import openai_tool

ORDER_TOOL = openai_tool(PLAIN_ORDER_TOOL)


def client(stack: LocalStackProcess, user: str) -> OpenAI:
    return OpenAI(
        base_url=f"{stack.url}/v1",
        api_key="dev-mode-needs-no-key",
        default_headers={"X-User-Id": user},
        max_retries=0,
        timeout=60,
    )


def test_a_chat_through_the_openai_sdk(local_stack: LocalStackProcess) -> None:
    sdk = client(local_stack, "oai-amy")

    answer = sdk.chat.completions.create(
        model="agent-harness", messages=[{"role": "user", "content": "Hello, SDK!"}]
    )

    assert answer.choices[0].message.content == "ack: Hello, SDK!"
    assert answer.choices[0].finish_reason == "stop"
    assert answer.usage is not None and answer.usage.total_tokens == 49
    assert [m.id for m in sdk.models.list()] == ["agent-harness"]


def test_a_fact_told_in_one_session_reaches_a_new_one(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    sdk = client(local_stack, "oai-ben")
    fact = "I prefer green tea in the afternoon."
    raw = sdk.chat.completions.with_raw_response.create(
        model="agent-harness",
        messages=[{"role": "user", "content": f"Please remember that {fact}"}],
        extra_headers={"X-Session-Id": "oai-tea"},
    )
    assert raw.headers["x-session-id"] == "oai-tea"
    with local_stack.client("oai-ben") as http:
        wait_for(lambda: http.get("/v1/memory/ledger").json()["days"])
        assert http.post("/v1/memory/consolidate").status_code == 202
        wait_for(lambda: fact in http.get("/v1/memory").json()["content"])

    question = "Which drink do I like?"
    sdk.chat.completions.create(
        model="agent-harness", messages=[{"role": "user", "content": question}]
    )

    [request] = fake_llm.requests_for(question)
    reference = request["messages"][1]["content"]
    assert fact in markup.extract(reference, markup.MEMORY)


def test_a_client_tool_round_trip_through_the_openai_sdk(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    question = "SDK: where is order 42?"
    fake_llm.script(
        question, [("call_sdk", "lookup_order", {"order_id": 42})], "Order 42 has shipped."
    )
    sdk = client(local_stack, "oai-cat")
    messages: list = [{"role": "user", "content": question}]
    session = {"X-Session-Id": "oai-orders"}

    first = sdk.chat.completions.create(
        model="agent-harness", messages=messages, tools=[ORDER_TOOL], extra_headers=session
    )

    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == (
        "call_sdk",
        "lookup_order",
        {"order_id": 42},
    )
    messages += [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "shipped with DHL"},
    ]
    second = sdk.chat.completions.create(
        model="agent-harness", messages=messages, tools=[ORDER_TOOL], extra_headers=session
    )

    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "Order 42 has shipped."
    last = fake_llm.requests_of(question)[-1]["messages"][-1]
    assert last == {
        "role": "tool",
        "content": "shipped with DHL",
        "tool_call_id": "call_sdk",
        "name": "lookup_order",
    }


def test_streaming_through_the_openai_sdk(local_stack: LocalStackProcess) -> None:
    sdk = client(local_stack, "oai-dan")

    stream = sdk.chat.completions.create(
        model="agent-harness",
        messages=[{"role": "user", "content": "Stream this, please."}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "ack: Stream this, please."
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop" and chunks[-1].usage is not None


def test_an_error_is_the_sdks_exception(local_stack: LocalStackProcess) -> None:
    sdk = client(local_stack, "oai-eve")

    with pytest.raises(openai.ConflictError) as caught:  # no turn awaits these results
        sdk.chat.completions.create(
            model="agent-harness",
            messages=[
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": "a"},
                {"role": "tool", "tool_call_id": "nope", "content": "r"},
            ],
            extra_headers={"X-Session-Id": "oai-never"},
        )
    assert caught.value.status_code == 409
    assert caught.value.body["code"] == "no_pending_tool_calls"
    assert caught.value.response.headers["x-should-retry"] == "false"
    with pytest.raises(openai.UnprocessableEntityError):
        sdk.chat.completions.create(model="agent-harness", messages=[])
    with pytest.raises(openai.AuthenticationError):
        OpenAI(base_url=f"{local_stack.url}/v1", api_key="k", max_retries=0).models.list()
