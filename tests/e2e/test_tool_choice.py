"""A forced tool choice is the request's own, on both OpenAI routes, under the clients
that force one: the plain ``openai`` SDK (Chat Completions and Responses, streamed and
not), the OpenAI Agents SDK on its default Responses model and on Chat Completions
(``ModelSettings(tool_choice=...)``, a forced handoff, and ``reset_tool_choice=False``,
which forces every call), LangChain's ``bind_tools(tool_choice=...)`` (which forces
every call too) and our own session route. The stack's model is the recording fake,
which obeys a forced choice as a real model does (tests/e2e/conftest.py:
``forced_call``): a request that forces nothing must reach it without a forced choice,
and a client that forces every call gets an answer at the turn's cap, never a 5xx."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from openai import AsyncOpenAI

from local_stack.process import LocalStackProcess
from tests.e2e.conftest import FakeLLM
from tests.e2e.test_openai_sdk import ORDER_TOOL, client

NAMED = {"type": "function", "function": {"name": "lookup_order"}}
FLAT_TOOL = {
    "type": "function",
    "name": "lookup_order",
    "description": ORDER_TOOL["function"]["description"],
    "parameters": ORDER_TOOL["function"]["parameters"],
}
#: HARNESS_MAX_MODEL_CALLS's default: the model calls of one turn, pauses included
MAX_CALLS = 8


def forced(request: dict[str, Any]) -> bool:
    return request.get("tool_choice") not in (None, "auto", "none")


def async_sdk(stack: LocalStackProcess, user: str) -> AsyncOpenAI:
    return AsyncOpenAI(
        base_url=f"{stack.url}/v1",
        api_key="dev-mode-needs-no-key",
        default_headers={"X-User-Id": user},
        max_retries=0,
        timeout=60,
    )


def _complete(sdk: Any, messages: list[dict], stream: bool, **options: Any) -> dict[str, Any]:
    """The assistant message of one chat completion, streamed or not, as a dict."""
    if not stream:
        answer = sdk.chat.completions.create(
            model="agent-harness", messages=messages, tools=[ORDER_TOOL], **options
        )
        return answer.choices[0].message.model_dump(exclude_none=True)
    content, calls = "", {}
    chunks = sdk.chat.completions.create(
        model="agent-harness", messages=messages, tools=[ORDER_TOOL], stream=True, **options
    )
    for chunk in chunks:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for part in delta.tool_calls or []:
            call = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
            call["id"] = part.id or call["id"]
            call["name"] += (part.function and part.function.name) or ""
            call["arguments"] += (part.function and part.function.arguments) or ""
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for c in calls.values()
        ]
    return message


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("choice", ["required", NAMED], ids=["required", "named"])
def test_chat_completions_a_tool_result_without_tool_choice_is_answered_in_words(
    local_stack: LocalStackProcess, fake_llm: FakeLLM, choice: Any, stream: bool
) -> None:
    sdk = client(local_stack, "tc-chat")
    question = f"tc chat {json.dumps(choice)} {stream}: where is order 5?"
    messages: list[dict] = [{"role": "user", "content": question}]

    called = _complete(sdk, messages, stream, tool_choice=choice)
    [call] = called["tool_calls"]
    messages += [called, {"role": "tool", "tool_call_id": call["id"], "content": "shipped"}]
    answered = _complete(sdk, messages, stream)

    assert answered["content"] == f"ack: {question}" and "tool_calls" not in answered
    first, second = fake_llm.requests_of(question)
    assert forced(first) and not forced(second)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_responses_a_function_output_without_tool_choice_is_answered_in_words(
    local_stack: LocalStackProcess, fake_llm: FakeLLM, stream: bool
) -> None:
    sdk = client(local_stack, "tc-resp")
    question = f"tc responses {stream}: where is order 6?"

    def create(**fields: Any) -> Any:
        if not stream:
            return sdk.responses.create(model="agent-harness", tools=[FLAT_TOOL], **fields)
        with sdk.responses.stream(model="agent-harness", tools=[FLAT_TOOL], **fields) as events:
            return events.get_final_response()

    called = create(input=question, tool_choice="required")
    [call] = [item for item in called.output if item.type == "function_call"]
    output = {"type": "function_call_output", "call_id": call.call_id, "output": "shipped"}
    answered = create(input=[output], previous_response_id=called.id)

    assert answered.output_text == f"ack: {question}"
    first, second = fake_llm.requests_of(question)
    assert forced(first) and not forced(second)


def _agents_model(stack: LocalStackProcess, user: str, api: str) -> Any:
    from agents import OpenAIChatCompletionsModel, OpenAIResponsesModel, set_tracing_disabled

    set_tracing_disabled(True)
    sdk = async_sdk(stack, user)
    if api == "responses":
        return OpenAIResponsesModel(model="agent-harness", openai_client=sdk)
    return OpenAIChatCompletionsModel(model="agent-harness", openai_client=sdk)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("api", ["responses", "chat"])
def test_the_agents_sdk_forces_a_function_tool_then_answers(
    local_stack: LocalStackProcess, fake_llm: FakeLLM, api: str, stream: bool
) -> None:
    from agents import Agent, ModelSettings, Runner, function_tool

    ran: list[int] = []

    @function_tool
    def lookup_order(order_id: int) -> str:
        """Find an order by its number."""
        ran.append(order_id)
        return f"order {order_id} is packed"

    agent = Agent(
        name="orders",
        instructions="Orders.",
        model=_agents_model(local_stack, f"tc-ag-{api}-{stream}", api),
        tools=[lookup_order],
        model_settings=ModelSettings(tool_choice="required"),
    )
    question = f"tc agents {api} {stream}: where is order 1?"

    async def scenario() -> Any:
        if not stream:
            return (await Runner.run(agent, question)).final_output
        streamed = Runner.run_streamed(agent, question)
        async for _ in streamed.stream_events():
            pass
        return streamed.final_output

    assert asyncio.run(scenario()) == f"ack: {question}"
    assert ran == [1]
    assert [forced(r) for r in fake_llm.requests_of(question)] == [True, False]


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_a_forced_handoff_hands_over_and_the_next_agent_answers(
    local_stack: LocalStackProcess, fake_llm: FakeLLM, api: str
) -> None:
    from agents import Agent, ModelSettings, Runner

    model = _agents_model(local_stack, f"tc-handoff-{api}", api)
    billing = Agent(name="billing", instructions="Billing.", model=model)
    triage = Agent(
        name="triage",
        instructions="Triage.",
        model=model,
        handoffs=[billing],
        model_settings=ModelSettings(tool_choice="transfer_to_billing"),
    )
    question = f"tc handoff {api}: my invoice is wrong"

    result = asyncio.run(Runner.run(triage, question))

    assert result.last_agent.name == "billing" and result.final_output == f"ack: {question}"
    assert [forced(r) for r in fake_llm.requests_of(question)] == [True, False]


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_an_agent_that_forces_every_call_gets_an_answer_at_the_turns_cap(
    local_stack: LocalStackProcess, fake_llm: FakeLLM, api: str
) -> None:
    from agents import Agent, ModelSettings, Runner, function_tool

    @function_tool
    def lookup_order(order_id: int) -> str:
        """Find an order by its number."""
        return "still looking"

    agent = Agent(
        name="stubborn",
        instructions="Orders.",
        model=_agents_model(local_stack, f"tc-cap-{api}", api),
        tools=[lookup_order],
        model_settings=ModelSettings(tool_choice="required"),
        reset_tool_choice=False,  # every call forced: a model that obeys never stops
    )
    question = f"tc cap {api}: where is order 2?"

    result = asyncio.run(Runner.run(agent, question, max_turns=MAX_CALLS + 2))

    assert result.final_output == f"ack: {question}"
    requests = fake_llm.requests_of(question)
    assert len(requests) == MAX_CALLS and forced(requests[0]) and not requests[-1].get("tools")


def test_langchain_forcing_every_call_ends_in_words_within_the_cap(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    @tool
    def lookup_order(order_id: int) -> str:
        """Find an order by its number."""
        return "in transit"

    chat = ChatOpenAI(
        model="agent-harness",
        base_url=f"{local_stack.url}/v1",
        api_key="dev-mode-needs-no-key",  # type: ignore[arg-type]
        default_headers={"X-User-Id": "tc-lc", "X-Session-Id": "tc-lc-1"},
        max_retries=0,
    ).bind_tools([lookup_order], tool_choice="lookup_order")
    question = "tc langchain: where is order 3?"
    history: list[Any] = [HumanMessage(question)]

    for _ in range(MAX_CALLS):
        answer = chat.invoke(history)
        history.append(answer)
        if not answer.tool_calls:  # type: ignore[attr-defined]
            break
        for call in answer.tool_calls:  # type: ignore[attr-defined]
            history.append(ToolMessage(lookup_order.invoke(call["args"]), tool_call_id=call["id"]))

    assert history[-1].content == f"ack: {question}"
    assert len(fake_llm.requests_of(question)) == MAX_CALLS


def test_our_session_route_resumes_without_the_forced_choice(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    question = "tc rest: where is order 4?"
    url = "/v1/sessions/tc-rest/messages"
    fmt = {"type": "json_object"}
    fake_llm.script(question, [("call_tc_rest", "lookup_order", {"order_id": 4})], '{"ok": 1}')
    with local_stack.client("tc-rest") as http:
        body = {"message": question, "tools": [ORDER_TOOL], "tool_choice": "required"}
        paused = http.post(url, json=body | {"response_format": fmt})
        assert paused.json()["status"] == "requires_action", paused.text
        result = {"tool_call_id": "call_tc_rest", "content": "shipped"}
        done = http.post(url, json={"tool_results": [result]})

    assert done.status_code == 200 and json.loads(done.json()["reply"]) == {"ok": 1}, done.text
    first, second = fake_llm.requests_of(question)
    assert forced(first) and not forced(second)
    assert second["response_format"] == fmt  # the turn's format is kept; not its choice
