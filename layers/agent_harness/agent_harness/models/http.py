"""JSON over HTTP for model providers: one attempt, every failure typed.

    timeout                         -> ModelTimeoutError        (retried while time is left)
    connection error, 5xx, 529      -> ModelUnavailableError    (retried, Retry-After honoured)
    429                             -> ModelRateLimitError      (retried, Retry-After honoured)
    401, 403                        -> ModelAuthError           (never retried)
    the provider's overflow error   -> ContextOverflowError     (compaction, then one retry)
    any other 4xx                   -> ModelBadRequestError     (never retried)
    a body that is not a JSON object -> ModelOutputError

Retries, backoff and the function's deadline live in ``models.resilience``; this module
makes exactly one request. Each provider passes its own overflow test, which reads the
error's code and type first and its message only where the provider documents no code.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

import httpx

from agent_harness.errors import (
    ContextOverflowError,
    ModelAuthError,
    ModelBadRequestError,
    ModelOutputError,
    ModelRateLimitError,
    ModelTimeoutError,
    ModelUnavailableError,
)

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["OVERFLOW_PHRASES", "ErrorBody", "call_timeout", "error_body", "post_json"]

#: how OpenAI-compatible servers without a code (vLLM, llama.cpp, Ollama, gateways) and
#: Bedrock word "the prompt is too long": the documented fallback, never the first test
OVERFLOW_PHRASES = (
    "maximum context length",
    "context length",
    "context window",
    "prompt is too long",
    "input is too long",
    "too many input tokens",
    "too many tokens",
    "reduce the length",
)


class ErrorBody:
    """The parts of a provider's error answer the classifiers read."""

    def __init__(self, status: int, code: str, type_: str, message: str) -> None:
        self.status = status
        self.code = code
        self.type = type_
        self.message = message

    def says(self, *phrases: str) -> bool:
        lowered = self.message.lower()
        return any(phrase in lowered for phrase in phrases)


def error_body(response: httpx.Response) -> ErrorBody:
    try:
        body = response.json()
    except ValueError:
        return ErrorBody(response.status_code, "", "", response.text[:300])
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return ErrorBody(
            response.status_code,
            str(error.get("code") or ""),
            str(error.get("type") or ""),
            str(error.get("message") or error)[:300],
        )
    message = body.get("message") if isinstance(body, dict) else None
    return ErrorBody(response.status_code, "", "", str(message or error or body)[:300])


def _retry_after(response: httpx.Response) -> int | None:
    """``Retry-After`` in seconds (RFC 9110: a number of seconds or an HTTP date)."""
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        return max(0, math.ceil(float(value)))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0, math.ceil((when - datetime.now(UTC)).total_seconds()))


def call_timeout(seconds: float | None, default: float) -> httpx.Timeout:
    total = default if seconds is None else max(0.1, min(seconds, default))
    return httpx.Timeout(total, connect=min(5.0, total))


def post_json(
    client: httpx.Client,
    url: str,
    payload: dict[str, Any],
    headers: dict[str, str],
    name: str,
    *,
    overflow: Callable[[ErrorBody], bool],
    timeout: httpx.Timeout | None = None,
) -> dict[str, Any]:
    """POST ``payload`` once; return the JSON object answer or raise a typed ``ModelError``."""
    try:
        if timeout is None:
            response = client.post(url, json=payload, headers=headers)
        else:
            response = client.post(url, json=payload, headers=headers, timeout=timeout)
    except httpx.TimeoutException as exc:
        raise ModelTimeoutError(f"{name} did not answer in time") from exc
    except httpx.TransportError as exc:
        raise ModelUnavailableError(f"{name} is unreachable: {type(exc).__name__}") from exc
    status = response.status_code
    if status == 429:
        raise ModelRateLimitError(
            f"{name} rate-limited the call", retry_after=_retry_after(response)
        )
    if status >= 500:
        error = error_body(response)
        raise ModelUnavailableError(
            f"{name} answered {status}: {error.message}", retry_after=_retry_after(response)
        )
    if status >= 400:
        error = error_body(response)
        if status in (401, 403):
            raise ModelAuthError(f"{name} refused the credentials ({status}): {error.message}")
        if overflow(error):
            raise ContextOverflowError(
                f"{name}: the input is over the context window: {error.message}"
            )
        raise ModelBadRequestError(f"{name} answered {status}: {error.message}")
    try:
        body = response.json()
    except ValueError as exc:
        raise ModelOutputError(f"{name} returned a non-JSON body") from exc
    if not isinstance(body, dict):
        raise ModelOutputError(f"{name} returned an unexpected body")
    return body
