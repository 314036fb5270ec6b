"""One exception tree for the package.

    HarnessError                      500 internal
    ├── ConfigError                   500 configuration is invalid (raised at cold start)
    ├── InvalidRequestError           400 bad input; nothing was written
    │   ├── ValidationFailedError     422 body or parameter failed validation
    │   └── PayloadTooLargeError      413
    │       └── MemoryFullError       413 MEMORY.md would be over its cap (memory_full)
    ├── UnauthorizedError             401 no identity
    ├── ForbiddenError                403 an operator's route, and the caller is no operator
    ├── NotFoundError                 404
    │   └── SessionNotFoundError      404 the session has never been written
    ├── ConflictError                 409
    │   ├── SessionBusyError          409 another call holds the session lease (Retry-After)
    │   ├── ConversationDivergedError 409 a chat's history left its session (route-internal)
    │   └── ToolCallsStateError       409 the session's turn awaits client tool results, or
    │                                     awaits none (tool_results_required, ...)
    ├── BudgetExhaustedError          429 the user's daily budget is spent (Retry-After)
    ├── PreconditionFailedError       412 stale ETag / object exists
    ├── PreconditionRequiredError     428 a conditional header is required
    ├── StoreError                    503 an AWS call failed (retryable)
    └── ModelError                    502 the model provider failed
        ├── ModelTimeoutError         504 no answer in time (the call's or the function's deadline)
        ├── ModelRateLimitError       429 (Retry-After when the provider gave one)
        ├── ModelUnavailableError     502 5xx, overloaded, or unreachable
        ├── ModelAuthError            502 the provider refused our credentials (not retried)
        ├── ModelBadRequestError      502 the provider refused the request (not retried)
        ├── ContextOverflowError      502 the input is over the model's window
        └── ModelOutputError          502 the answer was empty or malformed

Each class carries the HTTP status and error code the API maps it to, and a
``retryable`` flag: whether the same call may succeed later (the MCP server tells its
client "try again" by it). Queue handlers do not sort by it: a job that raises is
redelivered until the queue's maxReceiveCount moves it to the dead-letter queue, and
every job step is idempotent, so a retry is always safe.
Adapters wrap third-party exceptions at the boundary (``raise StoreError(...) from exc``);
nothing classifies errors by message text.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BudgetExhaustedError",
    "ConfigError",
    "ConflictError",
    "ContextOverflowError",
    "ConversationDivergedError",
    "ForbiddenError",
    "HarnessError",
    "InvalidRequestError",
    "MemoryFullError",
    "ModelAuthError",
    "ModelBadRequestError",
    "ModelError",
    "ModelOutputError",
    "ModelRateLimitError",
    "ModelTimeoutError",
    "ModelUnavailableError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PreconditionFailedError",
    "PreconditionRequiredError",
    "SessionBusyError",
    "SessionNotFoundError",
    "StoreError",
    "ToolCallsStateError",
    "UnauthorizedError",
    "ValidationFailedError",
]


class HarnessError(Exception):
    """Base of every error this package raises on purpose."""

    status: int = 500
    code: str = "internal_error"
    retryable: bool = False

    def __init__(self, message: str, *, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def headers(self) -> dict[str, str]:
        """Extra HTTP headers for the error response."""
        return {}

    def response_headers(self) -> dict[str, str]:
        """``headers()`` and, on a 4xx, whether a retry can help (``x-should-retry``,
        which the OpenAI and Anthropic SDKs obey: they retry every 409 and 429 unless
        told; a 5xx is theirs to retry)."""
        extra = self.headers()
        if self.status < 500:
            extra["x-should-retry"] = "true" if self.retryable else "false"
        return extra

    def to_body(self) -> dict[str, Any]:
        """The JSON error body of the HTTP API: ``{"error": {"code", "message"}}``."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details is not None:
            error["details"] = self.details
        return {"error": error}


class ConfigError(HarnessError):
    code = "config_error"


class InvalidRequestError(HarnessError):
    status = 400
    code = "invalid_request"


class ValidationFailedError(InvalidRequestError):
    status = 422
    code = "validation_error"


class PayloadTooLargeError(InvalidRequestError):
    status = 413
    code = "payload_too_large"


class MemoryFullError(PayloadTooLargeError):
    """A write would make MEMORY.md longer than ``HARNESS_MAX_MEMORY_CHARS``: nothing was
    written. Consolidation shrinks it (``POST /v1/memory/consolidate``), as an edit can."""

    code = "memory_full"

    def __init__(self, size: int, limit: int, what: str = "MEMORY.md") -> None:
        super().__init__(
            f"{what} would be {size:,} characters; MEMORY.md is limited to {limit:,}. "
            "Nothing was written: consolidation (POST /v1/memory/consolidate) or an edit "
            "shrinks it",
            details={"size": size, "limit": limit},
        )


class UnauthorizedError(HarnessError):
    status = 401
    code = "unauthorized"


class ForbiddenError(HarnessError):
    status = 403
    code = "forbidden"


class NotFoundError(HarnessError):
    status = 404
    code = "not_found"


class SessionNotFoundError(NotFoundError):
    """A request that needs an existing session named one that was never written."""


class ConflictError(HarnessError):
    status = 409
    code = "conflict"


class SessionBusyError(ConflictError):
    """``retry_after``: whole seconds until a retry may succeed; ``retry_after_ms`` the
    same, finer (the OpenAI SDKs read ``retry-after-ms`` first)."""

    code = "session_busy"
    retryable = True

    def __init__(
        self, message: str, *, retry_after: int, retry_after_ms: int | None = None
    ) -> None:
        super().__init__(message, details={"retry_after": retry_after})
        self.retry_after = retry_after
        self.retry_after_ms = retry_after_ms if retry_after_ms is not None else retry_after * 1000

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after), "retry-after-ms": str(self.retry_after_ms)}


class ToolCallsStateError(ConflictError):
    """The request does not fit the session's tool-call state: a message while a turn
    awaits client tool results (``tool_results_required``), results already taken
    (``tool_results_already_taken``), or results when no turn awaits any
    (``no_pending_tool_calls``). ``details`` carry the pending calls, if any."""

    def __init__(self, code: str, message: str, *, details: Any = None) -> None:
        super().__init__(message, details=details)
        self.code = code


class ConversationDivergedError(ConflictError):
    """A chat completion's conversation continues from a point its session has moved past
    (an edited or regenerated message, another branch): the route starts a new session
    for it instead of appending to the wrong history."""

    code = "conversation_diverged"


class BudgetExhaustedError(HarnessError):
    """The user's budget for the day is spent (or held by their running turns)."""

    status = 429
    code = "budget_exhausted"

    def __init__(self, message: str, *, retry_after: int, retryable: bool = False) -> None:
        super().__init__(message, details={"retry_after": retry_after})
        self.retry_after = retry_after
        # spent until midnight: final for the day; held by running turns: seconds away
        self.retryable = retryable

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


class PreconditionFailedError(HarnessError):
    status = 412
    code = "precondition_failed"


class PreconditionRequiredError(HarnessError):
    status = 428
    code = "precondition_required"


class StoreError(HarnessError):
    status = 503
    code = "store_unavailable"
    retryable = True


class ModelError(HarnessError):
    status = 502
    code = "model_error"
    retryable = True


class ModelTimeoutError(ModelError):
    status = 504
    code = "model_timeout"


class ModelRateLimitError(ModelError):
    status = 429
    code = "model_rate_limited"

    def __init__(self, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)} if self.retry_after else {}


class ModelUnavailableError(ModelError):
    """A 5xx, an overloaded provider or a connection failure: worth another attempt."""

    code = "model_unavailable"

    def __init__(self, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ModelAuthError(ModelError):
    """401/403: the key is missing, wrong or lacks access. Retrying cannot help."""

    code = "model_auth_failed"
    retryable = False


class ModelBadRequestError(ModelError):
    """Another 4xx: the provider refused this request as it is. Retrying cannot help."""

    code = "model_bad_request"
    retryable = False


class ModelOutputError(ModelError):
    code = "model_output_invalid"


class ContextOverflowError(ModelError):
    """The provider refused the input as longer than the model's context window. The
    agent call answers it with one forced compaction and one retry."""

    code = "context_overflow"
    retryable = False
