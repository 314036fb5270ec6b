"""OpenAI-compatible chat completions over httpx.

Works with OpenAI and with any server that speaks ``POST {base_url}/chat/completions``:
Ollama (``ollama:<model>``, default base ``http://127.0.0.1:11434/v1``), vLLM,
llama.cpp's server, LiteLLM. The ``httpx.Client`` is injectable, so tests use
``httpx.MockTransport``. HTTP and transport failures become ``ModelError`` subclasses;
one retry on 5xx and connection errors, never on timeouts (the Lambda clock is short).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx

from agent_harness.errors import (
    ModelError,
    ModelOutputError,
    ModelRateLimitError,
    ModelTimeoutError,
)
from agent_harness.models.base import ChatRequest, ChatResponse, Message, ToolCall, Usage

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["OpenAIChatModel"]


def _wire_message(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
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


def _retry_after(response: httpx.Response) -> int | None:
    value = response.headers.get("retry-after", "")
    try:
        return max(1, int(float(value)))
    except ValueError:
        return None


def _error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("message", error))[:300]
    return str(error or body)[:300]


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
    ) -> None:
        self._model = model
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._api_key = api_key
        self._label = label
        self._client = client or httpx.Client(timeout=httpx.Timeout(timeout, connect=5.0))

    @property
    def name(self) -> str:
        return f"{self._label}:{self._model}"

    def _headers(self) -> dict[str, str]:
        key = self._api_key() if callable(self._api_key) else self._api_key
        return {"Authorization": f"Bearer {key}"} if key else {}

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
        if request.max_output_tokens:
            payload["max_tokens"] = request.max_output_tokens
        return self._parse(self._post(payload))

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        response: httpx.Response | None = None
        for attempt in range(2):
            try:
                response = self._client.post(self._url, json=payload, headers=self._headers())
            except httpx.TimeoutException as exc:
                raise ModelTimeoutError(f"{self.name} timed out") from exc
            except httpx.TransportError as exc:
                if attempt == 0:
                    continue
                raise ModelError(f"{self.name} is unreachable: {type(exc).__name__}") from exc
            if response.status_code >= 500 and attempt == 0:
                continue
            break
        assert response is not None
        if response.status_code == 429:
            raise ModelRateLimitError(
                f"{self.name} rate-limited the call", retry_after=_retry_after(response)
            )
        if response.status_code >= 400:
            raise ModelError(
                f"{self.name} answered {response.status_code}: {_error_text(response)}"
            )
        try:
            body = response.json()
        except ValueError as exc:
            raise ModelOutputError(f"{self.name} returned a non-JSON body") from exc
        if not isinstance(body, dict):
            raise ModelOutputError(f"{self.name} returned an unexpected body")
        return body

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
