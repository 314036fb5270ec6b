"""Retries, backoff and the function's deadline around every model call."""

from __future__ import annotations

import logging
import random

import pytest

from agent_harness.errors import (
    ContextOverflowError,
    ModelAuthError,
    ModelBadRequestError,
    ModelRateLimitError,
    ModelTimeoutError,
    ModelUnavailableError,
)
from agent_harness.models.base import ChatRequest, Message
from agent_harness.models.resilience import Deadline, ResilientModel, RetryPolicy
from agent_harness.tokens import TokenCounter
from tests.fakes import ScriptedModel

REQUEST = ChatRequest(messages=[Message(role="user", content="my secret plan is tea")])


class FakeTime:
    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def wrapped(*steps, remaining: float | None = None, attempts: int = 3, timeout: float = 25.0):
    time = FakeTime()
    deadline = None
    if remaining is not None:
        deadline = Deadline(margin_seconds=0, clock=time.clock)
        deadline.start_ms(int(remaining * 1000))
    inner = ScriptedModel(*steps)
    model = ResilientModel(
        inner,
        role="agent",
        timeout=timeout,
        deadline=deadline,
        policy=RetryPolicy(max_attempts=attempts),
        sleep=time.sleep,
        clock=time.clock,
        rng=random.Random(1),
    )
    return model, inner, time


def test_a_rate_limit_waits_for_retry_after_then_succeeds() -> None:
    model, inner, time = wrapped(ModelRateLimitError("slow down", retry_after=7), "ok")
    assert model.complete(REQUEST).message.content == "ok"
    assert time.sleeps == [7.0] and len(inner.requests) == 2


def test_server_errors_back_off_with_bounded_jitter() -> None:
    model, _, time = wrapped(
        ModelUnavailableError("500"), ModelUnavailableError("503"), "ok", attempts=3
    )
    assert model.complete(REQUEST).message.content == "ok"
    assert len(time.sleeps) == 2
    assert 0 <= time.sleeps[0] <= 0.5 and 0 <= time.sleeps[1] <= 1.0


def test_attempts_are_bounded_and_the_last_error_is_raised() -> None:
    model, inner, _ = wrapped(*[ModelUnavailableError("down")] * 3, attempts=3)
    with pytest.raises(ModelUnavailableError):
        model.complete(REQUEST)
    assert len(inner.requests) == 3


@pytest.mark.parametrize(
    "error",
    [
        ModelAuthError("bad key"),
        ModelBadRequestError("bad schema"),
        ContextOverflowError("too long"),
    ],
)
def test_errors_a_retry_cannot_fix_are_raised_at_once(error: Exception) -> None:
    model, inner, time = wrapped(error, "never reached")
    with pytest.raises(type(error)):
        model.complete(REQUEST)
    assert len(inner.requests) == 1 and time.sleeps == []


def test_each_attempt_gets_the_time_left_before_the_deadline() -> None:
    model, inner, _ = wrapped("ok", remaining=12.0, timeout=25.0)
    model.complete(REQUEST)
    assert inner.requests[0].timeout == 12.0
    model2, inner2, _ = wrapped("ok", remaining=60.0, timeout=25.0)
    model2.complete(REQUEST)
    assert inner2.requests[0].timeout == 25.0  # the configured timeout when time allows


def test_no_time_left_is_a_504_without_calling_the_model() -> None:
    model, inner, _ = wrapped("never", remaining=0.5)
    with pytest.raises(ModelTimeoutError, match="deadline"):
        model.complete(REQUEST)
    assert inner.requests == []


def test_a_retry_that_would_outlive_the_deadline_is_not_made() -> None:
    model, inner, time = wrapped(
        ModelRateLimitError("slow down", retry_after=30), "ok", remaining=10.0
    )
    with pytest.raises(ModelRateLimitError):
        model.complete(REQUEST)
    assert len(inner.requests) == 1 and time.sleeps == []


def test_a_timed_out_attempt_is_retried_only_while_time_remains() -> None:
    clocks: list[FakeTime] = []

    def slow(request: ChatRequest):
        clocks[0].now += request.timeout  # the attempt used all the time it was given
        raise ModelTimeoutError("no answer")

    model, inner, time = wrapped(slow, slow, "ok", remaining=3.0)
    clocks.append(time)
    with pytest.raises(ModelTimeoutError):
        model.complete(REQUEST)
    assert len(inner.requests) == 1  # the first attempt took the whole budget


def test_calls_are_logged_without_their_content(caplog) -> None:
    model, _, _ = wrapped("the answer mentions tea")
    model._counter = TokenCounter()
    with caplog.at_level(logging.INFO):
        model.complete(REQUEST)
    logged = " ".join(str(r.__dict__) for r in caplog.records)
    assert "model call" in logged and "secret plan" not in logged and "mentions tea" not in logged


def test_the_deadline_reads_the_lambda_context() -> None:
    class Context:
        def get_remaining_time_in_millis(self) -> int:
            return 29_000

    time = FakeTime()
    deadline = Deadline(margin_seconds=3, clock=time.clock)
    assert deadline.remaining() is None
    deadline.start(Context())
    assert deadline.remaining() == 26.0
    time.now += 20
    assert deadline.remaining() == 6.0
