"""Each provider against its real wire format: recorded responses (tests/fixtures/providers)
through httpx.MockTransport, Bedrock through botocore's Stubber. The requests we send are
checked field by field, and a parallel tool-call round trip must survive translation
exactly: the ids, names and arguments the provider sent come back to it unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.stub import Stubber

from agent_harness.errors import (
    ContextOverflowError,
    ModelAuthError,
    ModelBadRequestError,
    ModelRateLimitError,
    ModelTimeoutError,
    ModelUnavailableError,
)
from agent_harness.models.anthropic import AnthropicChatModel
from agent_harness.models.base import ChatRequest, Message, ToolCall, ToolSpec
from agent_harness.models.bedrock import BedrockChatModel
from agent_harness.models.openai import OpenAIChatModel
from agent_harness.models.resilience import ResilientModel
from agent_harness.tokens import TokenCounter

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "providers"
OPENAI = json.loads((FIXTURES / "openai.json").read_text())
ANTHROPIC = json.loads((FIXTURES / "anthropic.json").read_text())
BEDROCK = json.loads((FIXTURES / "bedrock.json").read_text())

SYSTEM = "You are a helpful assistant."
QUESTION = "What do I like to drink, and what's the weather in Lisbon?"
SEARCH_SCHEMA = {
    "type": "object",
    "properties": {"query": {"type": "string"}},
    "required": ["query"],
}
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city"],
}
TOOLS = [
    ToolSpec(name="memory_search", description="Search memory", parameters=SEARCH_SCHEMA),
    ToolSpec(name="weather", description="Current weather", parameters=WEATHER_SCHEMA),
]
FIRST = ChatRequest(
    messages=[Message(role="system", content=SYSTEM), Message(role="user", content=QUESTION)],
    tools=TOOLS,
)
RESULTS = {"memory_search": "Source: MEMORY.md#3: - The user prefers green tea.", "weather": "18°C"}


def follow_up(assistant: Message) -> ChatRequest:
    """The second request of the round trip: the tool calls and their results."""
    results = [
        Message(role="tool", tool_call_id=c.id, name=c.name, content=RESULTS[c.name])
        for c in assistant.tool_calls
    ]
    return ChatRequest(messages=[*FIRST.messages, assistant, *results], tools=TOOLS)


class Recorder:
    """A MockTransport answering recorded responses in order; keeps what was sent."""

    def __init__(self, *recorded: dict[str, Any]) -> None:
        self.recorded = list(recorded)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.recorded.pop(0)
        return httpx.Response(answer["status"], headers=answer["headers"], json=answer["body"])

    def sent(self, n: int = -1) -> dict[str, Any]:
        return json.loads(self.requests[n].content)


def openai(recorder: Recorder) -> OpenAIChatModel:
    client = httpx.Client(transport=httpx.MockTransport(recorder))
    return OpenAIChatModel(
        "gpt-4.1-mini", base_url="https://api.openai.com/v1", api_key="sk-test", client=client
    )


def anthropic(recorder: Recorder) -> AnthropicChatModel:
    client = httpx.Client(transport=httpx.MockTransport(recorder))
    return AnthropicChatModel("claude-sonnet-4-5", api_key="ak-test", client=client)


# -- OpenAI (and compatible servers) -------------------------------------------------------
def test_openai_plain_reply_request_and_usage() -> None:
    recorder = Recorder(OPENAI["plain"])
    response = openai(recorder).complete(FIRST)

    request = recorder.requests[0]
    assert str(request.url) == "https://api.openai.com/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert recorder.sent() == {
        "model": "gpt-4.1-mini",
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "memory_search",
                    "description": "Search memory",
                    "parameters": SEARCH_SCHEMA,
                },
            },
            {
                "type": "function",
                "function": {
                    "name": "weather",
                    "description": "Current weather",
                    "parameters": WEATHER_SCHEMA,
                },
            },
        ],
    }
    assert response.message.content == "You like green tea."
    assert (response.usage.input_tokens, response.usage.output_tokens) == (19, 6)
    assert response.finish_reason == "stop"


def test_openai_parallel_tool_calls_survive_the_round_trip_exactly() -> None:
    recorder = Recorder(OPENAI["parallel_tool_calls"], OPENAI["plain"])
    model = openai(recorder)
    assistant = model.complete(FIRST).message
    wire_calls = OPENAI["parallel_tool_calls"]["body"]["choices"][0]["message"]["tool_calls"]

    assert [(c.id, c.name, c.arguments) for c in assistant.tool_calls] == [
        (w["id"], w["function"]["name"], w["function"]["arguments"]) for w in wire_calls
    ]
    model.complete(follow_up(assistant))

    sent = recorder.sent()["messages"]
    assert sent[2] == {"role": "assistant", "content": None, "tool_calls": wire_calls}
    assert sent[3:] == [
        {
            "role": "tool",
            "content": RESULTS["memory_search"],
            "tool_call_id": "call_a1",
            "name": "memory_search",
        },
        {
            "role": "tool",
            "content": RESULTS["weather"],
            "tool_call_id": "call_b2",
            "name": "weather",
        },
    ]


@pytest.mark.parametrize(
    ("case", "error"),
    [
        ("overflow", ContextOverflowError),
        ("overflow_vllm", ContextOverflowError),
        ("rate_limited", ModelRateLimitError),
        ("server_error", ModelUnavailableError),
        ("auth", ModelAuthError),
        ("bad_request", ModelBadRequestError),
    ],
)
def test_openai_errors_are_typed(case: str, error: type) -> None:
    with pytest.raises(error) as caught:
        openai(Recorder(OPENAI[case])).complete(FIRST)
    assert type(caught.value) is error
    if case == "rate_limited":
        assert caught.value.retry_after == 7  # type: ignore[attr-defined]


def test_openai_transport_failures_are_typed() -> None:
    def timeout(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    client = httpx.Client(transport=httpx.MockTransport(timeout))
    with pytest.raises(ModelTimeoutError):
        OpenAIChatModel("m", base_url="http://x/v1", client=client).complete(FIRST)
    client = httpx.Client(transport=httpx.MockTransport(refused))
    with pytest.raises(ModelUnavailableError):
        OpenAIChatModel("m", base_url="http://x/v1", client=client).complete(FIRST)


def test_the_attempt_timeout_reaches_the_http_request() -> None:
    recorder = Recorder(OPENAI["plain"])
    openai(recorder).complete(FIRST.model_copy(update={"timeout": 4.5}))
    assert recorder.requests[0].extensions["timeout"]["read"] == 4.5


def test_a_server_without_usage_gets_an_estimate_marked_as_such(caplog) -> None:
    import logging

    recorder = Recorder(OPENAI["tool_call_no_usage"])
    model = ResilientModel(openai(recorder), role="agent", timeout=25, counter=TokenCounter())
    with caplog.at_level(logging.INFO):
        response = model.complete(FIRST)
    assert response.usage.input_tokens > 0  # estimated from the request with tiktoken
    [line] = [r for r in caplog.records if r.getMessage() == "model call"]
    assert line.usage_estimated is True  # type: ignore[attr-defined]
    plain = ResilientModel(
        openai(Recorder(OPENAI["plain"])), role="agent", timeout=25, counter=TokenCounter()
    )
    assert plain.complete(FIRST).usage.input_tokens == 19  # the provider's own count wins
    assert response.message.tool_calls[0].arguments == '{"path":"MEMORY.md"}'


# -- Anthropic -----------------------------------------------------------------------------
def test_anthropic_plain_reply_request_and_usage() -> None:
    recorder = Recorder(ANTHROPIC["plain"])
    response = anthropic(recorder).complete(FIRST)

    request = recorder.requests[0]
    assert str(request.url) == "https://api.anthropic.com/v1/messages"
    assert request.headers["x-api-key"] == "ak-test"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert recorder.sent() == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "system": SYSTEM,
        "messages": [{"role": "user", "content": [{"type": "text", "text": QUESTION}]}],
        "tools": [
            {
                "name": "memory_search",
                "description": "Search memory",
                "input_schema": SEARCH_SCHEMA,
            },
            {"name": "weather", "description": "Current weather", "input_schema": WEATHER_SCHEMA},
        ],
    }
    assert response.message.content == "You like green tea."
    assert (response.usage.input_tokens, response.usage.output_tokens) == (21, 8)
    assert response.finish_reason == "end_turn"


def test_anthropic_parallel_tool_calls_survive_the_round_trip_exactly() -> None:
    recorder = Recorder(ANTHROPIC["parallel_tool_calls"], ANTHROPIC["plain"])
    model = anthropic(recorder)
    assistant = model.complete(FIRST).message
    blocks = ANTHROPIC["parallel_tool_calls"]["body"]["content"]
    uses = [b for b in blocks if b["type"] == "tool_use"]

    assert assistant.content == "I'll check both."
    assert [(c.id, c.name, json.loads(c.arguments)) for c in assistant.tool_calls] == [
        (u["id"], u["name"], u["input"]) for u in uses
    ]
    model.complete(follow_up(assistant))

    sent = recorder.sent()["messages"]
    assert sent[1] == {"role": "assistant", "content": blocks}  # exactly what it sent us
    assert sent[2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": uses[0]["id"],
                "content": RESULTS["memory_search"],
            },
            {"type": "tool_result", "tool_use_id": uses[1]["id"], "content": RESULTS["weather"]},
        ],
    }


@pytest.mark.parametrize(
    ("case", "error"),
    [
        ("overflow", ContextOverflowError),
        ("rate_limited", ModelRateLimitError),
        ("overloaded", ModelUnavailableError),
        ("server_error", ModelUnavailableError),
        ("auth", ModelAuthError),
        ("bad_request", ModelBadRequestError),
    ],
)
def test_anthropic_errors_are_typed(case: str, error: type) -> None:
    with pytest.raises(error) as caught:
        anthropic(Recorder(ANTHROPIC[case])).complete(FIRST)
    assert type(caught.value) is error
    if case == "rate_limited":
        assert caught.value.retry_after == 12  # type: ignore[attr-defined]


# -- Bedrock (Converse) --------------------------------------------------------------------
def bedrock() -> tuple[BedrockChatModel, Stubber]:
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    stubber = Stubber(client)
    return BedrockChatModel("anthropic.claude-sonnet-4-5-v1:0", client=client), stubber


BEDROCK_TOOLS = {
    "tools": [
        {
            "toolSpec": {
                "name": "memory_search",
                "description": "Search memory",
                "inputSchema": {"json": SEARCH_SCHEMA},
            }
        },
        {
            "toolSpec": {
                "name": "weather",
                "description": "Current weather",
                "inputSchema": {"json": WEATHER_SCHEMA},
            }
        },
    ]
}


def test_bedrock_plain_reply_request_and_usage() -> None:
    model, stubber = bedrock()
    expected = {
        "modelId": "anthropic.claude-sonnet-4-5-v1:0",
        "system": [{"text": SYSTEM}],
        "messages": [{"role": "user", "content": [{"text": QUESTION}]}],
        "toolConfig": BEDROCK_TOOLS,
    }
    stubber.add_response("converse", BEDROCK["plain"], expected)
    with stubber:
        response = model.complete(FIRST)
    stubber.assert_no_pending_responses()
    assert response.message.content == "You like green tea."
    assert (response.usage.input_tokens, response.usage.output_tokens) == (24, 7)
    assert response.finish_reason == "end_turn"


def test_bedrock_parallel_tool_calls_survive_the_round_trip_exactly() -> None:
    model, stubber = bedrock()
    blocks = BEDROCK["parallel_tool_calls"]["output"]["message"]["content"]
    uses = [b["toolUse"] for b in blocks if "toolUse" in b]
    stubber.add_response("converse", BEDROCK["parallel_tool_calls"])
    second = {
        "modelId": "anthropic.claude-sonnet-4-5-v1:0",
        "system": [{"text": SYSTEM}],
        "messages": [
            {"role": "user", "content": [{"text": QUESTION}]},
            {"role": "assistant", "content": blocks},
            {
                "role": "user",
                "content": [
                    {
                        "toolResult": {
                            "toolUseId": uses[0]["toolUseId"],
                            "content": [{"text": RESULTS["memory_search"]}],
                        }
                    },
                    {
                        "toolResult": {
                            "toolUseId": uses[1]["toolUseId"],
                            "content": [{"text": RESULTS["weather"]}],
                        }
                    },
                ],
            },
        ],
        "toolConfig": BEDROCK_TOOLS,
    }
    stubber.add_response("converse", BEDROCK["plain"], second)
    with stubber:
        assistant = model.complete(FIRST).message
        assert [(c.id, c.name, json.loads(c.arguments)) for c in assistant.tool_calls] == [
            (u["toolUseId"], u["name"], u["input"]) for u in uses
        ]
        model.complete(follow_up(assistant))
    stubber.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("case", "error"),
    [
        ("overflow", ContextOverflowError),
        ("rate_limited", ModelRateLimitError),
        ("server_error", ModelUnavailableError),
        ("unavailable", ModelUnavailableError),
        ("auth", ModelAuthError),
        ("bad_request", ModelBadRequestError),
        ("model_timeout", ModelTimeoutError),
    ],
)
def test_bedrock_errors_are_typed(case: str, error: type) -> None:
    model, stubber = bedrock()
    recorded = BEDROCK["errors"][case]
    stubber.add_client_error(
        "converse",
        service_error_code=recorded["code"],
        service_message=recorded["message"],
        http_status_code=recorded["status"],
    )
    with stubber, pytest.raises(error) as caught:
        model.complete(FIRST)
    assert type(caught.value) is error


def test_a_bedrock_call_over_its_time_is_abandoned_with_a_timeout() -> None:
    import threading

    release = threading.Event()

    class Slow:
        def converse(self, **kwargs: Any) -> dict[str, Any]:
            release.wait(5)
            return BEDROCK["plain"]

    model = BedrockChatModel("m", client=Slow())
    try:
        with pytest.raises(ModelTimeoutError):
            model.complete(FIRST.model_copy(update={"timeout": 0.2}))
    finally:
        release.set()


def test_retries_are_off_in_the_registrys_bedrock_client() -> None:
    from agent_harness.models import _bedrock_client

    config = _bedrock_client(30.0).meta.config
    assert config.retries["total_max_attempts"] == 1 and config.read_timeout == 30.0


def test_an_azure_style_gateway_gets_its_query_string_and_api_key_header() -> None:
    recorder = Recorder(OPENAI["plain"])
    client = httpx.Client(transport=httpx.MockTransport(recorder))
    model = OpenAIChatModel(
        "gpt-4.1-mini",
        base_url="https://acme.openai.azure.com/openai/v1/?api-version=preview",
        api_key="azure-key",
        auth_header="api-key",
        client=client,
    )
    model.complete(FIRST)
    request = recorder.requests[0]
    assert str(request.url) == (
        "https://acme.openai.azure.com/openai/v1/chat/completions?api-version=preview"
    )
    assert request.headers["api-key"] == "azure-key" and "authorization" not in request.headers


def test_retry_after_as_an_http_date_is_honoured() -> None:
    from datetime import UTC, datetime, timedelta
    from email.utils import format_datetime

    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    limited = dict(OPENAI["rate_limited"], headers={"retry-after": later})
    with pytest.raises(ModelRateLimitError) as caught:
        openai(Recorder(limited)).complete(FIRST)
    assert 28 <= caught.value.retry_after <= 31  # type: ignore[attr-defined]


# -- the loop's last call: no tools offered, a history with tool calls ------------------------
def last_call() -> ChatRequest:
    """The loop's last call offers no tools, but its history holds the turn's tool calls."""
    call = Message(
        role="assistant",
        tool_calls=[ToolCall(id="c1", name="memory_search", arguments='{"query": "tea"}')],
    )
    result = Message(role="tool", tool_call_id="c1", name="memory_search", content="green tea")
    return ChatRequest(messages=[*FIRST.messages, call, result], tools=[])


def test_anthropic_declares_the_historys_tools_not_to_be_called_when_none_are_offered() -> None:
    recorder = Recorder(ANTHROPIC["plain"])
    anthropic(recorder).complete(last_call())
    sent = json.loads(recorder.requests[0].content)
    assert [t["name"] for t in sent["tools"]] == ["memory_search"]  # refused without tools
    assert sent["tool_choice"] == {"type": "none"}
    plain = Recorder(ANTHROPIC["plain"])
    anthropic(plain).complete(ChatRequest(messages=FIRST.messages, tools=[]))
    assert "tools" not in json.loads(plain.requests[0].content)  # no tool history: no tools


def test_bedrock_declares_the_historys_tools_when_none_are_offered() -> None:
    captured: list[dict[str, Any]] = []

    class Client:
        def converse(self, **kwargs: Any) -> dict[str, Any]:
            captured.append(kwargs)
            return BEDROCK["plain"]

    model = BedrockChatModel("m", client=Client())
    model.complete(last_call())  # Converse refuses tool blocks without a toolConfig
    [tool] = captured[0]["toolConfig"]["tools"]
    assert tool["toolSpec"]["name"] == "memory_search"
    model.complete(ChatRequest(messages=FIRST.messages, tools=[]))
    assert "toolConfig" not in captured[1]
