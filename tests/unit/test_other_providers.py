from __future__ import annotations

import json

import boto3
import httpx
import pytest
from botocore.stub import Stubber

from agent_harness.errors import ModelError, ModelOutputError, ModelRateLimitError
from agent_harness.models import ModelRegistry
from agent_harness.models.base import ChatRequest, Message, ToolCall, ToolSpec
from agent_harness.models.bedrock import BedrockChatModel
from agent_harness.models.convert import alternating_turns
from agent_harness.settings import Settings

CONVERSATION = [
    Message(role="system", content="be brief"),
    Message(role="user", content="<harness_context>memory</harness_context>"),
    Message(role="user", content="find my tea"),
    Message(
        role="assistant",
        content="Let me look.",
        tool_calls=[ToolCall(id="t1", name="memory_search", arguments='{"query": "tea"}')],
    ),
    Message(role="tool", tool_call_id="t1", name="memory_search", content="- prefers green tea"),
]
TOOLS = [ToolSpec(name="memory_search", description="search", parameters={"type": "object"})]


def test_turns_alternate_and_tool_results_belong_to_the_user() -> None:
    system, turns = alternating_turns(CONVERSATION)
    assert system == "be brief"
    assert [t.role for t in turns] == ["user", "assistant", "user"]
    assert [p.kind for p in turns[0].parts] == ["text", "text"]  # the two user messages merged
    assert [p.kind for p in turns[1].parts] == ["text", "tool_use"]
    assert turns[1].parts[1].input == {"query": "tea"}
    assert turns[2].parts[0].kind == "tool_result" and turns[2].parts[0].id == "t1"


def test_a_conversation_never_starts_with_the_assistant() -> None:
    _, turns = alternating_turns(
        [Message(role="assistant", content="hi"), Message(role="user", content="x")]
    )
    assert turns[0].role == "user"


def test_malformed_tool_arguments_are_kept_not_crashed_on() -> None:
    message = Message(role="assistant", tool_calls=[ToolCall(id="a", name="n", arguments="{oops")])
    _, turns = alternating_turns([Message(role="user", content="q"), message])
    assert turns[1].parts[0].input == {"_raw": "{oops"}


# -- Anthropic -------------------------------------------------------------------------
def anthropic_registry(handler) -> ModelRegistry:
    settings = Settings(
        agent_model="anthropic:claude-test",
        anthropic_api_key="ak-1",
        anthropic_base_url="https://anth.example",
    )
    client = httpx.Client(transport=httpx.MockTransport(handler))
    return ModelRegistry(settings, http_client=client, sleep=lambda seconds: None)


def test_anthropic_request_and_response() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(
            200,
            json={
                "content": [
                    {"type": "text", "text": "Checking."},
                    {
                        "type": "tool_use",
                        "id": "t2",
                        "name": "memory_get",
                        "input": {"path": "MEMORY.md"},
                    },
                ],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 30, "output_tokens": 9},
            },
        )

    model = anthropic_registry(handler).for_role("agent")
    response = model.complete(ChatRequest(messages=CONVERSATION, tools=TOOLS))

    sent = json.loads(seen[0].content)
    assert str(seen[0].url) == "https://anth.example/v1/messages"
    assert seen[0].headers["x-api-key"] == "ak-1" and seen[0].headers["anthropic-version"]
    assert sent["system"] == "be brief" and sent["max_tokens"] == 4096
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    assert sent["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "- prefers green tea"}
    ]
    assert sent["tools"] == [
        {"name": "memory_search", "description": "search", "input_schema": {"type": "object"}}
    ]
    assert response.message.content == "Checking."
    assert response.message.tool_calls == [
        ToolCall(id="t2", name="memory_get", arguments='{"path": "MEMORY.md"}')
    ]
    assert (response.usage.input_tokens, response.usage.output_tokens) == (30, 9)
    assert model.name == "anthropic:claude-test"


def test_anthropic_errors_are_model_errors() -> None:
    limited = anthropic_registry(
        lambda r: httpx.Response(429, headers={"retry-after": "3"})
    ).for_role("agent")
    with pytest.raises(ModelRateLimitError):
        limited.complete(ChatRequest(messages=CONVERSATION))
    overloaded = anthropic_registry(
        lambda r: httpx.Response(529, json={"error": {"message": "overloaded"}})
    )
    with pytest.raises(ModelError, match="overloaded"):
        overloaded.for_role("agent").complete(ChatRequest(messages=CONVERSATION))
    garbage = anthropic_registry(lambda r: httpx.Response(200, json={"content": "nope"}))
    with pytest.raises(ModelOutputError):
        garbage.for_role("agent").complete(ChatRequest(messages=CONVERSATION))


# -- Bedrock ---------------------------------------------------------------------------
def bedrock_model() -> tuple[BedrockChatModel, Stubber]:
    client = boto3.client(
        "bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    stubber = Stubber(client)
    registry = ModelRegistry(
        Settings(agent_model="bedrock:anthropic.claude-test-v1:0", model_max_output_tokens=512),
        bedrock_client=client,
        sleep=lambda seconds: None,
    )
    return registry.for_role("agent"), stubber  # type: ignore[return-value]


def test_bedrock_converse_request_and_response() -> None:
    model, stubber = bedrock_model()
    expected = {
        "modelId": "anthropic.claude-test-v1:0",
        "system": [{"text": "be brief"}],
        "inferenceConfig": {"maxTokens": 512},
        "messages": [
            {
                "role": "user",
                "content": [
                    {"text": "<harness_context>memory</harness_context>"},
                    {"text": "find my tea"},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"text": "Let me look."},
                    {
                        "toolUse": {
                            "toolUseId": "t1",
                            "name": "memory_search",
                            "input": {"query": "tea"},
                        }
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "toolResult": {
                            "toolUseId": "t1",
                            "content": [{"text": "- prefers green tea"}],
                        }
                    }
                ],
            },
        ],
        "toolConfig": {
            "tools": [
                {
                    "toolSpec": {
                        "name": "memory_search",
                        "description": "search",
                        "inputSchema": {"json": {"type": "object"}},
                    }
                }
            ]
        },
    }
    answer = {
        "output": {"message": {"role": "assistant", "content": [{"text": "Green tea."}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 50, "outputTokens": 4, "totalTokens": 54},
        "metrics": {"latencyMs": 100},
    }
    stubber.add_response("converse", answer, expected)
    with stubber:
        response = model.complete(ChatRequest(messages=CONVERSATION, tools=TOOLS))
    assert response.message.content == "Green tea."
    assert (response.usage.input_tokens, response.usage.output_tokens) == (50, 4)
    assert model.name == "bedrock:anthropic.claude-test-v1:0"
