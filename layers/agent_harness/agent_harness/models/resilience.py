"""Every model call goes through here: deadline, retries, usage, metrics, logs.

    attempt budget = min(HARNESS_MODEL_TIMEOUT_SECONDS, function time left - margin)
    no budget left                      -> ModelTimeoutError (504), nothing sent
    ModelRateLimitError / ModelUnavailableError / ModelTimeoutError
                                        -> wait Retry-After, or full-jitter exponential
                                           backoff, and try again while attempts and
                                           time remain; otherwise re-raise
    every other ModelError              -> raised at once (auth, bad request, overflow,
                                           malformed output)

The function's deadline comes from the Lambda context (``Deadline.start`` in each
handler), so a slow provider ends in a clean 504 with the session lease released, never
in a function killed mid-turn. Usage is the provider's own count; when a provider gives
none, the tokens are estimated with the shipped tokenizer and the call is marked so.
Metrics count calls, tokens (by role), retries, overflows and failures; the log line of
a call has role, model, tokens, attempts and latency, never message content.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.errors import (
    ContextOverflowError,
    ModelError,
    ModelRateLimitError,
    ModelTimeoutError,
    ModelUnavailableError,
)
from agent_harness.utf8 import scrubbed

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_harness.models.base import ChatModel, ChatRequest, ChatResponse
    from agent_harness.tokens import TokenCounter

__all__ = ["Deadline", "ResilientModel", "RetryPolicy"]

logger = Logger(child=True)
metrics = Metrics()

_RETRYABLE = (ModelRateLimitError, ModelUnavailableError, ModelTimeoutError)


class Deadline:
    """When the current invocation must have finished its model work (monotonic time).
    Handlers call ``start`` with the Lambda context; ``None`` means no deadline."""

    def __init__(self, margin_seconds: float = 3.0, clock: Callable[[], float] = time.monotonic):
        self.margin = margin_seconds
        self._clock = clock
        self._at: float | None = None

    def start(self, context: Any) -> None:
        """From a Lambda context (``get_remaining_time_in_millis``); tolerant of fakes."""
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        self.start_ms(int(remaining()) if callable(remaining) else None)

    def start_ms(self, remaining_ms: int | None) -> None:
        self._at = None if remaining_ms is None else self._clock() + remaining_ms / 1000

    def remaining(self) -> float | None:
        """Seconds left for model work (after the margin), or None without a deadline."""
        if self._at is None:
            return None
        return self._at - self.margin - self._clock()


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3
    base_seconds: float = 0.5
    cap_seconds: float = 8.0
    #: an attempt with less time than this is not started
    min_attempt_seconds: float = 1.0

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Full jitter: uniform in [0, min(cap, base * 2^(attempt-1))]."""
        return rng.uniform(0, min(self.cap_seconds, self.base_seconds * 2 ** (attempt - 1)))


class ResilientModel:
    """Wraps one provider model for one role."""

    def __init__(
        self,
        inner: ChatModel,
        *,
        role: str,
        timeout: float,
        deadline: Deadline | None = None,
        policy: RetryPolicy | None = None,
        counter: TokenCounter | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.inner = inner
        self.role = role
        self._timeout = timeout
        self._deadline = deadline
        self._policy = policy or RetryPolicy()
        self._counter = counter
        self._sleep = sleep
        self._clock = clock
        self._rng = rng or random.Random()

    @property
    def name(self) -> str:
        return self.inner.name

    def _budget(self) -> float:
        remaining = self._deadline.remaining() if self._deadline else None
        return self._timeout if remaining is None else min(self._timeout, remaining)

    def complete(self, request: ChatRequest) -> ChatResponse:
        policy = self._policy
        started = self._clock()
        for attempt in range(1, policy.max_attempts + 1):
            budget = self._budget()
            if budget < policy.min_attempt_seconds:
                metrics.add_metric("ModelDeadlineExceeded", MetricUnit.Count, 1)
                raise ModelTimeoutError(
                    f"{self.name}: no time left before the function's deadline "
                    f"({attempt - 1} attempts made)"
                )
            try:
                response = self.inner.complete(request.model_copy(update={"timeout": budget}))
            except _RETRYABLE as exc:
                delay = self._delay(exc, attempt)
                if attempt == policy.max_attempts or delay is None:
                    self._failed(exc, attempt, started)
                    raise
                metrics.add_metric("ModelRetries", MetricUnit.Count, 1)
                self._log(
                    logger.warning,
                    "model call failed; retrying",
                    attempt=attempt,
                    error=type(exc).__name__,
                    retry_in_s=round(delay, 2),
                )
                self._sleep(delay)
                continue
            except ModelError as exc:
                self._failed(exc, attempt, started)
                raise
            return self._succeeded(request, response, attempt, started)
        raise AssertionError("unreachable")  # pragma: no cover

    def _delay(self, exc: ModelError, attempt: int) -> float | None:
        """How long to wait before the next attempt, or None when it would not fit."""
        after = getattr(exc, "retry_after", None)
        delay = float(after) if after is not None else self._policy.backoff(attempt, self._rng)
        remaining = self._deadline.remaining() if self._deadline else None
        if remaining is not None and delay + self._policy.min_attempt_seconds > remaining:
            return None
        if after is not None and after > self._policy.cap_seconds * 4:
            return None  # the provider asks for longer than a request can wait
        return delay

    def _failed(self, exc: ModelError, attempts: int, started: float) -> None:
        name = "ContextOverflows" if isinstance(exc, ContextOverflowError) else "ModelFailures"
        metrics.add_metric(name, MetricUnit.Count, 1)
        self._log(
            logger.warning,
            "model call failed",
            attempts=attempts,
            error=type(exc).__name__,
            ms=round((self._clock() - started) * 1000),
        )

    def _log(self, emit: Callable[..., None], message: str, **fields: Any) -> None:
        """One log line of a call: role and model always, message content never."""
        emit(message, extra={"role": self.role, "model": self.name, **fields})

    def _succeeded(
        self, request: ChatRequest, response: ChatResponse, attempts: int, started: float
    ) -> ChatResponse:
        response = _storable(response)
        usage = response.usage
        estimated = False
        if not usage.input_tokens and not usage.output_tokens and self._counter is not None:
            from agent_harness.models.base import Usage

            usage = Usage(
                input_tokens=sum(self._counter.count(m.content) for m in request.messages),
                output_tokens=self._counter.count(response.message.content),
            )
            response = response.model_copy(update={"usage": usage})
            estimated = True
        prefix = self.role.capitalize()  # AgentInputTokens, MemoryOutputTokens, ...
        metrics.add_metric(f"{prefix}ModelCalls", MetricUnit.Count, 1)
        metrics.add_metric(f"{prefix}InputTokens", MetricUnit.Count, usage.input_tokens)
        metrics.add_metric(f"{prefix}OutputTokens", MetricUnit.Count, usage.output_tokens)
        self._log(
            logger.info,
            "model call",
            purpose=request.purpose,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            usage_estimated=estimated,
            attempts=attempts,
            ms=round((self._clock() - started) * 1000),
            finish_reason=response.finish_reason,
            tool_calls=len(response.message.tool_calls),
        )
        return response


def _storable(response: ChatResponse) -> ChatResponse:
    """A provider's answer as the turn can store it: a lone surrogate (a JSON escape
    some servers send) would fail the turn's writes after the call was paid for."""
    message = response.message
    calls = [c.model_copy(update={"arguments": scrubbed(c.arguments)}) for c in message.tool_calls]
    clean = message.model_copy(update={"content": scrubbed(message.content), "tool_calls": calls})
    return response if clean == message else response.model_copy(update={"message": clean})
