"""Amazon Bedrock through the Converse API (``bedrock:<model id or inference profile>``).

Uses the function's own AWS credentials (no key to configure). The boto3
``bedrock-runtime`` client is injectable; tests use botocore's Stubber. Errors are typed
by their Converse error code; only ``ValidationException`` needs its message, which is
how Bedrock documents an input over the model's window. botocore's own retries are off
(``models.resilience`` retries), and an attempt that outlives its share of the
function's time is abandoned with ``ModelTimeoutError``.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    ReadTimeoutError,
)

from agent_harness.errors import (
    ContextOverflowError,
    ModelAuthError,
    ModelBadRequestError,
    ModelError,
    ModelOutputError,
    ModelRateLimitError,
    ModelTimeoutError,
    ModelUnavailableError,
)
from agent_harness.models.base import ChatRequest, ChatResponse, Message, ToolCall, Usage
from agent_harness.models.convert import alternating_turns, history_tools, sampling
from agent_harness.models.http import OVERFLOW_PHRASES
from agent_harness.models.structured import answered, offer

if TYPE_CHECKING:
    from agent_harness.models.convert import Part

__all__ = ["BedrockChatModel", "typed_error"]

_RATE_LIMITED = {"ThrottlingException", "ServiceQuotaExceededException", "TooManyRequestsException"}
_TIMED_OUT = {"ModelTimeoutException"}
_UNAVAILABLE = {
    "ServiceUnavailableException",
    "InternalServerException",
    "ModelNotReadyException",
    "ModelErrorException",
}
_AUTH = {
    "AccessDeniedException",
    "UnrecognizedClientException",
    "ExpiredTokenException",
    "InvalidSignatureException",
}


def typed_error(name: str, exc: ClientError) -> ModelError:
    """The ModelError for a Converse ClientError (by code; overflow by its message)."""
    code = exc.response.get("Error", {}).get("Code", "")
    message = str(exc.response.get("Error", {}).get("Message", ""))[:300]
    if code in _RATE_LIMITED:
        return ModelRateLimitError(f"{name} rate-limited the call ({code})")
    if code in _TIMED_OUT:
        return ModelTimeoutError(f"{name} timed out ({code})")
    if code in _UNAVAILABLE:
        return ModelUnavailableError(f"{name} is unavailable: {code}: {message}")
    if code in _AUTH:
        return ModelAuthError(f"{name} refused the function's credentials: {code}: {message}")
    if code == "ValidationException" and any(p in message.lower() for p in OVERFLOW_PHRASES):
        return ContextOverflowError(f"{name}: the input is over the context window: {message}")
    return ModelBadRequestError(f"{name} refused the request: {code}: {message}")


def _block(part: Part) -> dict[str, Any]:
    if part.kind == "text":
        return {"text": part.text}
    if part.kind == "tool_use":
        return {"toolUse": {"toolUseId": part.id, "name": part.name, "input": part.input}}
    return {"toolResult": {"toolUseId": part.id, "content": [{"text": part.text}]}}


def _inference(request: ChatRequest, max_tokens: int | None) -> dict[str, Any]:
    """Converse's inferenceConfig."""
    out = sampling(request, top_p="topP", stop="stopSequences")
    return {"maxTokens": max_tokens, **out} if max_tokens else out


class BedrockChatModel:
    def __init__(
        self,
        model: str,
        *,
        client: Any,
        max_output_tokens: int | None = None,
        timeout: float = 25.0,
    ) -> None:
        self._model = model
        self._client = client
        self._max_tokens = max_output_tokens
        self._timeout = timeout
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="bedrock")

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
        inference = _inference(request, request.max_output_tokens or self._max_tokens)
        if inference:
            kwargs["inferenceConfig"] = inference
        plan = offer(request)  # response_format is emulated with a forced answer tool
        offered = [(t.name, t.description, t.parameters) for t in plan.tools]
        # Converse refuses a history with tool blocks whose tools are not declared, and
        # has no "none" choice: those are declared; a call of one on the loop's last call
        # is not run (its text is the answer)
        unused = "Called earlier in this conversation; not offered now."
        names = {name for name, _, _ in offered}
        offered += [(n, unused, {"type": "object"}) for n in history_tools(turns) if n not in names]
        if offered:
            kwargs["toolConfig"] = {
                "tools": [
                    {"toolSpec": {"name": n, "description": d, "inputSchema": {"json": schema}}}
                    for n, d, schema in offered
                ]
            }
            # a named tool is for Claude and Nova models only (the Converse reference):
            # the answer tool is forced with "any", which more models take
            if plan.tools and plan.choice == "tool" and not plan.emulated:
                kwargs["toolConfig"]["toolChoice"] = {"tool": {"name": plan.tool}}
            elif plan.tools and plan.choice in ("auto", "any", "tool"):
                kwargs["toolConfig"]["toolChoice"] = {"any" if plan.emulated else plan.choice: {}}
        limit = self._timeout if request.timeout is None else min(request.timeout, self._timeout)
        future = self._pool.submit(self._client.converse, **kwargs)
        try:
            response = future.result(timeout=max(0.1, limit))
        except FutureTimeout as exc:
            future.cancel()  # a call in flight runs out on its own read timeout
            raise ModelTimeoutError(f"{self.name} did not answer in time") from exc
        except (ReadTimeoutError, ConnectTimeoutError) as exc:
            raise ModelTimeoutError(f"{self.name} did not answer in time") from exc
        except ClientError as exc:
            raise typed_error(self.name, exc) from exc
        except BotoCoreError as exc:
            raise ModelUnavailableError(
                f"{self.name} is unreachable: {type(exc).__name__}"
            ) from exc
        parsed = self._parse(response)
        return parsed.model_copy(update={"message": answered(parsed.message, plan.emulated)})

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
