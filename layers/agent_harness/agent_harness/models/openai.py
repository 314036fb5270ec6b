"""OpenAI-compatible chat completions over httpx.

Works with OpenAI and with any server that speaks ``POST {base_url}/chat/completions``:
Ollama (``ollama:<model>``, default base ``http://127.0.0.1:11434/v1``), vLLM,
llama.cpp's server, LiteLLM. The ``httpx.Client`` is injectable, so tests use
``httpx.MockTransport``; errors are mapped by ``models.http.post_json``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx

from agent_harness.errors import ModelOutputError
from agent_harness.models.base import (
    ChatRequest,
    ChatResponse,
    Message,
    ToolCall,
    Usage,
    forced_tool,
)
from agent_harness.models.http import OVERFLOW_PHRASES, ErrorBody, call_timeout, post_json

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["OpenAIChatModel", "auth_headers", "completions_url", "endpoint_url", "is_overflow"]


def endpoint_url(base_url: str, path: str) -> str:
    """``{base}{path}``, keeping a query string where gateways need one
    (Azure: ``https://<resource>.openai.azure.com/openai/v1?api-version=preview``)."""
    base, sep, query = base_url.partition("?")
    return base.rstrip("/") + path + (sep + query if sep else "")


def completions_url(base_url: str) -> str:
    """``{base}/chat/completions`` (``endpoint_url``)."""
    return endpoint_url(base_url, "/chat/completions")


def auth_headers(key: str | None, auth_header: str = "authorization") -> dict[str, str]:
    """How the key is sent: ``Authorization: Bearer`` (OpenAI and most servers) or
    ``api-key`` (Azure OpenAI and API Management gateways); nothing without a key."""
    if not key:
        return {}
    if auth_header == "api-key":
        return {"api-key": key}
    return {"Authorization": f"Bearer {key}"}


def is_overflow(error: ErrorBody) -> bool:
    """OpenAI and Azure say ``code: context_length_exceeded``; llama.cpp's server says
    ``type: exceed_context_size_error``; vLLM, DeepSeek and most gateways give only a
    400 whose message names the maximum context length (their documented wording)."""
    if error.code == "context_length_exceeded" or error.type == "exceed_context_size_error":
        return True
    return error.status == 400 and error.says(*OVERFLOW_PHRASES)


def _wire_message(message: Message) -> dict[str, Any]:
    # an assistant turn that only calls tools has no content (null, as the API documents)
    content = None if message.tool_calls and not message.content else message.content
    out: dict[str, Any] = {"role": message.role, "content": content}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in message.tool_calls
        ]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    if message.name and message.role == "tool":
        out["name"] = message.name
    return out


def _options(request: ChatRequest) -> dict[str, Any]:
    """The caller's options as the chat completions API takes them (only those set)."""
    out: dict[str, Any] = {
        key: value
        for key, value in (
            ("temperature", request.temperature),
            ("top_p", request.top_p),
            ("seed", request.seed),
            ("stop", request.stop or None),
        )
        if value is not None
    }
    name = forced_tool(request.tool_choice)
    if request.tools and request.tool_choice is not None:
        out["tool_choice"] = (
            {"type": "function", "function": {"name": name}} if name else request.tool_choice
        )
    fmt = request.response_format
    if fmt is not None and fmt.type == "json_schema":
        spec: dict[str, Any] = {"name": fmt.name, "strict": fmt.strict}
        if fmt.json_schema is not None:
            spec["schema"] = fmt.json_schema
        if fmt.description:
            spec["description"] = fmt.description
        out["response_format"] = {"type": "json_schema", "json_schema": spec}
    elif fmt is not None:
        out["response_format"] = {"type": "json_object"}
    return out


class OpenAIChatModel:
    """One model on one OpenAI-compatible endpoint."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: Callable[[], str | None] | str | None = None,
        timeout: float = 25.0,
        client: httpx.Client | None = None,
        label: str = "openai",
        max_output_tokens: int | None = None,
        auth_header: str = "authorization",
    ) -> None:
        self._model = model
        self._url = completions_url(base_url)
        self._auth_header = auth_header
        self._api_key = api_key
        self._label = label
        self._max_tokens = max_output_tokens
        self._timeout = timeout
        self._client = client or httpx.Client(timeout=httpx.Timeout(timeout, connect=5.0))

    @property
    def name(self) -> str:
        return f"{self._label}:{self._model}"

    def _headers(self) -> dict[str, str]:
        key = self._api_key() if callable(self._api_key) else self._api_key
        return auth_headers(key, self._auth_header)

    def complete(self, request: ChatRequest) -> ChatResponse:
        payload: dict[str, Any] = {
            "model": self._model,
            "messages": [_wire_message(m) for m in request.messages],
        }
        if request.tools:
            payload["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
        max_tokens = request.max_output_tokens or self._max_tokens
        if max_tokens:  # unset by default: the server's own limit applies
            payload["max_tokens"] = max_tokens
        payload.update(_options(request))
        body = post_json(
            self._client,
            self._url,
            payload,
            self._headers(),
            self.name,
            overflow=is_overflow,
            timeout=call_timeout(request.timeout, self._timeout),
        )
        return self._parse(body)

    def _parse(self, body: dict[str, Any]) -> ChatResponse:
        try:
            choice = body["choices"][0]
            wire = choice["message"]
            calls = [
                ToolCall(
                    id=str(call.get("id") or f"call_{i}"),
                    name=call["function"]["name"],
                    arguments=call["function"].get("arguments") or "{}",
                )
                for i, call in enumerate(wire.get("tool_calls") or [])
            ]
            message = Message(role="assistant", content=wire.get("content") or "", tool_calls=calls)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise ModelOutputError(f"{self.name} returned a malformed completion") from exc
        usage = body.get("usage") or {}
        return ChatResponse(
            message=message,
            usage=Usage(
                input_tokens=int(usage.get("prompt_tokens") or 0),
                output_tokens=int(usage.get("completion_tokens") or 0),
            ),
            model=self.name,
            finish_reason=choice.get("finish_reason"),
        )
