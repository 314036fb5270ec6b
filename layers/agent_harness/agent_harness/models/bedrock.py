"""Amazon Bedrock through the Converse API (``bedrock:<model id or inference profile>``).

Uses the function's own AWS credentials (no key to configure). The boto3
``bedrock-runtime`` client is injectable; tests use botocore's Stubber.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError, ReadTimeoutError

from agent_harness.errors import (
    ContextOverflowError,
    ModelError,
    ModelOutputError,
    ModelRateLimitError,
    ModelTimeoutError,
)
from agent_harness.models.base import ChatRequest, ChatResponse, Message, ToolCall, Usage
from agent_harness.models.convert import alternating_turns
from agent_harness.models.http import OVERFLOW_MARKERS

if TYPE_CHECKING:
    from agent_harness.models.convert import Part

__all__ = ["BedrockChatModel"]

_RATE_LIMITED = {"ThrottlingException", "ServiceQuotaExceededException", "TooManyRequestsException"}
_TIMED_OUT = {"ModelTimeoutException"}


def _block(part: Part) -> dict[str, Any]:
    if part.kind == "text":
        return {"text": part.text}
    if part.kind == "tool_use":
        return {"toolUse": {"toolUseId": part.id, "name": part.name, "input": part.input}}
    return {"toolResult": {"toolUseId": part.id, "content": [{"text": part.text}]}}


class BedrockChatModel:
    def __init__(self, model: str, *, client: Any, max_output_tokens: int | None = None) -> None:
        self._model = model
        self._client = client
        self._max_tokens = max_output_tokens

    @property
    def name(self) -> str:
        return f"bedrock:{self._model}"

    def complete(self, request: ChatRequest) -> ChatResponse:
        system, turns = alternating_turns(request.messages)
        kwargs: dict[str, Any] = {
            "modelId": self._model,
            "messages": [{"role": t.role, "content": [_block(p) for p in t.parts]} for t in turns],
        }
        if system:
            kwargs["system"] = [{"text": system}]
        max_tokens = request.max_output_tokens or self._max_tokens
        if max_tokens:
            kwargs["inferenceConfig"] = {"maxTokens": max_tokens}
        if request.tools:
            kwargs["toolConfig"] = {
                "tools": [
                    {
                        "toolSpec": {
                            "name": t.name,
                            "description": t.description,
                            "inputSchema": {"json": t.parameters},
                        }
                    }
                    for t in request.tools
                ]
            }
        try:
            response = self._client.converse(**kwargs)
        except ReadTimeoutError as exc:
            raise ModelTimeoutError(f"{self.name} timed out") from exc
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            message = exc.response.get("Error", {}).get("Message", "")
            if code in _RATE_LIMITED:
                raise ModelRateLimitError(f"{self.name} rate-limited the call") from exc
            if code in _TIMED_OUT:
                raise ModelTimeoutError(f"{self.name} timed out") from exc
            if code == "ValidationException" and any(
                m in message.lower() for m in OVERFLOW_MARKERS
            ):
                raise ContextOverflowError(
                    f"{self.name}: the input is over the context window"
                ) from exc
            raise ModelError(f"{self.name} failed: {code}: {message[:300]}") from exc
        except BotoCoreError as exc:
            raise ModelError(f"{self.name} is unreachable: {type(exc).__name__}") from exc
        return self._parse(response)

    def _parse(self, response: dict[str, Any]) -> ChatResponse:
        try:
            texts: list[str] = []
            calls: list[ToolCall] = []
            for block in response["output"]["message"]["content"]:
                if "text" in block:
                    texts.append(block["text"])
                elif "toolUse" in block:
                    use = block["toolUse"]
                    calls.append(
                        ToolCall(
                            id=use["toolUseId"],
                            name=use["name"],
                            arguments=json.dumps(use.get("input") or {}),
                        )
                    )
            usage = response.get("usage") or {}
            return ChatResponse(
                message=Message(role="assistant", content="".join(texts), tool_calls=calls),
                usage=Usage(
                    input_tokens=int(usage.get("inputTokens") or 0),
                    output_tokens=int(usage.get("outputTokens") or 0),
                ),
                model=self.name,
                finish_reason=response.get("stopReason"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelOutputError(f"{self.name} returned a malformed message") from exc
