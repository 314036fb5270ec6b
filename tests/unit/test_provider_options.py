"""What each provider adapter sends for the caller's options (tool_choice,
response_format, sampling), and the offline stand-in's answers to them."""

from __future__ import annotations

import json
from typing import Any

import httpx

from agent_harness.json_schema import argument_errors
from agent_harness.models.anthropic import AnthropicChatModel
from agent_harness.models.base import ChatRequest, Message, ResponseFormat, ToolSpec
from agent_harness.models.bedrock import BedrockChatModel
from agent_harness.models.instance import minimal_instance
from agent_harness.models.offline import LABEL, OfflineChatModel
from agent_harness.models.openai import OpenAIChatModel
from agent_harness.models.structured import ANSWER_TOOL

ASK = [Message(role="system", content="sys"), Message(role="user", content="plan a trip")]
ORDER = ToolSpec(
    name="lookup_order",
    description="Find an order",
    parameters={
        "type": "object",
        "properties": {"order_id": {"type": "integer"}},
        "required": ["order_id"],
    },
)
SEARCH = ToolSpec(name="memory_search", description="search", parameters={"type": "object"})
SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "minimum": 1},
        "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}, "minItems": 1},
    },
    "required": ["city", "days", "tags"],
    "additionalProperties": False,
    "$defs": {"Tag": {"type": "string", "enum": ["sea", "hills"]}},
}
TRIP = ResponseFormat(type="json_schema", name="Trip", json_schema=SCHEMA, strict=True)
SAMPLING: dict[str, Any] = {"temperature": 1.5, "top_p": 0.5, "stop": ["END"], "seed": 9}


def openai_sent(request: ChatRequest) -> dict[str, Any]:
    seen: list[dict[str, Any]] = []

    def handler(http: httpx.Request) -> httpx.Response:
        seen.append(json.loads(http.content))
        message = {"role": "assistant", "content": "ok"}
        return httpx.Response(200, json={"choices": [{"message": message}], "usage": {}})

    client = httpx.Client(transport=httpx.MockTransport(handler))
    OpenAIChatModel("gpt-test", base_url="https://llm.example/v1", client=client).complete(request)
    return seen[0]


def test_openai_gets_the_options_in_its_own_words() -> None:
    sent = openai_sent(
        ChatRequest(
            messages=ASK,
            tools=[ORDER],
            tool_choice={"name": "lookup_order"},
            response_format=TRIP,
            max_output_tokens=64,
            **SAMPLING,
        )
    )
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "lookup_order"}}
    assert sent["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Trip", "strict": True, "schema": SCHEMA},
    }
    sampled = (sent["temperature"], sent["top_p"], sent["stop"], sent["seed"])
    assert sampled == (1.5, 0.5, ["END"], 9)
    assert sent["max_tokens"] == 64


def test_openai_sends_nothing_it_was_not_asked() -> None:
    sent = openai_sent(ChatRequest(messages=ASK, tool_choice="required"))
    assert set(sent) == {"model", "messages"}  # no tools: no choice to send
    sent = openai_sent(
        ChatRequest(
            messages=ASK,
            tools=[SEARCH],
            tool_choice="required",
            response_format=ResponseFormat(type="json_object"),
        )
    )
    assert sent["tool_choice"] == "required"
    assert sent["response_format"] == {"type": "json_object"}


def anthropic_exchange(request: ChatRequest, content: list[dict[str, Any]]) -> tuple[dict, Message]:
    seen: list[dict[str, Any]] = []

    def handler(http: httpx.Request) -> httpx.Response:
        seen.append(json.loads(http.content))
        return httpx.Response(200, json={"content": content, "usage": {}})

    client = httpx.Client(transport=httpx.MockTransport(handler))
    model = AnthropicChatModel("claude-test", api_key="k", client=client)
    message = model.complete(request).message
    return seen[0], message


def test_anthropic_maps_the_choice_and_sampling_and_has_no_seed() -> None:
    sent, _ = anthropic_exchange(
        ChatRequest(messages=ASK, tools=[SEARCH, ORDER], tool_choice="required", **SAMPLING),
        [{"type": "text", "text": "hi"}],
    )
    assert sent["tool_choice"] == {"type": "any"}
    assert (sent["temperature"], sent["top_p"], sent["stop_sequences"]) == (1.0, 0.5, ["END"])
    assert "seed" not in sent
    sent, _ = anthropic_exchange(
        ChatRequest(messages=ASK, tools=[ORDER], tool_choice={"name": "lookup_order"}),
        [{"type": "text", "text": "hi"}],
    )
    assert sent["tool_choice"] == {"type": "tool", "name": "lookup_order"}


def test_anthropic_answers_a_format_through_a_forced_answer_tool() -> None:
    call = {"type": "tool_use", "id": "t1", "name": ANSWER_TOOL, "input": {"city": "Oslo"}}
    sent, message = anthropic_exchange(ChatRequest(messages=ASK, response_format=TRIP), [call])
    assert sent["tool_choice"] == {"type": "tool", "name": ANSWER_TOOL}
    assert sent["tools"][0]["input_schema"] == SCHEMA
    assert message.tool_calls == [] and json.loads(message.content) == {"city": "Oslo"}

    # with memory tools offered, a tool must be called: a memory tool, or the answer
    search = {"type": "tool_use", "id": "t2", "name": "memory_search", "input": {}}
    sent, message = anthropic_exchange(
        ChatRequest(messages=ASK, tools=[SEARCH], response_format=TRIP), [search]
    )
    assert sent["tool_choice"] == {"type": "any"}
    assert [t["name"] for t in sent["tools"]] == ["memory_search", ANSWER_TOOL]
    assert [c.name for c in message.tool_calls] == ["memory_search"]


class Converse:
    def __init__(self, content: list[dict[str, Any]]) -> None:
        self.content = content
        self.sent: list[dict[str, Any]] = []

    def converse(self, **kwargs: Any) -> dict[str, Any]:
        self.sent.append(kwargs)
        return {"output": {"message": {"role": "assistant", "content": self.content}}}


def test_bedrock_maps_inference_config_and_tool_choice() -> None:
    client = Converse([{"text": "hi"}])
    model = BedrockChatModel("anthropic.claude-test", client=client)
    model.complete(
        ChatRequest(
            messages=ASK,
            tools=[ORDER],
            tool_choice={"name": "lookup_order"},
            max_output_tokens=77,
            **SAMPLING,
        )
    )
    sent = client.sent[0]
    assert sent["inferenceConfig"] == {
        "maxTokens": 77,
        "temperature": 1.0,
        "topP": 0.5,
        "stopSequences": ["END"],
    }
    assert sent["toolConfig"]["toolChoice"] == {"tool": {"name": "lookup_order"}}


def test_bedrock_answers_a_format_through_a_forced_answer_tool() -> None:
    use = {"toolUse": {"toolUseId": "u1", "name": ANSWER_TOOL, "input": {"city": "Rome"}}}
    client = Converse([use])
    model = BedrockChatModel("anthropic.claude-test", client=client)
    request = ChatRequest(messages=ASK, tools=[SEARCH], response_format=TRIP)
    message = model.complete(request).message
    config = client.sent[0]["toolConfig"]
    assert config["toolChoice"] == {"any": {}}
    assert config["tools"][1]["toolSpec"]["inputSchema"] == {"json": SCHEMA}
    assert message.tool_calls == [] and json.loads(message.content) == {"city": "Rome"}
    # alone, the answer tool is forced with "any": a named tool is for Claude and Nova only
    model.complete(ChatRequest(messages=ASK, response_format=TRIP))
    assert client.sent[1]["toolConfig"]["toolChoice"] == {"any": {}}


# -- the offline stand-in ------------------------------------------------------------------


def test_a_minimal_instance_is_valid_against_its_schema() -> None:
    value = minimal_instance(SCHEMA, "Oslo")
    assert value == {"city": "Oslo", "days": 1, "tags": ["sea"]}
    assert argument_errors(value, SCHEMA) == []


def test_offline_answers_in_the_asked_format() -> None:
    offline = OfflineChatModel()
    answer = offline.complete(ChatRequest(messages=ASK, response_format=TRIP)).message.content
    assert argument_errors(json.loads(answer), SCHEMA) == []
    plain = ChatRequest(messages=ASK, response_format=ResponseFormat(type="json_object"))
    value = json.loads(offline.complete(plain).message.content)
    assert value["answer"].startswith(LABEL)


def test_offline_honours_a_forced_or_required_tool_choice() -> None:
    offline = OfflineChatModel()
    named = ChatRequest(messages=ASK, tools=[SEARCH, ORDER], tool_choice={"name": "lookup_order"})
    [call] = offline.complete(named).message.tool_calls
    assert call.name == "lookup_order" and json.loads(call.arguments) == {"order_id": 0}
    required = ChatRequest(messages=ASK, tools=[SEARCH, ORDER], tool_choice="required")
    assert [c.name for c in offline.complete(required).message.tool_calls] == ["lookup_order"]


def test_offline_tool_call_ids_are_unique_in_the_conversation() -> None:
    offline = OfflineChatModel()
    ask = [Message(role="user", content="where is order 42?")]
    first = offline.complete(ChatRequest(messages=ask, tools=[ORDER])).message
    later = [
        *ask,
        first,
        Message(role="tool", content="shipped", tool_call_id=first.tool_calls[0].id),
        Message(role="assistant", content="It shipped."),
        Message(role="user", content="and order 43?"),
    ]
    second = offline.complete(ChatRequest(messages=later, tools=[ORDER])).message
    assert first.tool_calls[0].id == "offline-call-1"
    assert second.tool_calls[0].id == "offline-call-2"
