"""OpenAI's Responses API (POST /v1/responses, GET /v1/responses/{id}) under the agent
frameworks as they run on it by default, against the local stack: the OpenAI Agents SDK
(``OpenAIResponsesModel``, its default model API), Pydantic AI (``OpenAIResponsesModel``)
and the plain ``openai`` SDK (``client.responses``). Each gets a chat, streaming, a tool
round trip, structured output its default way, a tool call it consumes itself then a new
message on the same session, two runs on one session, a conversation without
X-Session-Id over three requests with a tool loop, changed instructions the model sees,
and four concurrent requests on one session. The frameworks continue a conversation both
ways they can: sending it whole, and by ``previous_response_id`` (the Agents SDK's
``auto_previous_response_id``, Pydantic AI's ``openai_previous_response_id='auto'``); the
plain SDK also retrieves what it stored, finds nothing of what it did not, and forks by
going back to an earlier response. The stack's model is the recording fake
(tests/e2e/conftest.py): nothing leaves localhost."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai
import pytest
from openai import AsyncOpenAI
from pydantic import BaseModel

from local_stack.process import LocalStackProcess
from tests.e2e.conftest import FakeLLM
from tests.e2e.test_frameworks import Seen as ChatSeen
from tests.e2e.test_frameworks import (
    assert_together,
    async_client,
    concurrently,
    sync_client,
    system_seen,
)

#: a function tool in the Responses API's flat form
ORDER_TOOL = {
    "type": "function",
    "name": "get_order",
    "description": "Find an order by its number",
    "parameters": {
        "type": "object",
        "properties": {"order_id": {"type": "integer"}},
        "required": ["order_id"],
        "additionalProperties": False,
    },
    "strict": True,
}


class Order(BaseModel):
    order_id: int


@dataclass
class Seen(ChatSeen):
    """The X-Session-Id of every answer to POST /v1/responses, and what was posted."""

    bodies: list[dict[str, Any]] = field(default_factory=list)

    def note(self, response: httpx2.Response) -> None:
        request = response.request
        if request.method == "POST" and response.url.path.endswith("/v1/responses"):
            self.sessions.append(response.headers.get("x-session-id", ""))
            self.bodies.append(json.loads(request.content or b"{}"))


def _user(text: str) -> Any:  # an input item, as the Agents SDK takes it
    return {"role": "user", "content": text}


def last_request(fake: FakeLLM, text: str) -> dict[str, Any]:
    """The model's last request of the turn whose user message is ``text``."""
    return fake.requests_of(text)[-1]


# -- the OpenAI Agents SDK ----------------------------------------------------------------
def agents_model(client: AsyncOpenAI) -> Any:
    from agents import OpenAIResponsesModel, set_tracing_disabled

    set_tracing_disabled(True)
    return OpenAIResponsesModel(model="agent-harness", openai_client=client)


def test_the_agents_sdk_chats_streams_and_runs_twice_on_one_session(
    local_stack: LocalStackProcess,
) -> None:
    from agents import Agent, Runner

    seen = Seen()
    model = agents_model(async_client(local_stack, "rs-ag", seen, session="rs-ag-1"))
    agent = Agent(name="triage", instructions="You are the triage agent.", model=model)

    async def scenario() -> None:
        first = await Runner.run(agent, "rs-ag: hi")
        assert first.final_output == "ack: rs-ag: hi"
        assert first.last_response_id and first.last_response_id.startswith("resp_")
        streamed = Runner.run_streamed(agent, "rs-ag: stream")
        deltas = [
            event.data.delta
            async for event in streamed.stream_events()
            if event.type == "raw_response_event"
            and event.data.type == "response.output_text.delta"
        ]
        assert streamed.final_output == "ack: rs-ag: stream"
        assert "".join(deltas) == "ack: rs-ag: stream"
        again = await Runner.run(agent, [*first.to_input_list(), _user("rs-ag: again")])
        assert again.final_output == "ack: rs-ag: again"

    asyncio.run(scenario())
    assert seen.sessions == ["rs-ag-1"] * 3


def test_the_agents_sdk_runs_its_tool_and_continues_the_whole_history_on_one_session(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    from agents import Agent, Runner, function_tool

    @function_tool
    def get_order(order_id: int) -> str:
        """Find an order by its number."""
        return f"order {order_id} is packed"

    seen = Seen()  # no X-Session-Id: the conversation names its session
    model = agents_model(async_client(local_stack, "rs-ag-free", seen))
    agent = Agent(name="orders", instructions="Orders.", model=model, tools=[get_order])
    ask = "rs-ag-free: where is order 3?"
    fake_llm.script(ask, [("call_rsag_1", "get_order", {"order_id": 3})], "Order 3 is packed.")

    async def scenario() -> None:
        done = await Runner.run(agent, ask)
        assert done.final_output == "Order 3 is packed."
        assert fake_llm.requests_for("order 3 is packed")  # the SDK's result reached the model
        again = await Runner.run(agent, [*done.to_input_list(), _user("rs-ag-free: thanks")])
        assert again.final_output == "ack: rs-ag-free: thanks"

    asyncio.run(scenario())
    assert len(seen.sessions) == 3 and len(set(seen.sessions)) == 1 and seen.sessions[0]
    sent = last_request(fake_llm, "rs-ag-free: thanks")["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"].count(ask) == 1


def test_the_agents_sdk_streams_a_tool_loop(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    from agents import Agent, Runner, function_tool

    @function_tool
    def get_order(order_id: int) -> str:
        """Find an order by its number."""
        return f"order {order_id} is sealed"

    seen = Seen()
    model = agents_model(async_client(local_stack, "rs-ag-sloop", seen))
    agent = Agent(name="orders", instructions="Orders.", model=model, tools=[get_order])
    ask = "rs-ag-sloop: where is order 17?"
    fake_llm.script(ask, [("call_rsag_sloop", "get_order", {"order_id": 17})], "Sealed.")

    async def scenario() -> list[str]:
        streamed = Runner.run_streamed(agent, ask)
        kinds: list[str] = [
            e.data.type async for e in streamed.stream_events() if e.type == "raw_response_event"
        ]
        assert streamed.final_output == "Sealed."
        return kinds

    kinds = asyncio.run(scenario())
    assert "response.function_call_arguments.delta" in kinds
    assert kinds.count("response.completed") == 2
    assert fake_llm.requests_for("order 17 is sealed")
    assert [b.get("stream") for b in seen.bodies] == [True, True]
    assert len(seen.sessions) == 2 and seen.sessions[0] == seen.sessions[1]


def test_the_agents_sdk_continues_by_previous_response_id_through_a_tool_loop(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    from agents import Agent, Runner, function_tool

    @function_tool
    def get_order(order_id: int) -> str:
        """Find an order by its number."""
        return f"order {order_id} is boxed"

    seen = Seen()
    model = agents_model(async_client(local_stack, "rs-ag-prev", seen))
    agent = Agent(name="orders", instructions="Orders.", model=model, tools=[get_order])
    ask = "rs-ag-prev: where is order 11?"
    fake_llm.script(ask, [("call_rsag_prev", "get_order", {"order_id": 11})], "Boxed.")

    async def scenario() -> None:
        first = await Runner.run(agent, "rs-ag-prev: hello")
        assert first.final_output == "ack: rs-ag-prev: hello"
        looped = await Runner.run(agent, ask, previous_response_id=first.last_response_id)
        assert looped.final_output == "Boxed."
        thanked = await Runner.run(
            agent, "rs-ag-prev: thanks", previous_response_id=looped.last_response_id
        )
        assert thanked.final_output == "ack: rs-ag-prev: thanks"

    asyncio.run(scenario())
    assert len(seen.sessions) == 4 and len(set(seen.sessions)) == 1
    # the SDK sends only what follows the previous response: the tool's output, a message
    assert [b.get("previous_response_id") is not None for b in seen.bodies] == [
        False,
        True,
        True,
        True,
    ]
    outputs = [i for i in seen.bodies[2]["input"] if i.get("type") == "function_call_output"]
    assert outputs and outputs[0]["call_id"] == "call_rsag_prev"
    sent = last_request(fake_llm, "rs-ag-prev: thanks")["messages"]
    said = [m["content"] for m in sent if m["role"] in ("user", "assistant") and m["content"]]
    assert said[-3:] == [ask, "Boxed.", "rs-ag-prev: thanks"]


def test_the_agents_sdk_chains_its_tool_loop_with_auto_previous_response_id(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    from agents import Agent, Runner, function_tool

    @function_tool
    def get_order(order_id: int) -> str:
        """Find an order by its number."""
        return f"order {order_id} is wrapped"

    seen = Seen()
    model = agents_model(async_client(local_stack, "rs-ag-auto", seen))
    agent = Agent(name="orders", instructions="Orders.", model=model, tools=[get_order])
    ask = "rs-ag-auto: where is order 13?"
    fake_llm.script(ask, [("call_rsag_auto", "get_order", {"order_id": 13})], "Wrapped.")

    done = asyncio.run(Runner.run(agent, ask, auto_previous_response_id=True))

    assert done.final_output == "Wrapped."
    first, second = seen.bodies
    assert "previous_response_id" not in first
    assert second["previous_response_id"] == done.raw_responses[0].response_id
    assert [i.get("type") for i in second["input"]] == ["function_call_output"]
    assert fake_llm.requests_for("order 13 is wrapped")
    assert len(seen.sessions) == 2 and seen.sessions[0] == seen.sessions[1]


def test_the_agents_sdk_structured_output_is_a_json_schema_the_model_receives(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    from agents import Agent, Runner

    seen = Seen()
    model = agents_model(async_client(local_stack, "rs-ag-so", seen, session="rs-ag-so"))
    agent = Agent(name="orders", instructions="Orders.", model=model, output_type=Order)
    ask = "rs-ag-so: order 7 as structured output"
    fake_llm.script(ask, '{"order_id": 7}')

    result = asyncio.run(Runner.run(agent, ask))

    assert result.final_output == Order(order_id=7)
    fmt = last_request(fake_llm, ask)["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"]["properties"] == {
        "order_id": {"title": "Order Id", "type": "integer"}
    }


def test_the_agents_sdk_consumes_a_tool_call_then_sends_a_new_message_on_its_session(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    from agents import Agent, Runner, function_tool

    @function_tool
    def get_order(order_id: int) -> str:
        """Find an order by its number."""
        return f"order {order_id} is packed"

    seen = Seen()
    model = agents_model(async_client(local_stack, "rs-ag-stop", seen))
    stopper = Agent(
        name="stopper",
        instructions="Stop.",
        model=model,
        tools=[get_order],
        tool_use_behavior="stop_on_first_tool",
    )
    ask = "rs-ag-stop: order 4, stop at the tool"
    fake_llm.script(ask, [("call_rsag_stop", "get_order", {"order_id": 4})])

    async def scenario() -> None:
        stopped = await Runner.run(stopper, ask)
        assert stopped.final_output == "order 4 is packed"
        follow = await Runner.run(stopper, [*stopped.to_input_list(), _user("rs-ag-stop: next")])
        assert follow.final_output == "ack: rs-ag-stop: next"

    asyncio.run(scenario())
    assert len(seen.sessions) == 2 and seen.sessions[0] == seen.sessions[1]
    sent = last_request(fake_llm, "rs-ag-stop: next")["messages"]
    tool = [m for m in sent if m["role"] == "tool"][-1]
    assert tool["tool_call_id"] == "call_rsag_stop"
    assert tool["content"] == "order 4 is packed"


def test_the_agents_sdk_hands_off_and_the_model_sees_the_new_instructions(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    from agents import Agent, Runner

    seen = Seen()
    model = agents_model(async_client(local_stack, "rs-ag-hand", seen))
    billing = Agent(name="billing", instructions="You are the billing agent.", model=model)
    router = Agent(name="router", instructions="Route.", model=model, handoffs=[billing])
    hand = "rs-ag-hand: billing please"
    fake_llm.script(hand, [("call_rsag_hand", "transfer_to_billing", {})], "Billing here.")

    handed = asyncio.run(Runner.run(router, hand))

    assert handed.final_output == "Billing here."
    assert fake_llm.requests_of(hand)[0]["messages"][0]["content"].startswith("Route.")
    assert system_seen(fake_llm, hand).startswith("You are the billing agent.")
    assert len(seen.sessions) == 2 and seen.sessions[0] == seen.sessions[1]


def test_four_concurrent_agents_sdk_runs_on_one_session_finish_together(
    local_stack: LocalStackProcess,
) -> None:
    from agents import Agent, Runner

    seen = Seen()

    def run(i: int) -> None:
        model = agents_model(async_client(local_stack, "rs-ag-busy", seen, session="rs-ag-busy"))
        agent = Agent(name="a", instructions="Busy.", model=model)
        assert asyncio.run(Runner.run(agent, f"[0.5s] rs-ag busy {i}")).final_output

    assert_together(concurrently(run))
    assert seen.sessions.count("rs-ag-busy") == 4


# -- Pydantic AI ------------------------------------------------------------------------------
def pai_model(stack: LocalStackProcess, user: str, seen: Seen, session: str | None = None) -> Any:
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    client = async_client(stack, user, seen, session)
    return OpenAIResponsesModel("agent-harness", provider=OpenAIProvider(openai_client=client))


def test_pydantic_ai_chats_streams_and_continues_its_message_history(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    from pydantic_ai import Agent

    seen = Seen()
    chat = Agent(
        pai_model(local_stack, "rs-pai", seen, "rs-pai-1"),
        instructions="You are the billing agent.",
    )
    ask = "rs-pai: order 14, streamed as structured output"
    fake_llm.script(ask, [("call_rspai_stream", "final_result", {"order_id": 14})])

    async def scenario() -> None:
        first = await chat.run("rs-pai: hi")
        assert first.output == "ack: rs-pai: hi"
        second = await chat.run("rs-pai: again", message_history=first.all_messages())
        assert second.output == "ack: rs-pai: again"
        async with chat.run_stream("rs-pai: stream") as run:
            assert await run.get_output() == "ack: rs-pai: stream"
        async with Agent(chat.model, output_type=Order).run_stream(ask) as run:
            assert await run.get_output() == Order(order_id=14)  # its tool, streamed

    asyncio.run(scenario())
    assert system_seen(fake_llm, "rs-pai: hi").startswith("You are the billing agent.")
    assert seen.sessions == ["rs-pai-1"] * 4
    assert [b.get("stream") for b in seen.bodies] == [False, False, True, True]
    sent = last_request(fake_llm, "rs-pai: again")["messages"]
    said = [m["content"] for m in sent if m["role"] in ("user", "assistant")]
    assert said.count("rs-pai: hi") == 1 and said.count("ack: rs-pai: hi") == 1


def test_pydantic_ai_structured_output_is_its_final_result_tool_then_a_new_message(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    from pydantic_ai import Agent

    seen = Seen()  # no X-Session-Id: the history names the session
    model = pai_model(local_stack, "rs-pai-so", seen)
    ask = "rs-pai-so: order 7 as structured output"
    fake_llm.script(ask, [("call_rspai_final", "final_result", {"order_id": 7})])

    async def scenario() -> None:
        result = await Agent(model, output_type=Order).run(ask)
        assert result.output == Order(order_id=7)
        more = await Agent(model).run("rs-pai-so: next", message_history=result.all_messages())
        assert more.output == "ack: rs-pai-so: next"

    asyncio.run(scenario())
    asked = last_request(fake_llm, ask)
    assert asked["tool_choice"] == "required"
    assert "final_result" in [t["function"]["name"] for t in asked["tools"]]
    sent = last_request(fake_llm, "rs-pai-so: next")["messages"]
    tool = [m for m in sent if m["role"] == "tool"][-1]  # the framework's own tool result
    assert tool["tool_call_id"] == "call_rspai_final"
    assert len(seen.sessions) == 2 and seen.sessions[0] == seen.sessions[1]


def test_pydantic_ai_keeps_one_session_without_a_session_id_through_a_tool_loop(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    from pydantic_ai import Agent

    seen = Seen()
    free = Agent(pai_model(local_stack, "rs-pai-free", seen), instructions="Orders.")

    @free.tool_plain
    def get_order(order_id: int) -> str:
        """Find an order by its number."""
        return f"order {order_id} is late"

    loop_ask = "rs-pai-free: where is order 2?"
    fake_llm.script(loop_ask, [("call_rspai_free", "get_order", {"order_id": 2})], "It is late.")

    async def scenario() -> None:
        looped = await free.run(loop_ask)
        assert looped.output == "It is late."
        thanked = await free.run("rs-pai-free: thanks", message_history=looped.all_messages())
        assert thanked.output == "ack: rs-pai-free: thanks"

    asyncio.run(scenario())
    assert fake_llm.requests_for("order 2 is late")  # the framework's result reached the model
    assert len(seen.sessions) == 3 and len(set(seen.sessions)) == 1 and seen.sessions[0]
    sent = last_request(fake_llm, "rs-pai-free: thanks")["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"].count(loop_ask) == 1


def test_pydantic_ai_continues_by_previous_response_id_when_asked_to(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    from pydantic_ai import Agent

    seen = Seen()
    agent = Agent(pai_model(local_stack, "rs-pai-auto", seen), instructions="Orders.")
    settings: Any = {"openai_previous_response_id": "auto"}

    @agent.tool_plain
    def get_order(order_id: int) -> str:
        """Find an order by its number."""
        return f"order {order_id} is found"

    ask = "rs-pai-auto: where is order 15?"
    fake_llm.script(ask, [("call_rspai_auto", "get_order", {"order_id": 15})], "Found it.")

    async def scenario() -> None:
        looped = await agent.run(ask, model_settings=settings)
        assert looped.output == "Found it."
        history = looped.all_messages()
        thanked = await agent.run(
            "rs-pai-auto: thanks", message_history=history, model_settings=settings
        )
        assert thanked.output == "ack: rs-pai-auto: thanks"

    asyncio.run(scenario())
    # only what follows each previous response is sent: the tool's output, a new message
    assert [b.get("previous_response_id") is not None for b in seen.bodies] == [False, True, True]
    assert [[i.get("type", "message") for i in b["input"]] for b in seen.bodies[1:]] == [
        ["function_call_output"],
        ["message"],
    ]
    assert len(seen.sessions) == 3 and len(set(seen.sessions)) == 1
    sent = last_request(fake_llm, "rs-pai-auto: thanks")["messages"]
    said = [m["content"] for m in sent if m["role"] in ("user", "assistant") and m["content"]]
    assert said[-3:] == [ask, "Found it.", "rs-pai-auto: thanks"]


def test_pydantic_ai_changed_instructions_reach_the_model_on_the_same_session(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    from pydantic_ai import Agent

    seen = Seen()
    model = pai_model(local_stack, "rs-pai-told", seen)

    async def scenario() -> None:
        first = await Agent(model, instructions="You are the triage agent.").run("rs-pai-told: 1")
        billing = Agent(model, instructions="You are the billing agent.")
        await billing.run("rs-pai-told: 2", message_history=first.all_messages())

    asyncio.run(scenario())
    assert system_seen(fake_llm, "rs-pai-told: 1").startswith("You are the triage agent.")
    assert system_seen(fake_llm, "rs-pai-told: 2").startswith("You are the billing agent.")
    assert len(seen.sessions) == 2 and seen.sessions[0] == seen.sessions[1]


def test_four_concurrent_pydantic_ai_runs_on_one_session_finish_together(
    local_stack: LocalStackProcess,
) -> None:
    from pydantic_ai import Agent

    seen = Seen()

    def busy(i: int) -> None:  # a model (and its async client) per thread and loop
        model = pai_model(local_stack, "rs-pai-busy", seen, "rs-pai-busy")
        assert asyncio.run(Agent(model).run(f"[0.5s] rs-pai busy {i}")).output

    assert_together(concurrently(busy))
    assert seen.sessions.count("rs-pai-busy") == 4


# -- the plain openai SDK ----------------------------------------------------------------
def test_the_openai_sdk_answers_string_and_item_input_and_retrieves_what_it_stored(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    seen = Seen()
    responses = sync_client(local_stack, "rs-oai", seen, session="rs-oai-1").responses

    said = responses.create(model="agent-harness", input="rs-oai: hi")
    assert said.output_text == "ack: rs-oai: hi" and said.status == "completed"
    items = [{"type": "message", "role": "user", "content": "rs-oai: items"}]
    itemized = responses.create(
        model="agent-harness", input=items, instructions="You are the billing agent."
    )
    assert itemized.output_text == "ack: rs-oai: items"
    assert itemized.instructions == "You are the billing agent."
    assert system_seen(fake_llm, "rs-oai: items").startswith("You are the billing agent.")
    parts = [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "rs-oai: parts"}],
        }
    ]
    assert responses.create(model="agent-harness", input=parts).output_text == (
        "ack: rs-oai: parts"
    )

    assert responses.retrieve(said.id).model_dump() == said.model_dump()
    assert responses.retrieve(itemized.id).model_dump() == itemized.model_dump()
    unstored = responses.create(model="agent-harness", input="rs-oai: forget it", store=False)
    assert unstored.output_text == "ack: rs-oai: forget it"
    with pytest.raises(openai.NotFoundError):
        responses.retrieve(unstored.id)
    assert seen.sessions == ["rs-oai-1"] * 4


def test_the_openai_sdk_streams_text_deltas_and_the_completed_response(
    local_stack: LocalStackProcess,
) -> None:
    seen = Seen()
    responses = sync_client(local_stack, "rs-oai-stream", seen, session="rs-oai-s").responses

    events = list(responses.create(model="agent-harness", input="rs-oai: stream", stream=True))

    assert events[0].type == "response.created"
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "ack: rs-oai: stream"
    assert events[-1].type == "response.completed"
    completed = events[-1].response
    assert completed.output_text == text and completed.status == "completed"
    assert responses.retrieve(completed.id).output_text == text
    with responses.stream(model="agent-harness", input="rs-oai: stream helper") as stream:
        final = stream.get_final_response()
    assert final.output_text == "ack: rs-oai: stream helper"
    assert seen.sessions == ["rs-oai-s"] * 2


def test_the_openai_sdk_streams_a_function_call_in_argument_deltas(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    seen = Seen()
    responses = sync_client(local_stack, "rs-oai-sfc", seen).responses
    ask = "rs-oai-sfc: order 16, streamed"
    call = ("call_rsoai_sfc", "get_order", {"order_id": 16})
    fake_llm.script(ask, [call], [call])  # once by events, once by the stream helper

    events = list(
        responses.create(model="agent-harness", input=ask, tools=[ORDER_TOOL], stream=True)
    )

    arguments = "".join(
        e.delta for e in events if e.type == "response.function_call_arguments.delta"
    )
    assert json.loads(arguments) == {"order_id": 16}
    [done] = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert done.arguments == arguments
    assert events[-1].type == "response.completed"
    [call] = events[-1].response.output
    assert call.type == "function_call" and call.call_id == "call_rsoai_sfc"
    with responses.stream(model="agent-harness", input=ask, tools=[ORDER_TOOL]) as stream:
        final = stream.get_final_response()  # the helper parses the arguments
    assert final.output[0].parsed_arguments == {"order_id": 16}


def test_the_openai_sdk_round_trips_a_function_call_by_previous_response_id(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    seen = Seen()
    responses = sync_client(local_stack, "rs-oai-prev", seen).responses
    ask = "rs-oai-prev: where is order 8?"
    fake_llm.script(ask, [("call_rsoai_prev", "get_order", {"order_id": 8})], "Order 8 shipped.")

    first = responses.create(model="agent-harness", input=ask, tools=[ORDER_TOOL])
    [call] = [item for item in first.output if item.type == "function_call"]
    assert (call.call_id, call.name, json.loads(call.arguments)) == (
        "call_rsoai_prev",
        "get_order",
        {"order_id": 8},
    )
    output = {"type": "function_call_output", "call_id": call.call_id, "output": "shipped"}
    second = responses.create(
        model="agent-harness", previous_response_id=first.id, input=[output], tools=[ORDER_TOOL]
    )
    assert second.output_text == "Order 8 shipped."
    assert second.previous_response_id == first.id
    third = responses.create(
        model="agent-harness",
        previous_response_id=second.id,
        input="rs-oai-prev: thanks",
        instructions="You are the billing agent.",  # changed instructions, the same session
    )

    assert third.output_text == "ack: rs-oai-prev: thanks"
    assert system_seen(fake_llm, "rs-oai-prev: thanks").startswith("You are the billing agent.")
    assert fake_llm.requests_for("shipped")  # the output reached the model
    assert len(seen.sessions) == 3 and len(set(seen.sessions)) == 1


def test_the_openai_sdk_going_back_to_an_earlier_response_forks_a_new_session(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    seen = Seen()
    responses = sync_client(local_stack, "rs-oai-fork", seen).responses

    one = responses.create(model="agent-harness", input="rs-oai-fork: one")
    two = responses.create(
        model="agent-harness", input="rs-oai-fork: two", previous_response_id=one.id
    )
    other = responses.create(
        model="agent-harness", input="rs-oai-fork: two, differently", previous_response_id=one.id
    )

    assert two.output_text == "ack: rs-oai-fork: two"
    assert other.output_text == "ack: rs-oai-fork: two, differently"
    first, second, forked = seen.sessions
    assert first == second and forked != first
    sent = last_request(fake_llm, "rs-oai-fork: two, differently")["messages"]
    said = [m["content"] for m in sent if m["role"] in ("user", "assistant")]
    assert said[-3:] == [
        "rs-oai-fork: one",
        "ack: rs-oai-fork: one",
        "rs-oai-fork: two, differently",
    ]
    assert "rs-oai-fork: two" not in said
    with pytest.raises(openai.BadRequestError) as unknown:
        responses.create(model="agent-harness", input="x", previous_response_id="resp_none")
    assert unknown.value.code == "previous_response_not_found"


def test_the_openai_sdk_keeps_one_session_without_a_session_id_through_a_tool_loop(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    seen = Seen()
    responses = sync_client(local_stack, "rs-oai-free", seen).responses
    ask = "rs-oai-free: where is order 9?"
    fake_llm.script(ask, [("call_rsoai_free", "get_order", {"order_id": 9})], "Order 9 is here.")
    conversation: list[Any] = [{"role": "user", "content": ask}]

    first = responses.create(model="agent-harness", input=conversation, tools=[ORDER_TOOL])
    conversation += [item.model_dump(exclude_none=True) for item in first.output]
    conversation += [
        {"type": "function_call_output", "call_id": "call_rsoai_free", "output": "arrived"}
    ]
    second = responses.create(model="agent-harness", input=conversation, tools=[ORDER_TOOL])
    conversation += [item.model_dump(exclude_none=True) for item in second.output]
    conversation += [{"role": "user", "content": "rs-oai-free: thanks"}]
    third = responses.create(model="agent-harness", input=conversation, tools=[ORDER_TOOL])

    assert second.output_text == "Order 9 is here."
    assert third.output_text == "ack: rs-oai-free: thanks"
    assert len(seen.sessions) == 3 and len(set(seen.sessions)) == 1 and seen.sessions[0]
    sent = last_request(fake_llm, "rs-oai-free: thanks")["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"].count(ask) == 1


def test_the_openai_sdk_consumes_a_forced_call_then_sends_a_new_message(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    seen = Seen()
    responses = sync_client(local_stack, "rs-oai-final", seen).responses
    ask = "rs-oai-final: order 5 as a tool call"
    fake_llm.script(ask, [("call_rsoai_final", "get_order", {"order_id": 5})])

    paused = responses.create(
        model="agent-harness",
        input=ask,
        tools=[ORDER_TOOL],
        tool_choice={"type": "function", "name": "get_order"},
    )
    assert [item.type for item in paused.output] == ["function_call"]
    assert last_request(fake_llm, ask)["tool_choice"] == {
        "type": "function",
        "function": {"name": "get_order"},
    }
    consumed = {
        "type": "function_call_output",
        "call_id": "call_rsoai_final",
        "output": "Final result processed.",
    }
    after = responses.create(
        model="agent-harness",
        previous_response_id=paused.id,
        input=[consumed, {"role": "user", "content": "rs-oai-final: and then?"}],
        tools=[ORDER_TOOL],
    )

    assert after.output_text == "ack: rs-oai-final: and then?"
    sent = last_request(fake_llm, "rs-oai-final: and then?")["messages"]
    tool = [m for m in sent if m["role"] == "tool"][-1]
    assert tool["tool_call_id"] == "call_rsoai_final"
    assert tool["content"] == "Final result processed."
    assert len(seen.sessions) == 2 and seen.sessions[0] == seen.sessions[1]


def test_the_openai_sdk_parses_structured_output_from_a_json_schema(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    seen = Seen()
    responses = sync_client(local_stack, "rs-oai-parse", seen, session="rs-oai-p").responses
    ask = "rs-oai-parse: order 12 as JSON"
    fake_llm.script(ask, '{"order_id": 12}')

    parsed = responses.parse(model="agent-harness", input=ask, text_format=Order)

    assert parsed.output_parsed == Order(order_id=12)
    fmt = last_request(fake_llm, ask)["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "Order"
    assert fmt["json_schema"]["strict"] is True
    assert seen.sessions == ["rs-oai-p"]


def test_four_concurrent_openai_sdk_responses_on_one_session_finish_together(
    local_stack: LocalStackProcess,
) -> None:
    seen = Seen()
    responses = sync_client(local_stack, "rs-oai-busy", seen, session="rs-busy").responses

    finished = concurrently(
        lambda i: responses.create(model="agent-harness", input=f"[0.5s] rs-oai busy {i}")
    )

    assert_together(finished)
    assert seen.sessions.count("rs-busy") == 4
