"""Errors of the API as exceptions: one class per status, each with the API's error code.

The API's own routes answer ``{"error": {"code", "message", "details"?}}``; the
OpenAI-shaped ones (chat completions, responses, conversations) answer OpenAI's error
object, ``{"error": {"message", "type", "code", "param"}}``. Both are read alike:
``.status``, ``.code``, ``.message``, ``.details`` (and ``.type`` for OpenAI's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

__all__ = [
    "APIConnectionError",
    "AgentHarnessError",
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "InternalServerError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "PreconditionFailedError",
    "PreconditionRequiredError",
    "RateLimitError",
    "UnprocessableEntityError",
    "error_from_response",
]


class AgentHarnessError(Exception):
    """An answer of the API that is an error, or no answer at all (``APIConnectionError``).

    ``status``: the HTTP status (None: no answer); ``code``: the API's error code
    (``session_busy``, ``fact_not_found``, ``budget_exhausted``, ...); ``message``: what
    went wrong, in words; ``details``: what the API adds (the pending tool calls of a
    ``tool_results_required``, a held correction's review item, ...); ``retry_after``:
    the seconds the API asked to wait, if it did; ``response``: the HTTP answer."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        details: Any = None,
        type: str | None = None,
        retry_after: float | None = None,
        response: httpx.Response | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}" if status else message)
        self.message = message
        self.status = status
        self.code = code
        self.details = details
        self.type = type
        self.retry_after = retry_after
        self.response = response


class APIConnectionError(AgentHarnessError):
    """No answer: the API could not be reached, or did not answer in time."""


class BadRequestError(AgentHarnessError):
    """400: bad input, nothing written."""


class AuthenticationError(AgentHarnessError):
    """401: no identity (no token, or no ``X-User-Id`` in dev mode)."""


class PermissionDeniedError(AgentHarnessError):
    """403: not allowed (an operator's route, a scope you are no member of, a correction
    of a fact that ranks above you: ``authority_too_low``)."""


class NotFoundError(AgentHarnessError):
    """404: no such session turn, fact (``fact_not_found``), conversation, ..."""


class ConflictError(AgentHarnessError):
    """409: ``session_busy`` (retried), ``fact_not_current``, ``review_item_decided``,
    ``tool_results_required``, ... (not retried: the API says ``x-should-retry: false``)."""


class PreconditionFailedError(AgentHarnessError):
    """412: the ETag sent is stale (MEMORY.md changed since you read it)."""


class PayloadTooLargeError(AgentHarnessError):
    """413: ``payload_too_large``, or ``memory_full`` (with ``details: {"size", "limit"}``)."""


class UnprocessableEntityError(AgentHarnessError):
    """422: the body or a parameter failed validation (``details`` says where), or
    ``correction_held``."""


class PreconditionRequiredError(AgentHarnessError):
    """428: a write of MEMORY.md needs ``etag`` (If-Match) or ``create`` (If-None-Match)."""


class RateLimitError(AgentHarnessError):
    """429: ``budget_exhausted`` (the day's budget; ``retry_after`` until it renews) or
    ``model_rate_limited``."""


class InternalServerError(AgentHarnessError):
    """5xx: the model provider failed (502, 504), storage is unavailable (503), or a bug."""


_BY_STATUS: dict[int, type[AgentHarnessError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    412: PreconditionFailedError,
    413: PayloadTooLargeError,
    422: UnprocessableEntityError,
    428: PreconditionRequiredError,
    429: RateLimitError,
}


def error_from_response(response: httpx.Response, retry_after: float | None) -> AgentHarnessError:
    """The exception of an error answer (any shape: a body that is no JSON error too)."""
    status = response.status_code
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        message = str(error.get("message") or response.reason_phrase)
        code = error.get("code")
        details, kind = error.get("details"), error.get("type")
    else:
        message = response.text[:500] or response.reason_phrase
        code, details, kind = None, None, None
    cls = _BY_STATUS.get(status, InternalServerError if status >= 500 else AgentHarnessError)
    return cls(
        message,
        status=status,
        code=None if code is None else str(code),
        details=details,
        type=None if kind is None else str(kind),
        retry_after=retry_after,
        response=response,
    )
