"""The OpenAI-compatible endpoint under the agent frameworks as they run by default,
against the local stack: the OpenAI Agents SDK (``OpenAIChatCompletionsModel``),
LangChain (``ChatOpenAI``), Pydantic AI (``OpenAIChatModel``) and the plain ``openai``
SDK. Each gets a chat, streaming, a tool round trip, a tool call it consumes itself then
a new message on the same session, two runs on one session, a conversation without
X-Session-Id over three requests with a tool loop, changed instructions the model sees,
and four concurrent requests on one session. The stack's model is the recording fake
(tests/e2e/conftest.py): nothing leaves localhost."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx2
from openai import AsyncOpenAI, OpenAI

from tests.e2e.conftest import FakeLLM, LocalStackProcess

ORDER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_order",
        "description": "Find an order by its number",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "integer"}},
            "required": ["order_id"],
        },
    },
}


@dataclass
class Seen:
    """The X-Session-Id of every answer a client got."""

    sessions: list[str] = field(default_factory=list)

    def note(self, response: httpx2.Response) -> None:
        if response.url.path.endswith("/chat/completions"):
            self.sessions.append(response.headers.get("x-session-id", ""))

    async def note_async(self, response: httpx2.Response) -> None:
        self.note(response)


def headers(user: str, session: str | None) -> dict[str, str]:
    return {"X-User-Id": user} | ({"X-Session-Id": session} if session else {})


def sync_client(stack: LocalStackProcess, user: str, seen: Seen, session: str | None = None):
    hooks = {"response": [seen.note]}
    return OpenAI(
        base_url=f"{stack.url}/v1",
        api_key="dev-mode-needs-no-key",
        default_headers=headers(user, session),
        http_client=httpx2.Client(event_hooks=hooks, timeout=60),
    )


def async_client(stack: LocalStackProcess, user: str, seen: Seen, session: str | None = None):
    hooks = {"response": [seen.note_async]}
    return AsyncOpenAI(
        base_url=f"{stack.url}/v1",
        api_key="dev-mode-needs-no-key",
        default_headers=headers(user, session),
        http_client=httpx2.AsyncClient(event_hooks=hooks, timeout=60),
    )


def system_seen(fake: FakeLLM, text: str) -> str:
    """The system prompt of the model's last request of the turn of ``text``."""
    return fake.requests_of(text)[-1]["messages"][0]["content"]


def concurrently(run: Callable[[int], Any], n: int = 4) -> list[float]:
    """Run ``run(i)`` n times at once; when each finished, in seconds from the start."""
    started = time.monotonic()

    def timed(i: int) -> float:
        run(i)
        return time.monotonic() - started

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(timed, range(n)))


def assert_together(finished: list[float]) -> None:
    # one session runs one turn at a time (each holds the fake model 0.5 s): the
    # requests queue server-side and all finish within seconds of each other, not
    # after the 60 s a Retry-After of the lease's length made SDK clients sleep
    assert max(finished) < 15, finished
    assert max(finished) - min(finished) < 8, finished


# -- the plain openai SDK ----------------------------------------------------------------
def test_the_openai_sdk_runs_every_conversation_shape(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    seen = Seen()
    sdk = sync_client(local_stack, "fw-oai", seen, session="fw-oai-1")
    chat = sdk.chat.completions

    assert chat.create(model="m", messages=[{"role": "user", "content": "oai: hi"}]).choices[
        0
    ].message.content == ("ack: oai: hi")
    stream = chat.create(
        model="m", messages=[{"role": "user", "content": "oai: stream"}], stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == (
        "ack: oai: stream"
    )

    # a tool call the client consumes itself, then a new message on the same session
    ask = "oai: order 5 as structured output"
    fake_llm.script(ask, [("call_oai_final", "get_order", {"order_id": 5})])
    asked = [{"role": "user", "content": ask}]
    paused = chat.create(model="m", messages=asked, tools=[ORDER_TOOL]).choices[0]
    assert paused.finish_reason == "tool_calls"
    consumed = [
        *asked,
        paused.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "call_oai_final", "content": "Final result processed."},
        {"role": "user", "content": "oai: and then?"},
    ]
    after = chat.create(model="m", messages=consumed, tools=[ORDER_TOOL])
    assert after.choices[0].message.content == "ack: oai: and then?"
    sent = fake_llm.requests_for("oai: and then?")[-1]["messages"]
    tool = [m for m in sent if m["role"] == "tool"][-1]  # before it, maybe a recall message
    assert tool["tool_call_id"] == "call_oai_final"
    assert tool["content"] == "Final result processed."

    # changed instructions reach the model
    told = [
        {"role": "system", "content": "You are the billing agent."},
        {"role": "user", "content": "oai: invoice"},
    ]
    chat.create(model="m", messages=told)
    assert system_seen(fake_llm, "oai: invoice").startswith("You are the billing agent.")
    assert set(seen.sessions) == {"fw-oai-1"}


def test_the_openai_sdk_keeps_one_session_without_a_session_id_through_a_tool_loop(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    seen = Seen()
    chat = sync_client(local_stack, "fw-oai-free", seen).chat.completions
    ask = "oai-free: where is order 8?"
    fake_llm.script(ask, [("call_oai_free", "get_order", {"order_id": 8})], "Order 8 shipped.")
    messages: list[Any] = [{"role": "user", "content": ask}]

    first = chat.create(model="m", messages=messages, tools=[ORDER_TOOL]).choices[0]
    messages += [
        first.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "call_oai_free", "content": "shipped"},
    ]
    second = chat.create(model="m", messages=messages, tools=[ORDER_TOOL]).choices[0]
    messages += [second.message.model_dump(exclude_none=True)]
    messages += [{"role": "user", "content": "oai-free: thanks"}]
    third = chat.create(model="m", messages=messages, tools=[ORDER_TOOL]).choices[0]

    assert second.message.content == "Order 8 shipped."
    assert third.message.content == "ack: oai-free: thanks"
    assert len(seen.sessions) == 3 and len(set(seen.sessions)) == 1
    sent = fake_llm.requests_for("oai-free: thanks")[-1]["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"].count(ask) == 1


def test_four_concurrent_openai_sdk_requests_on_one_session_finish_together(
    local_stack: LocalStackProcess,
) -> None:
    seen = Seen()
    chat = sync_client(local_stack, "fw-oai-busy", seen, session="fw-busy").chat.completions

    finished = concurrently(
        lambda i: chat.create(model="m", messages=[{"role": "user", "content": f"[0.5s] busy {i}"}])
    )

    assert_together(finished)
    assert seen.sessions.count("fw-busy") == 4


# -- the OpenAI Agents SDK ----------------------------------------------------------------
def agents_model(client: AsyncOpenAI) -> Any:
    from agents import OpenAIChatCompletionsModel, set_tracing_disabled

    set_tracing_disabled(True)
    return OpenAIChatCompletionsModel(model="agent-harness", openai_client=client)


def test_the_agents_sdk_runs_every_conversation_shape(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    from agents import Agent, Runner, function_tool

    @function_tool
    def get_order(order_id: int) -> str:
        """Find an order by its number."""
        return f"order {order_id} is packed"

    seen = Seen()
    model = agents_model(async_client(local_stack, "fw-agents", seen))
    triage = Agent(name="triage", instructions="You are the triage agent.", model=model)

    async def scenario() -> None:
        first = await Runner.run(triage, "agents: hi")
        assert first.final_output == "ack: agents: hi"
        streamed = Runner.run_streamed(triage, "agents: stream")
        async for _ in streamed.stream_events():
            pass
        assert streamed.final_output == "ack: agents: stream"

        # a tool round trip, then a second run on the same conversation
        ask = "agents: where is order 3?"
        fake_llm.script(ask, [("call_ag_1", "get_order", {"order_id": 3})], "Order 3 is packed.")
        tooled = Agent(name="orders", instructions="Orders.", model=model, tools=[get_order])
        done = await Runner.run(tooled, ask)
        assert done.final_output == "Order 3 is packed."
        assert fake_llm.requests_for("order 3 is packed")  # the result reached the model
        again = await Runner.run(tooled, [*done.to_input_list(), _user("agents: thanks")])
        assert again.final_output == "ack: agents: thanks"

        # stop_on_first_tool: the SDK consumes the call; a new message goes on
        stop_ask = "agents: order 4, stop at the tool"
        fake_llm.script(stop_ask, [("call_ag_stop", "get_order", {"order_id": 4})])
        stopper = Agent(
            name="stopper",
            instructions="Stop.",
            model=model,
            tools=[get_order],
            tool_use_behavior="stop_on_first_tool",
        )
        stopped = await Runner.run(stopper, stop_ask)
        assert stopped.final_output == "order 4 is packed"
        follow = await Runner.run(stopper, [*stopped.to_input_list(), _user("agents: next")])
        assert follow.final_output == "ack: agents: next"

        # a handoff: the second agent's instructions reach the model
        billing = Agent(name="billing", instructions="You are the billing agent.", model=model)
        router = Agent(name="router", instructions="Route.", model=model, handoffs=[billing])
        hand = "agents: billing please"
        fake_llm.script(hand, [("call_ag_hand", "transfer_to_billing", {})], "Billing here.")
        handed = await Runner.run(router, hand)
        assert handed.final_output == "Billing here."
        assert system_seen(fake_llm, hand).startswith("You are the billing agent.")

    asyncio.run(scenario())
    # without X-Session-Id: the tool loop and the runs that continued it kept sessions
    assert "" not in seen.sessions
    assert seen.sessions[2] == seen.sessions[3] == seen.sessions[4]  # tool loop, second run
    assert seen.sessions[5] == seen.sessions[6]  # the consumed call and the next message
    assert seen.sessions[7] == seen.sessions[8]  # the handoff's call and the new agent


def _user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def test_four_concurrent_agents_sdk_runs_on_one_session_finish_together(
    local_stack: LocalStackProcess,
) -> None:
    from agents import Agent, Runner

    seen = Seen()

    def run(i: int) -> None:
        model = agents_model(async_client(local_stack, "fw-ag-busy", seen, session="ag-busy"))
        agent = Agent(name="a", instructions="Busy.", model=model)
        assert asyncio.run(Runner.run(agent, f"[0.5s] agents busy {i}")).final_output

    assert_together(concurrently(run))
    assert seen.sessions.count("ag-busy") == 4


# -- LangChain ------------------------------------------------------------------------------
def test_langchain_runs_every_conversation_shape(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
    from langchain_openai import ChatOpenAI

    seen = Seen()

    def model(session: str | None = None) -> ChatOpenAI:
        return ChatOpenAI(
            model="agent-harness",
            base_url=f"{local_stack.url}/v1",
            api_key="dev-mode-needs-no-key",
            default_headers=headers("fw-lc", session),
            http_client=httpx2.Client(event_hooks={"response": [seen.note]}, timeout=60),
            max_retries=2,
        )

    llm = model("fw-lc-1")
    assert llm.invoke("lc: hi").content == "ack: lc: hi"
    assert "".join(str(c.content) for c in llm.stream("lc: stream")) == "ack: lc: stream"
    told = llm.invoke([SystemMessage("You are the billing agent."), HumanMessage("lc: bill")])
    assert told.content == "ack: lc: bill"
    assert system_seen(fake_llm, "lc: bill").startswith("You are the billing agent.")

    # structured output by function calling: LangChain consumes the call itself
    ask = "lc: order 6 as structured output"
    fake_llm.script(ask, [("call_lc_final", "get_order", {"order_id": 6})])
    structured = llm.bind_tools([ORDER_TOOL], tool_choice="get_order").invoke(ask)
    assert structured.tool_calls[0]["args"] == {"order_id": 6}
    after = llm.invoke("lc: a new question")  # the same session, nothing to answer first
    assert after.content == "ack: lc: a new question"

    # without X-Session-Id: three requests with a tool loop on one session
    free = model().bind_tools([ORDER_TOOL])
    loop_ask = "lc-free: where is order 9?"
    fake_llm.script(loop_ask, [("call_lc_free", "get_order", {"order_id": 9})], "Order 9 is here.")
    history: list[Any] = [HumanMessage(loop_ask)]
    called = free.invoke(history)
    history += [called, ToolMessage("arrived", tool_call_id="call_lc_free")]
    answered = free.invoke(history)
    history += [answered, HumanMessage("lc-free: thanks")]
    thanked = free.invoke(history)
    assert isinstance(answered, AIMessage) and answered.content == "Order 9 is here."
    assert thanked.content == "ack: lc-free: thanks"
    assert len(set(seen.sessions[-3:])) == 1 and seen.sessions[-1] != "fw-lc-1"
    assert set(seen.sessions[:-3]) == {"fw-lc-1"}

    finished = concurrently(lambda i: model("lc-busy").invoke(f"[0.5s] lc busy {i}"))
    assert_together(finished)


# -- Pydantic AI ------------------------------------------------------------------------------
def test_pydantic_ai_runs_every_conversation_shape(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    from pydantic import BaseModel
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    class Order(BaseModel):
        order_id: int

    seen = Seen()

    def model(session: str | None = None) -> OpenAIChatModel:
        client = async_client(local_stack, "fw-pai", seen, session)
        return OpenAIChatModel("agent-harness", provider=OpenAIProvider(openai_client=client))

    chat = Agent(model("fw-pai-1"), instructions="You are the billing agent.")
    free = Agent(model(), instructions="Orders.")

    @free.tool_plain
    def get_order(order_id: int) -> str:
        """Find an order by its number."""
        return f"order {order_id} is late"

    async def scenario() -> None:  # one event loop for the async clients
        first = await chat.run("pai: hi")
        assert first.output == "ack: pai: hi"
        assert system_seen(fake_llm, "pai: hi").startswith("You are the billing agent.")
        second = await chat.run("pai: again", message_history=first.all_messages())
        assert second.output == "ack: pai: again"
        async with chat.run_stream("pai: stream") as run:
            assert await run.get_output() == "ack: pai: stream"

        # structured output: Pydantic AI's final_result tool, consumed by the framework
        ask = "pai: order 7 as structured output"
        fake_llm.script(ask, [("call_pai_final", "final_result", {"order_id": 7})])
        result = await Agent(model("fw-pai-1"), output_type=Order).run(ask)
        assert result.output == Order(order_id=7)
        more = await chat.run("pai: next", message_history=result.all_messages())
        assert more.output == "ack: pai: next"

        # without X-Session-Id: a tool loop, then a third request, on one session
        loop_ask = "pai-free: where is order 2?"
        fake_llm.script(loop_ask, [("call_pai_free", "get_order", {"order_id": 2})], "It is late.")
        looped = await free.run(loop_ask)
        assert looped.output == "It is late."
        thanked = await free.run("pai-free: thanks", message_history=looped.all_messages())
        assert thanked.output == "ack: pai-free: thanks"

    asyncio.run(scenario())
    assert len(set(seen.sessions[-3:])) == 1 and seen.sessions[-1] != "fw-pai-1"
    assert set(seen.sessions[:-3]) == {"fw-pai-1"}

    def busy(i: int) -> None:  # a model (and its async client) per thread and loop
        asyncio.run(Agent(model("pai-busy")).run(f"[0.5s] pai busy {i}"))

    assert_together(concurrently(busy))
