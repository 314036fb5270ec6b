"""One agent turn, POST /v1/sessions/{id}/messages. No memory LLM work on this path.

    1 DynamoDB UpdateItem   session lease (409 + Retry-After when held); turn counter read
    2 S3 GET                MEMORY.md  -> reference message, capped       } concurrent
    3 S3 GET                context.json; AGENTS.md instead for a new     }
                            session (the persona is kept in the context)
      model loop            agent role, bounded
    4 S3 PUT                sessions/<s>/turns/<n>.json, create-only (the thread log)
      (memory_save calls, staged during the loop, are applied here)
    5 S3 PUT                context.json, If-Match / If-None-Match
    6 DynamoDB UpdateItem   turn := n and lease released, in one conditional write
    7 SQS SendMessage       post-turn job (FlushQueue, group = user)

Seven AWS requests (DESIGN §7). Until step 4 nothing durable is written, so a model
failure leaves no trace but a released lease. The turn object is written before the
reply is returned: every 200 has its thread-log object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.agent.compaction import compact, shorten_old_arguments
from agent_harness.agent.context import (
    build_messages,
    memory_reference,
    read_persona,
    save_context,
    system_prompt,
)
from agent_harness.agent.eviction import Evictor
from agent_harness.agent.lease import session_lease
from agent_harness.agent.loop import LoopResult, run_loop
from agent_harness.agent.tools import MemoryTools
from agent_harness.clock import iso
from agent_harness.errors import (
    ConflictError,
    ContextOverflowError,
    HarnessError,
    ModelOutputError,
    PayloadTooLargeError,
    PreconditionFailedError,
    ValidationFailedError,
)
from agent_harness.ids import (
    AGENTS_FILE,
    MEMORY_FILE,
    context_path,
    turn_path,
    validate_session_id,
)
from agent_harness.jobs import PostTurnJob
from agent_harness.memory.files import save_memories
from agent_harness.memory.flush import extracts, flush_throttled
from agent_harness.memory.ledger import Source
from agent_harness.models.base import Message, Usage
from agent_harness.records import MemoryInjection, TurnRecord, WorkingContext

if TYPE_CHECKING:
    from datetime import datetime

    from agent_harness.agent.lease import SessionLease
    from agent_harness.aws.state import SessionState
    from agent_harness.ids import User
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
    usage: Usage  # the agent role's calls of this turn
    memory_tokens: int
    compacted: bool
    flush: FlushState
    model: str
    compaction_usage: Usage = field(default_factory=Usage)  # the compaction role's


def run_turn(rt: Runtime, user: User, session_id: str, text: str) -> TurnResult:
    validate_session_id(session_id)
    if not text.strip():
        raise ValidationFailedError("message must not be blank")
    if len(text) > rt.settings.max_message_chars:
        raise PayloadTooLargeError(
            f"message is {len(text)} characters; the limit is {rt.settings.max_message_chars}"
        )

    started = rt.clock.now()
    with session_lease(rt, user, session_id) as lease:
        result = _turn(rt, user, session_id, text, lease, started)
    result.flush = _enqueue_post_turn(rt, user, result, lease.state, started)
    return result


def _turn(
    rt: Runtime, user: User, session_id: str, text: str, lease: SessionLease, started: datetime
) -> TurnResult:
    settings = rt.settings
    state = lease.state
    tools_on, hooks_on = not settings.disable_memory_tools, not settings.disable_memory_hooks
    ctx_key = context_path(session_id)
    # a new session reads AGENTS.md (its persona, kept in the context); a running one its
    # context: two GETs either way, so the hot path stays at seven requests
    new_session = state.turn == 0
    loaded = rt.store.get_many(user, [MEMORY_FILE, AGENTS_FILE if new_session else ctx_key])
    stored_ctx = loaded.get(ctx_key)
    context = WorkingContext.parse_or_none(stored_ctx.content) if stored_ctx else None
    if context is None:
        if not new_session:  # lost or unreadable: start afresh, the thread log has it all
            logger.warning(
                "working context missing; starting afresh", extra={"session_id": session_id}
            )
            loaded.update(rt.store.get_many(user, [AGENTS_FILE]))
        agents = loaded.get(AGENTS_FILE)
        context = WorkingContext(
            session_id=session_id, agents_md=agents.content if agents else None
        )

    reference, injection = None, MemoryInjection()
    if tools_on or hooks_on:
        reference, injection = memory_reference(
            loaded.get(MEMORY_FILE), rt.counter, settings.consolidation_max_tokens, iso(started)
        )
    new_message = Message(role="user", content=text)
    shorten_old_arguments(context, settings)
    compaction_usage = Usage()
    summary_usage = compact(rt, context, [new_message]) if settings.compaction_enabled else None
    compacted = summary_usage is not None
    if summary_usage is not None:
        compaction_usage += summary_usage
        context.agents_md = read_persona(rt, user)

    def attempt() -> tuple[LoopResult, MemoryTools | None]:
        tools = MemoryTools(rt, user) if tools_on else None  # fresh: nothing staged twice
        result = run_loop(
            rt.models.for_role("agent"),
            build_messages(
                system_prompt(context.agents_md, tools=tools_on, hooks=hooks_on),
                reference,
                context,
                new_message,
            ),
            tools=tools.registry(after=Evictor(rt, user, session_id)) if tools else None,
            max_calls=settings.max_model_calls,
        )
        return result, tools

    try:
        result, tools = attempt()
    except ContextOverflowError:
        # one forced compaction and one retry; a second overflow is the caller's 502
        summary_usage = compact(rt, context, [new_message], force=True)
        if summary_usage is None:
            raise ContextOverflowError(
                "the conversation is over the model's context window and too short to "
                f"compact (at most {settings.compaction_keep_messages} messages are kept)"
            ) from None
        compaction_usage += summary_usage
        compacted = True
        context.agents_md = read_persona(rt, user)
        result, tools = attempt()
    if not result.reply.strip():
        raise ModelOutputError(f"{result.model} returned an empty reply")

    # --- durable from here: thread log first, then saves and context, then the counter ---
    turn_messages = [new_message, *result.messages]
    turn_no = _write_turn(
        rt, user, session_id, state.turn, started, turn_messages, result, injection
    )
    for lines in tools.staged if tools else []:
        save_memories(
            rt,
            user,
            lines,
            provenance=Source(session_id, (turn_no,), via="memory_save").render(),
            at=started,
        )
    context.messages = [*context.messages, *turn_messages]
    context.last_turn = turn_no
    save_context(rt, user, context, stored_ctx)
    lease.commit(turn_no)
    metrics.add_metric("Turns", MetricUnit.Count, 1)
    metrics.add_metric("ModelCalls", MetricUnit.Count, result.model_calls)
    metrics.add_metric("MemoryTokens", MetricUnit.Count, injection.tokens)
    logger.info(
        "turn",
        extra={
            "session_id": session_id,
            "turn": turn_no,
            "model_calls": result.model_calls,
            "input_tokens": result.usage.input_tokens,
            "output_tokens": result.usage.output_tokens,
            "compaction_input_tokens": compaction_usage.input_tokens,
            "memory_tokens": injection.tokens,
        },
    )
    return TurnResult(
        session_id=session_id,
        turn=turn_no,
        reply=result.reply,
        usage=result.usage,
        compaction_usage=compaction_usage,
        memory_tokens=injection.tokens,
        compacted=compacted,
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
    rt: Runtime, user: User, result: TurnResult, state: SessionState, now: datetime
) -> FlushState:
    """Queue the post-turn job; report what the flush trigger will do with it. After a
    compaction it is a "compaction" flush: every unflushed turn, past any throttle."""
    settings = rt.settings
    turn = result.turn
    forced = result.compacted and (
        settings.compaction_flush_before or settings.trigger.mode == "on_compact"
    )
    reason = "compaction" if forced else "turn"
    job = PostTurnJob(
        user_id=user.id,
        session_id=result.session_id,
        turn=turn,
        reason=reason,
        queued_at=iso(now),
    )
    try:
        rt.queue.send_post_turn(user, job)
    except HarnessError:
        # the turn is saved; the next turn's job of this session flushes it too
        logger.exception("queueing the post-turn job failed", extra={"turn": turn})
        metrics.add_metric("PostTurnEnqueueFailures", MetricUnit.Count, 1)
        return "skipped"
    if not extracts(settings, reason):
        return "skipped"  # the job still indexes the turn for thread search
    if reason == "turn" and flush_throttled(state, now, settings):
        return "throttled"
    return "queued"
