"""The durable end of a turn: its thread-log object, its saves, its post-turn job.

    write_turn           S3 PUT sessions/<s>/turns/<n>.json, create-only (the thread log)
    apply_saves          the turn's memory_save calls, into MEMORY.md and the day's ledger;
                         then its memory_correct calls, as records in today's ledger
    enqueue_post_turn    SQS SendMessage of the post-turn job (FlushQueue, group = user)

A turn's object is written before its reply is returned (docs/design.md#no-lost-turn).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.agent.accepted import corrections_of, saved_lines
from agent_harness.agent.scoped import apply_promotions
from agent_harness.agent.tools import AGENT_SAVE
from agent_harness.clock import iso
from agent_harness.errors import (
    ConflictError,
    HarnessError,
    MemoryFullError,
    PreconditionFailedError,
)
from agent_harness.jobs import PostTurnJob
from agent_harness.memory.facts.ledger import Source, day_of
from agent_harness.memory.jobs.flush import extracts, flush_throttled
from agent_harness.memory.owner import Memory
from agent_harness.models.base import ToolCall, Usage
from agent_harness.paths import ledger_path, turn_path
from agent_harness.records import TurnRecord

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from agent_harness.ids import User
    from agent_harness.ports import SessionState
    from agent_harness.runtime import Runtime
    from agent_harness.scopes import Grant

__all__ = [
    "FlushState",
    "TurnResult",
    "apply_saves",
    "enqueue_post_turn",
    "log_turn",
    "write_turn",
]

logger = Logger(child=True)
metrics = Metrics()

FlushState = Literal["queued", "skipped", "throttled"]
Status = Literal["completed", "requires_action"]
TURN_NUMBER_ATTEMPTS = 5


@dataclass
class TurnResult:
    session_id: str
    turn: int
    reply: str | None  # None while the turn awaits the caller's tool results
    usage: Usage  # the agent role's calls of this turn, pauses included
    memory_tokens: int
    compacted: bool
    flush: FlushState | None  # None: nothing completed, nothing queued
    model: str
    compaction_usage: Usage = field(default_factory=Usage)  # the compaction role's
    status: Status = "completed"
    #: the caller's tool calls the turn awaits (``requires_action``)
    tool_calls: list[ToolCall] = field(default_factory=list)
    #: the last turn this request completed: the post-turn job covers up to it
    job_turn: int | None = None
    #: the shared scopes the session is bound to (agent.scoped)
    scopes: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, record: TurnRecord, *, job_turn: int | None) -> TurnResult:
        """A completed turn's answer, from its record (its last assistant message)."""
        reply = next(m.content for m in reversed(record.messages) if m.role == "assistant")
        return cls(
            session_id=record.session_id,
            turn=record.turn,
            reply=reply,
            usage=record.usage,
            memory_tokens=record.memory.total_tokens,
            compacted=record.compacted,
            flush="queued",
            model=record.model or "",
            compaction_usage=record.compaction_usage,
            job_turn=job_turn,
        )


def write_turn(rt: Runtime, user: User, record: TurnRecord) -> tuple[TurnRecord, bool]:
    """Create the turn's log object; returns the record kept and whether it is ours.

    A number already taken belongs to a call that crashed after writing it and before
    committing. A paused turn keeps the number it announced: when the object there is
    this same turn (the same pauses), that earlier completion is kept, so a retry never
    doubles it; any other such turn is kept and skipped."""
    for attempt in range(TURN_NUMBER_ATTEMPTS):
        numbered = record.model_copy(update={"turn": record.turn + attempt})
        path = turn_path(record.session_id, numbered.turn)
        try:
            rt.store.put(user, path, numbered.model_dump_json(), create_only=True)
            return numbered, True
        except PreconditionFailedError:
            logger.warning("turn number taken by an uncommitted call", extra={"turn": path})
        if record.pauses:
            stored = rt.store.get(user, path)
            earlier = TurnRecord.parse_or_none(stored.content) if stored else None
            if earlier is not None and earlier.pauses == record.pauses:
                return earlier, False
    raise ConflictError(f"could not allocate a turn number in session {record.session_id}")


def apply_saves(
    rt: Runtime, user: User, record: TurnRecord, fresh: bool, scopes: Sequence[Grant] = ()
) -> None:
    """The turn's memory_save calls, into MEMORY.md and the ledger of its day; then its
    memory_correct calls; then its memory_promote calls into the bound ``scopes``. A turn
    kept from an earlier, crashed completion may have saved already: its ledger says (and
    a fact it corrected is not current any more)."""
    _apply_saves(rt, user, record, fresh)
    _apply_corrections(rt, user, record)
    if scopes:
        apply_promotions(rt, user, record, scopes)


def _apply_corrections(rt: Runtime, user: User, record: TurnRecord) -> None:
    """Each accepted memory_correct of the turn, as the tool decided it from what the
    turn's model was shown (agent.exposure): applied with that authority, or, proposed,
    queued for the user's review. One refused since it was checked (retired meanwhile)
    is logged, and the turn stands."""
    from agent_harness.memory.facts.corrections import correct_fact, propose_correction

    corrections = corrections_of(record.messages)
    if not corrections:
        return
    source = Source(record.session_id, (record.turn,), via="memory_correct")
    for accepted in corrections:
        args = accepted.arguments
        text, reason = args.get("text"), args.get("reason")
        try:
            if accepted.proposed:
                propose_correction(
                    rt, user, args["fact_id"], text, reason, accepted.authority, source.fields()
                )
                continue
            correct_fact(
                rt,
                user,
                args["fact_id"],
                text,
                authority=accepted.authority,
                writer="agent",
                via="memory_correct",
                reason=reason,
                provenance=source.render(),
            )
        except HarnessError as exc:
            logger.warning("memory_correct not applied", extra={"code": exc.code})
            metrics.add_metric("MemoryCorrectionsRefused", MetricUnit.Count, 1)


def _apply_saves(rt: Runtime, user: User, record: TurnRecord, fresh: bool) -> None:
    saves = saved_lines(record.messages)
    if not saves:
        return
    provenance = Source(record.session_id, (record.turn,), via="memory_save").render()
    at = record.created()
    if not fresh:
        ledger = rt.store.get(user, ledger_path(day_of(at, rt.settings.zone)))
        if ledger is not None and provenance in ledger.content:
            return
    for lines in saves:
        try:
            Memory(rt, user).save(
                lines,
                authority=AGENT_SAVE,
                provenance=provenance,
                at=at,
                writer="agent: memory_save",
                index=False,  # the turn's post-turn job indexes what it saved
            )
        except MemoryFullError:  # filled since the tool checked: the turn stands
            logger.warning("memory_save refused: MEMORY.md is full", extra={"turn": record.turn})
            metrics.add_metric("MemorySavesRefusedFull", MetricUnit.Count, 1)


def enqueue_post_turn(
    rt: Runtime, user: User, session_id: str, result: TurnResult, state: SessionState, now: datetime
) -> FlushState:
    """Queue the post-turn job; report what the flush trigger will do with it. After a
    compaction it is a "compaction" flush: every unflushed turn, past any throttle."""
    settings = rt.settings
    turn = result.job_turn or result.turn
    forced = result.compacted and (
        settings.compaction_flush_before or settings.trigger.mode == "on_compact"
    )
    reason: Literal["compaction", "turn"] = "compaction" if forced else "turn"
    job = PostTurnJob(
        user_id=user.id,
        session_id=session_id,
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


def log_turn(record: TurnRecord, model_calls: int, pauses: int, memory_tokens: int) -> None:
    """The metrics and the log line of a completed turn."""
    metrics.add_metric("Turns", MetricUnit.Count, 1)
    metrics.add_metric("ModelCalls", MetricUnit.Count, model_calls)
    metrics.add_metric("MemoryTokens", MetricUnit.Count, memory_tokens)
    usage = record.usage
    logger.info(
        "turn",
        extra={
            "session_id": record.session_id,
            "turn": record.turn,
            "model_calls": model_calls,
            "pauses": pauses,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "compaction_input_tokens": record.compaction_usage.input_tokens,
            "memory_tokens": memory_tokens,
        },
    )
