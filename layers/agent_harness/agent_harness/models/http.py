"""JSON over HTTP for model providers: one place that maps transport and status errors
to ``ModelError`` subclasses. One retry on 5xx/529 and connection errors, never on
timeouts (a Lambda's clock is short)."""

from __future__ import annotations

from typing import Any

import httpx

from agent_harness.errors import (
    ContextOverflowError,
    ModelError,
    ModelOutputError,
    ModelRateLimitError,
    ModelTimeoutError,
)

__all__ = ["OVERFLOW_MARKERS", "post_json"]

#: how providers word "the prompt is too long" when they give no machine-readable code;
#: matched only here, at the adapter boundary, to raise the typed ContextOverflowError
OVERFLOW_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "prompt is too long",
    "input is too long",
    "too many tokens",
    "reduce the length",
)


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


def _is_overflow(response: httpx.Response, text: str) -> bool:
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict) and error.get("code") == "context_length_exceeded":
        return True  # OpenAI's typed code
    lowered = text.lower()
    return any(marker in lowered for marker in OVERFLOW_MARKERS)


def post_json(
    client: httpx.Client, url: str, payload: dict[str, Any], headers: dict[str, str], name: str
) -> dict[str, Any]:
    """POST ``payload``; return the JSON object answer or raise a ``ModelError``."""
    response: httpx.Response | None = None
    for attempt in range(2):
        try:
            response = client.post(url, json=payload, headers=headers)
        except httpx.TimeoutException as exc:
            raise ModelTimeoutError(f"{name} timed out") from exc
        except httpx.TransportError as exc:
            if attempt == 0:
                continue
            raise ModelError(f"{name} is unreachable: {type(exc).__name__}") from exc
        if response.status_code >= 500 and attempt == 0:
            continue
        break
    assert response is not None
    if response.status_code == 429:
        raise ModelRateLimitError(
            f"{name} rate-limited the call", retry_after=_retry_after(response)
        )
    if response.status_code >= 400:
        text = _error_text(response)
        if response.status_code in (400, 413) and _is_overflow(response, text):
            raise ContextOverflowError(f"{name}: the input is over the context window: {text}")
        raise ModelError(f"{name} answered {response.status_code}: {text}")
    try:
        body = response.json()
    except ValueError as exc:
        raise ModelOutputError(f"{name} returned a non-JSON body") from exc
    if not isinstance(body, dict):
        raise ModelOutputError(f"{name} returned an unexpected body")
    return body
