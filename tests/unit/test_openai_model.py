from __future__ import annotations

import json

import httpx
import pytest

from agent_harness.errors import (
    ModelAuthError,
    ModelOutputError,
)
from agent_harness.models import ModelRegistry
from agent_harness.models.base import ChatRequest, Message, ToolSpec
from agent_harness.models.openai import OpenAIChatModel
from agent_harness.settings import Settings


def completion(content: str | None = "hi", tool_calls: list | None = None) -> dict:
    message: dict = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "choices": [{"message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3},
    }


def model_with(handler, **kwargs) -> OpenAIChatModel:
    client = httpx.Client(transport=httpx.MockTransport(handler))
    return OpenAIChatModel("gpt-test", base_url="https://llm.example/v1", client=client, **kwargs)


REQUEST = ChatRequest(
    messages=[Message(role="system", content="sys"), Message(role="user", content="hello")],
    tools=[ToolSpec(name="memory_search", description="search", parameters={"type": "object"})],
)


def test_request_is_a_chat_completion_with_tools_and_bearer_key() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=completion())

    response = model_with(handler, api_key="sk-1").complete(REQUEST)
    sent = json.loads(seen[0].content)
    assert str(seen[0].url) == "https://llm.example/v1/chat/completions"
    assert seen[0].headers["authorization"] == "Bearer sk-1"
    assert sent["model"] == "gpt-test"
    assert sent["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hello"},
    ]
    assert sent["tools"][0]["function"]["name"] == "memory_search"
    assert response.message.content == "hi"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 3)


def test_tool_calls_are_parsed() -> None:
    calls = [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "memory_search", "arguments": '{"query":"x"}'},
        }
    ]
    model = model_with(lambda r: httpx.Response(200, json=completion(None, calls)))
    message = model.complete(REQUEST).message
    assert message.content == ""
    assert [(c.id, c.name, c.arguments) for c in message.tool_calls] == [
        ("c1", "memory_search", '{"query":"x"}')
    ]


@pytest.mark.parametrize("body", [b"not json", b'{"choices": []}', b'{"choices": [{}]}', b"[]"])
def test_malformed_completions_are_model_output_errors(body: bytes) -> None:
    with pytest.raises(ModelOutputError):
        model_with(lambda r: httpx.Response(200, content=body)).complete(REQUEST)


def test_client_errors_are_reported_with_the_provider_message() -> None:
    model = model_with(lambda r: httpx.Response(401, json={"error": {"message": "bad key"}}))
    with pytest.raises(ModelAuthError, match=r"\(401\): bad key"):
        model.complete(REQUEST)


def test_registry_builds_providers_from_settings_and_falls_back_per_role() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=completion())

    settings = Settings(
        agent_model="openai:gpt-4.1-mini",
        memory_model="ollama:llama3.1",
        openai_base_url="http://vllm.local:8000/v1",
        openai_api_key="sk-x",
        ollama_base_url="http://ollama.local:11434/v1",
    )
    registry = ModelRegistry(
        settings, http_client=httpx.Client(transport=httpx.MockTransport(handler))
    )
    # one provider object per distinct model; each role has its own wrapper (metrics)
    assert registry.for_role("compaction").inner is registry.for_role("agent").inner
    registry.for_role("agent").complete(REQUEST)
    registry.for_role("memory").complete(REQUEST)
    assert str(seen[0].url) == "http://vllm.local:8000/v1/chat/completions"
    assert seen[0].headers["authorization"] == "Bearer sk-x"
    assert str(seen[1].url) == "http://ollama.local:11434/v1/chat/completions"
    assert "authorization" not in seen[1].headers
    assert registry.for_role("memory").name == "ollama:llama3.1"
