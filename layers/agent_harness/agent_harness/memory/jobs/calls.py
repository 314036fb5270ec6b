"""Every memory model call (the flush's, the consolidation's, its second look and
re-check) goes through ``ask``: deterministic and bounded, counted, and checked.

    request   the memory role's model; ``temperature`` (HARNESS_MEMORY_TEMPERATURE,
              default 0), ``seed`` (HARNESS_MEMORY_SEED, where the provider takes one)
              and ``max_tokens`` (the call's cap) always set
    answer    spend recorded against the user's memory budget (usage.record_spend)
    parse     the caller's check of the format; a ModelOutputError gets one corrective
              call that quotes what was wrong (the refused answer and the reason, then
              the format again), like the agent's JSON path; a second failure raises,
              counted (``MemoryFormatFailures``, ``MemoryCorrectiveCalls``; the final
              refusal ``MemoryAnswersRefused``, which an alarm watches), and the job
              makes it visible (consolidation: its status; a flush: the queue's retry,
              then its dead-letter queue and alarm)

Nothing here writes memory: the callers pass what was parsed to the owner.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.errors import ModelOutputError
from agent_harness.models.base import ChatRequest, Message
from agent_harness.usage import record_spend

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_harness.ids import User
    from agent_harness.models.base import Purpose, ResponseFormat
    from agent_harness.runtime import Runtime

__all__ = ["JUDGEMENT_FORMAT", "JUDGEMENT_TOKENS", "Answered", "ask", "bounded"]

logger = Logger(child=True)
metrics = Metrics()

T = TypeVar("T")

#: how much of a refused answer the corrective call quotes back
QUOTED_CHARS = 1500
#: the re-check's and the second look's answers: a few records each
JUDGEMENT_TOKENS = 800
JUDGEMENT_FORMAT = 'one "- " line per fact shown (its marks as asked), or NO_REPLY'


def bounded(
    rt: Runtime,
    messages: list[Message],
    purpose: Purpose,
    max_tokens: int,
    response_format: ResponseFormat | None = None,
) -> ChatRequest:
    """A memory call's request: the memory sampling settings, a cap on the answer, and
    the format asked for (memory.jobs.formats), if any."""
    settings = rt.settings
    return ChatRequest(
        messages=messages,
        purpose=purpose,
        temperature=settings.memory_temperature,
        seed=settings.memory_seed,
        max_output_tokens=max_tokens,
        response_format=response_format,
    )


@dataclass(frozen=True)
class Answered(Generic[T]):
    value: T
    #: the model calls it took (2: a corrective call)
    calls: int
    #: the model that answered (as it named itself)
    model: str


def ask(
    rt: Runtime,
    user: User,
    request: ChatRequest,
    parse: Callable[[str], T],
    *,
    expected: str,
) -> Answered[T]:
    """``request`` to the memory model, its answer through ``parse``; one corrective
    call when the answer breaks its format (``expected`` says what the format is)."""
    model = rt.models.for_role("memory")
    reply = model.complete(request)
    record_spend(rt, user, "memory", reply.usage)
    try:
        return Answered(parse(reply.message.content), 1, reply.model)
    except ModelOutputError as exc:
        first = str(exc)
    metrics.add_metric("MemoryFormatFailures", MetricUnit.Count, 1)
    logger.warning(
        "a memory answer broke its format; one corrective call",
        extra={"purpose": request.purpose, "error": first},
    )
    refused = reply.message.content
    quoted = refused if len(refused) <= QUOTED_CHARS else refused[:QUOTED_CHARS] + " [...]"
    correction = Message(
        role="user",
        content=(
            f"Your answer was refused: {first}. Answer again with {expected}, and nothing "
            "else: do not repeat the blocks you were given, their tags, headers or ids."
        ),
    )
    retry = request.model_copy(
        update={
            "messages": [*request.messages, Message(role="assistant", content=quoted), correction]
        }
    )
    metrics.add_metric("MemoryCorrectiveCalls", MetricUnit.Count, 1)
    again = model.complete(retry)
    record_spend(rt, user, "memory", again.usage)
    try:
        return Answered(parse(again.message.content), 2, again.model)
    except ModelOutputError as second:
        metrics.add_metric("MemoryFormatFailures", MetricUnit.Count, 1)
        # the template's MemoryAnswersRefusedAlarm watches this one
        metrics.add_metric("MemoryAnswersRefused", MetricUnit.Count, 1)
        raise ModelOutputError(
            f"{again.model}'s {request.purpose} answer broke its format after a corrective "
            f"call: {second} (first: {first})"
        ) from second
