"""Structured output, tool choice and sampling options through the OpenAI-compatible
route and our own, against the local stack: the plain `openai` SDK, LangChain,
Pydantic AI and the OpenAI Agents SDK. The agent model is the recording fake, so the
tests assert what reached it."""

from __future__ import annotations

import json

import openai
import pytest
from agents import Agent as SdkAgent
from agents import ModelSettings, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from openai import AsyncOpenAI
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tests.e2e.conftest import FakeLLM, LocalStackProcess
from tests.e2e.test_openai_sdk import ORDER_TOOL, client

NAMED = {"type": "function", "function": {"name": "lookup_order"}}


class Trip(BaseModel):
    city: str
    days: int


def offered(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


def test_a_parsed_answer_and_the_sampling_options_reach_the_model(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    question = "SDK structured: plan three days in Oslo"
    fake_llm.script(question, '{"city": "Oslo", "days": 3}')

    answer = client(local_stack, "so-amy").chat.completions.parse(
        model="agent-harness",
        messages=[{"role": "user", "content": question}],
        response_format=Trip,
        temperature=0.3,
        top_p=0.8,
        max_completion_tokens=200,
        stop=["END"],
        seed=11,
    )

    assert answer.choices[0].message.parsed == Trip(city="Oslo", days=3)
    [request] = fake_llm.requests_of(question)
    fmt = request["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"]["required"] == ["city", "days"]
    assert (request["temperature"], request["top_p"], request["seed"]) == (0.3, 0.8, 11)
    assert (request["max_tokens"], request["stop"]) == (200, ["END"])
    assert "memory_search" in offered(request)  # memory tools keep working in the turn


def test_an_answer_that_stays_invalid_is_a_502_and_nothing_is_written(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    question = "SDK structured: answer badly"
    fake_llm.script(question, "Sure! Oslo, three days.")  # the retry gets the fake's "ack: ..."
    sdk = client(local_stack, "so-ben")

    with pytest.raises(openai.InternalServerError) as caught:
        sdk.chat.completions.create(
            model="agent-harness",
            messages=[{"role": "user", "content": question}],
            response_format={"type": "json_object"},
            extra_headers={"X-Session-Id": "so-bad"},
        )

    assert caught.value.status_code == 502
    assert caught.value.body["code"] == "model_output_invalid"
    correction = fake_llm.requests[-1]["messages"][-1]["content"]
    assert correction.startswith("Your answer must be a JSON object")
    with local_stack.client("so-ben") as http:
        assert http.get("/v1/sessions/so-bad/messages").json()["turns"] == []


def test_tool_choice_required_and_named_reach_the_model(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    sdk = client(local_stack, "so-cat")
    for question, choice in (("SDK required: order 7", "required"), ("SDK named: order 8", NAMED)):
        fake_llm.script(question, [("call_x", "lookup_order", {"order_id": 7})])

        answer = sdk.chat.completions.create(
            model="agent-harness",
            messages=[{"role": "user", "content": question}],
            tools=[ORDER_TOOL],
            tool_choice=choice,  # type: ignore[arg-type]
        )

        assert answer.choices[0].finish_reason == "tool_calls"
        [request] = fake_llm.requests_of(question)
        assert request["tool_choice"] == choice
    named, required = (
        fake_llm.requests_of("SDK named: order 8"),
        fake_llm.requests_of("SDK required: order 7"),
    )
    assert offered(named[0]) == ["lookup_order"]
    assert {"memory_search", "lookup_order"} <= set(offered(required[0]))


def test_bad_options_and_image_parts_are_refused_before_the_model(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    sdk = client(local_stack, "so-dan")
    before = len(fake_llm.requests)
    with pytest.raises(openai.UnprocessableEntityError, match="temperature"):
        sdk.chat.completions.create(
            model="agent-harness", messages=[{"role": "user", "content": "hi"}], temperature=5
        )
    with pytest.raises(openai.UnprocessableEntityError, match="not one of the declared tools"):
        sdk.chat.completions.create(
            model="agent-harness",
            messages=[{"role": "user", "content": "hi"}],
            tool_choice=NAMED,  # type: ignore[arg-type]
        )
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    with pytest.raises(openai.BadRequestError, match="image_url content parts"):
        sdk.chat.completions.create(
            model="agent-harness",
            messages=[{"role": "user", "content": [{"type": "text", "text": "what?"}, image]}],
        )
    assert len(fake_llm.requests) == before


def test_our_own_route_takes_the_same_options(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    question = "REST structured: a trip"
    fake_llm.script(question, '{"city": "Rome", "days": 2}')
    with local_stack.client("so-eve") as http:
        answer = http.post(
            "/v1/sessions/so-rest/messages",
            json={
                "message": question,
                "response_format": {"type": "json_object"},
                "temperature": 0.1,
                "stop": "END",
            },
        )
        assert answer.status_code == 200, answer.text
        assert json.loads(answer.json()["reply"]) == {"city": "Rome", "days": 2}
        refused = http.post("/v1/sessions/so-rest/messages", json={"message": "x", "top_p": 2})
        assert refused.status_code == 422
    [request] = fake_llm.requests_of(question)
    assert request["response_format"] == {"type": "json_object"}
    assert (request["temperature"], request["stop"]) == (0.1, ["END"])


def test_langchain_structured_output_and_tool_choice_any(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    chat = ChatOpenAI(
        model="agent-harness",
        base_url=f"{local_stack.url}/v1",
        api_key="dev-mode-needs-no-key",  # type: ignore[arg-type]
        default_headers={"X-User-Id": "so-fay"},
        max_retries=0,
    )
    question = "LangChain structured: two days in Rome"
    fake_llm.script(question, '{"city": "Rome", "days": 2}')

    trip = chat.with_structured_output(Trip).invoke(question)

    assert trip == Trip(city="Rome", days=2)
    [request] = fake_llm.requests_of(question)
    assert request["response_format"]["json_schema"]["name"] == "Trip"

    @tool
    def lookup_order(order_id: int) -> str:
        """Find an order by its number."""
        return "shipped"

    question = "LangChain any: order 5"
    fake_llm.script(question, [("call_lc", "lookup_order", {"order_id": 5})])
    message = chat.bind_tools([lookup_order], tool_choice="any").invoke(question)

    assert [c["name"] for c in message.tool_calls] == ["lookup_order"]  # type: ignore[attr-defined]
    [request] = fake_llm.requests_of(question)
    assert request["tool_choice"] == "required"


def test_pydantic_ai_tool_output(local_stack: LocalStackProcess, fake_llm: FakeLLM) -> None:
    provider = OpenAIProvider(base_url=f"{local_stack.url}/v1", api_key="dev-mode-needs-no-key")
    model = OpenAIChatModel("agent-harness", provider=provider)
    agent = Agent(model, output_type=Trip)
    question = "Pydantic AI: four days in Lisbon"
    fake_llm.script(question, [("call_pa", "final_result", {"city": "Lisbon", "days": 4})])

    result = agent.run_sync(
        question, model_settings={"extra_headers": {"X-User-Id": "so-gus"}, "temperature": 0.2}
    )

    assert result.output == Trip(city="Lisbon", days=4)
    [request] = fake_llm.requests_of(question)
    assert "final_result" in offered(request) and request["temperature"] == 0.2
    assert request["tool_choice"] == "required"


def test_openai_agents_structured_output_and_tool_choice(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    set_tracing_disabled(True)  # no traces leave the machine
    sdk = AsyncOpenAI(
        base_url=f"{local_stack.url}/v1",
        api_key="dev-mode-needs-no-key",
        default_headers={"X-User-Id": "so-hal"},
        max_retries=0,
    )
    question = "Agents SDK: a week in Porto"
    fake_llm.script(question, '{"city": "Porto", "days": 7}')
    agent = SdkAgent(
        name="planner",
        model=OpenAIChatCompletionsModel(model="agent-harness", openai_client=sdk),
        output_type=Trip,
        model_settings=ModelSettings(temperature=0.4, top_p=0.9),
    )

    result = Runner.run_sync(agent, question)

    assert result.final_output == Trip(city="Porto", days=7)
    [request] = fake_llm.requests_of(question)
    assert request["response_format"]["type"] == "json_schema"
    assert (request["temperature"], request["top_p"]) == (0.4, 0.9)


def test_the_offline_models_second_tool_turn_gets_a_new_call_id(
    offline_stack: LocalStackProcess,
) -> None:
    sdk = client(offline_stack, "so-ida")
    session = {"X-Session-Id": "so-offline"}
    messages: list = []
    ids = []
    for question in ("Where is order 42?", "And where is order 43?"):
        messages.append({"role": "user", "content": question})
        paused = sdk.chat.completions.create(
            model="agent-harness", messages=messages, tools=[ORDER_TOOL], extra_headers=session
        )
        [call] = paused.choices[0].message.tool_calls or []
        ids.append(call.id)
        messages += [
            paused.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "shipped"},
        ]
        done = sdk.chat.completions.create(
            model="agent-harness", messages=messages, tools=[ORDER_TOOL], extra_headers=session
        )
        messages.append({"role": "assistant", "content": done.choices[0].message.content})

    assert ids == ["offline-call-1", "offline-call-2"]
