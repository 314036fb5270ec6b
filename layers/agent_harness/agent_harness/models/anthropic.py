"""Anthropic Messages API over httpx (``anthropic:<model>``).

``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL`` configure it; the ``httpx.Client`` is
injectable for tests. Errors are mapped by ``models.http.post_json``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx

from agent_harness.errors import ModelOutputError
from agent_harness.models.base import ChatRequest, ChatResponse, Message, ToolCall, Usage
from agent_harness.models.convert import alternating_turns, history_tools, sampling
from agent_harness.models.http import ErrorBody, call_timeout, post_json
from agent_harness.models.structured import answered, offer

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_harness.models.convert import Part

__all__ = ["AnthropicChatModel", "is_overflow"]

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096  # the Messages API requires a value


def is_overflow(error: ErrorBody) -> bool:
    """Anthropic types the error ``invalid_request_error`` and documents the message
    "prompt is too long: N tokens > M maximum"; ``request_too_large`` (413) is a request
    over the byte limit, which compaction also cures."""
    if error.type == "request_too_large":
        return True
    return error.type == "invalid_request_error" and error.says("prompt is too long")


def _block(part: Part) -> dict[str, Any]:
    if part.kind == "text":
        return {"type": "text", "text": part.text}
    if part.kind == "tool_use":
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": part.input}
    return {"type": "tool_result", "tool_use_id": part.id, "content": part.text}


class AnthropicChatModel:
    def __init__(
        self,
        model: str,
        *,
        api_key: Callable[[], str | None] | str | None,
        base_url: str = "https://api.anthropic.com",
        timeout: float = 25.0,
        max_output_tokens: int | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        self._model = model
        self._url = base_url.rstrip("/") + "/v1/messages"
        self._api_key = api_key
        self._max_tokens = max_output_tokens or DEFAULT_MAX_TOKENS
        self._timeout = timeout
        self._client = client or httpx.Client(timeout=httpx.Timeout(timeout, connect=5.0))

    @property
    def name(self) -> str:
        return f"anthropic:{self._model}"

    def complete(self, request: ChatRequest) -> ChatResponse:
        system, turns = alternating_turns(request.messages)
        payload: dict[str, Any] = {
            "model": self._model,
            "max_tokens": request.max_output_tokens or self._max_tokens,
            "messages": [{"role": t.role, "content": [_block(p) for p in t.parts]} for t in turns],
        }
        if system:
            payload["system"] = system
        payload.update(sampling(request, top_p="top_p", stop="stop_sequences"))
        plan = offer(request)  # response_format is emulated with a forced answer tool
        tools = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in plan.tools
        ]
        # a history with tool blocks is refused unless its tools are declared, also on a
        # call that offers none (the loop's last): those are declared, not to be called
        offered = {t.name for t in plan.tools}
        tools += [_not_offered(n) for n in history_tools(turns) if n not in offered]
        if tools:
            payload["tools"] = tools
            if not plan.tools:
                payload["tool_choice"] = {"type": "none"}
            elif plan.choice == "tool":
                payload["tool_choice"] = {"type": "tool", "name": plan.tool}
            elif plan.choice in ("auto", "any"):
                payload["tool_choice"] = {"type": plan.choice}
        headers = {"anthropic-version": API_VERSION}
        key = self._api_key() if callable(self._api_key) else self._api_key
        if key:
            headers["x-api-key"] = key
        body = post_json(
            self._client,
            self._url,
            payload,
            headers,
            self.name,
            overflow=is_overflow,
            timeout=call_timeout(request.timeout, self._timeout),
        )
        response = self._parse(body)
        return response.model_copy(update={"message": answered(response.message, plan.emulated)})

    def _parse(self, body: dict[str, Any]) -> ChatResponse:
        try:
            texts: list[str] = []
            calls: list[ToolCall] = []
            for block in body["content"]:
                if block["type"] == "text":
                    texts.append(block["text"])
                elif block["type"] == "tool_use":
                    calls.append(
                        ToolCall(
                            id=block["id"],
                            name=block["name"],
                            arguments=json.dumps(block.get("input") or {}),
                        )
                    )
            usage = body.get("usage") or {}
            return ChatResponse(
                message=Message(role="assistant", content="".join(texts), tool_calls=calls),
                usage=Usage(
                    input_tokens=int(usage.get("input_tokens") or 0),
                    output_tokens=int(usage.get("output_tokens") or 0),
                ),
                model=self.name,
                finish_reason=body.get("stop_reason"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelOutputError(f"{self.name} returned a malformed message") from exc


def _not_offered(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": "Called earlier in this conversation; not offered now.",
        "input_schema": {"type": "object"},
    }
