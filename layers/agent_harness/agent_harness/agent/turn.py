"""One agent turn, POST /v1/sessions/{id}/messages. No memory LLM work on this path.

    1 DynamoDB UpdateItem   session lease (409 + Retry-After when held); turn counter read
    2 S3 GET                MEMORY.md  -> reference message, capped       } concurrent
    3 S3 GET                context.json (working context of the session) }
      model loop            agent role, bounded
    4 S3 PUT                sessions/<s>/turns/<n>.json, create-only (the thread log)
    5 S3 PUT                context.json, If-Match / If-None-Match
    6 DynamoDB UpdateItem   turn := n and lease released, in one conditional write
    7 SQS SendMessage       post-turn job (FlushQueue, group = user)

Seven AWS requests (DESIGN §7). Until step 4 nothing durable is written, so a model
failure leaves no trace but a released lease. The turn object is written before the
reply is returned: every 200 has its thread-log object.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.agent.context import (
    SYSTEM_PROMPT,
    build_messages,
    memory_reference,
    trim_messages,
)
from agent_harness.agent.loop import run_loop
from agent_harness.clock import epoch_ms, iso
from agent_harness.errors import (
    ConflictError,
    HarnessError,
    ModelOutputError,
    PayloadTooLargeError,
    PreconditionFailedError,
    ValidationFailedError,
)
from agent_harness.ids import MEMORY_FILE, context_path, turn_path, validate_session_id
from agent_harness.jobs import PostTurnJob
from agent_harness.memory.flush import flush_throttled
from agent_harness.models.base import Message, Usage
from agent_harness.records import TurnRecord, WorkingContext

if TYPE_CHECKING:
    from datetime import datetime

    from agent_harness.agent.loop import LoopResult
    from agent_harness.aws.state import SessionState
    from agent_harness.ids import User
    from agent_harness.records import MemoryInjection
    from agent_harness.runtime import Runtime

__all__ = ["TurnResult", "run_turn"]

logger = Logger(child=True)
metrics = Metrics()

FlushState = Literal["queued", "skipped", "throttled"]
TURN_NUMBER_ATTEMPTS = 5


@dataclass
class TurnResult:
    session_id: str
    turn: int
    reply: str
    usage: Usage
    memory_tokens: int
    compacted: bool
    flush: FlushState
    model: str


def run_turn(rt: Runtime, user: User, session_id: str, text: str) -> TurnResult:
    validate_session_id(session_id)
    if not text.strip():
        raise ValidationFailedError("message must not be blank")
    if len(text) > rt.settings.max_message_chars:
        raise PayloadTooLargeError(
            f"message is {len(text)} characters; the limit is {rt.settings.max_message_chars}"
        )

    started = rt.clock.now()
    owner = rt.new_id()
    state = rt.table.acquire_session_lease(
        user, session_id, owner, epoch_ms(started), rt.settings.session_lease_seconds * 1000
    )
    committed = False
    try:
        result = _turn(rt, user, session_id, text, state, owner, started)
        committed = True
    finally:
        if not committed:
            try:
                rt.table.release_session_lease(user, session_id, owner)
            except HarnessError:  # the lease expires on its own; the original error matters
                logger.exception("releasing the session lease failed")
    result.flush = _enqueue_post_turn(rt, user, session_id, result.turn, state, started)
    return result


def _turn(
    rt: Runtime,
    user: User,
    session_id: str,
    text: str,
    state: SessionState,
    owner: str,
    started: datetime,
) -> TurnResult:
    ctx_key = context_path(session_id)
    loaded = rt.store.get_many(user, [MEMORY_FILE, ctx_key])
    reference, injection = memory_reference(
        loaded.get(MEMORY_FILE),
        rt.counter,
        rt.settings.consolidation_max_tokens,
        iso(started),
    )
    stored_ctx = loaded.get(ctx_key)
    context = WorkingContext.parse_or_none(stored_ctx.content) if stored_ctx else None
    if stored_ctx is not None and context is None:
        # unreadable (edited by hand?): start afresh; the thread log still has everything
        logger.warning(
            "working context unreadable; starting afresh", extra={"session_id": session_id}
        )
    context = context or WorkingContext(session_id=session_id)

    new_message = Message(role="user", content=text)
    model = rt.models.for_role("agent")
    result = run_loop(
        model,
        build_messages(SYSTEM_PROMPT, reference, context, new_message),
        tools=None,
        max_calls=rt.settings.max_model_calls,
    )
    if not result.reply.strip():
        raise ModelOutputError(f"{result.model} returned an empty reply")

    # --- durable from here: thread log first, then the context, then the counter ---
    turn_messages = [new_message, *result.messages]
    turn_no = _write_turn(
        rt, user, session_id, state.turn, started, turn_messages, result, injection
    )
    context.messages = trim_messages(
        [*context.messages, *turn_messages], rt.settings.context_max_messages
    )
    context.last_turn = turn_no
    try:
        if stored_ctx is None:
            rt.store.put(user, ctx_key, context.model_dump_json(), create_only=True)
        else:
            rt.store.put(user, ctx_key, context.model_dump_json(), if_match=stored_ctx.etag)
    except PreconditionFailedError as exc:
        raise ConflictError(
            f"the working context of session {session_id} changed during the call"
        ) from exc
    rt.table.commit_turn(user, session_id, owner, turn_no, iso(rt.clock.now()))
    metrics.add_metric("Turns", MetricUnit.Count, 1)
    metrics.add_metric("ModelCalls", MetricUnit.Count, result.model_calls)
    metrics.add_metric("InputTokens", MetricUnit.Count, result.usage.input_tokens)
    metrics.add_metric("OutputTokens", MetricUnit.Count, result.usage.output_tokens)
    metrics.add_metric("MemoryTokens", MetricUnit.Count, injection.tokens)
    logger.info(
        "turn",
        extra={
            "session_id": session_id,
            "turn": turn_no,
            "model_calls": result.model_calls,
            "input_tokens": result.usage.input_tokens,
            "output_tokens": result.usage.output_tokens,
            "memory_tokens": injection.tokens,
        },
    )
    return TurnResult(
        session_id=session_id,
        turn=turn_no,
        reply=result.reply,
        usage=result.usage,
        memory_tokens=injection.tokens,
        compacted=False,
        flush="queued",
        model=result.model,
    )


def _write_turn(
    rt: Runtime,
    user: User,
    session_id: str,
    last_turn: int,
    started: datetime,
    messages: list[Message],
    result: LoopResult,
    injection: MemoryInjection,
) -> int:
    """Create the turn's log object. A number already taken belongs to a call that
    crashed after writing it and before committing; such a turn is kept and skipped."""
    for attempt in range(TURN_NUMBER_ATTEMPTS):
        turn_no = last_turn + 1 + attempt
        record = TurnRecord(
            session_id=session_id,
            turn=turn_no,
            created_at=iso(started),
            messages=messages,
            model=result.model,
            usage=result.usage,
            memory=injection,
        )
        try:
            rt.store.put(
                user, turn_path(session_id, turn_no), record.model_dump_json(), create_only=True
            )
            return turn_no
        except PreconditionFailedError:
            logger.warning("turn number taken by an uncommitted call", extra={"turn": turn_no})
    raise ConflictError(f"could not allocate a turn number in session {session_id}")


def _enqueue_post_turn(
    rt: Runtime, user: User, session_id: str, turn: int, state: SessionState, now: datetime
) -> FlushState:
    """Queue the post-turn job; report what the flush trigger will do with it."""
    settings = rt.settings
    job = PostTurnJob(user_id=user.id, session_id=session_id, turn=turn, queued_at=iso(now))
    try:
        rt.queue.send_post_turn(user, job)
    except HarnessError:
        # the turn is saved; the next turn's job of this session flushes it too
        logger.exception("queueing the post-turn job failed", extra={"turn": turn})
        metrics.add_metric("PostTurnEnqueueFailures", MetricUnit.Count, 1)
        return "skipped"
    if settings.flush_trigger == "never":
        return "skipped"
    if settings.flush_trigger == "throttled" and flush_throttled(
        state, now, settings.flush_min_gap_seconds
    ):
        return "throttled"
    return "queued"
