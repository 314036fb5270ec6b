"""A turn that waits for the caller's tool results. No Lambda waits: the turn is saved and
the session lease released until the results come, as a new request.

    pause    context.json   the turn so far (PendingTurn) under a new pause id
             session item   pause mark {pause id, turn, time} + lease released: the commit
                            point (a context whose pause the item never named is stale)
    resume   {"tool_results"}: one result per pending call, appended in call order; the
             same turn goes on, from the model call after the pause
    close    {"cancel": true}, or a new message once HARNESS_TOOL_RESULT_TIMEOUT_SECONDS
             have passed: each pending call is answered "Error: cancelled by the caller"
             and one last model call, without tools, gives the final answer
    settle   a chat completion whose conversation went on (the client's conversation is
             the truth): the turn is written as it stands, each call answered by the
             result the request carries or as not run, with no model call; then the
             request's message starts the next turn

After a crash the two records can disagree; ``effective_pending`` says which turn is
real: the context's, when the item names its pause or the pause it continues; none, when
the item names no pause (the pause was never committed) or the context has already
completed the paused turn (the completion was written and not committed).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from agent_harness.agent.client_tools import CANCELLED, call_view, tool_result_message
from agent_harness.clock import iso
from agent_harness.errors import ToolCallsStateError, ValidationFailedError
from agent_harness.records import PendingTurn

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_harness.agent.client_tools import ToolResult
    from agent_harness.agent.draft import Draft
    from agent_harness.agent.loop import LoopResult
    from agent_harness.models.base import Message, ToolCall
    from agent_harness.ports import SessionState
    from agent_harness.records import WorkingContext

__all__ = [
    "answer_calls",
    "check_results",
    "effective_pending",
    "expired",
    "no_pending",
    "pending_details",
    "pending_turn",
    "results_required",
]


def pending_turn(pause_id: str, draft: Draft, result: LoopResult, paused_at: str) -> PendingTurn:
    """The turn so far, as a pause saves it: the draft and the loop up to the calls."""
    return PendingTurn(
        pause_id=pause_id,
        earlier=draft.pauses,
        turn=draft.number,
        started_at=draft.started,
        paused_at=paused_at,
        messages=[draft.user_message, *result.messages],
        calls=result.pending,
        answered=draft.answered,
        tools=draft.client_tools,
        instructions=draft.instructions,
        reference=draft.reference,
        recall=draft.recall,
        memory=draft.memory,
        usage=result.usage,
        compaction_usage=draft.compaction_usage,
        model_calls=result.model_calls,
        model=result.model,
        compacted=draft.compacted,
        spend_counted=True,
        options=draft.options,
    )


def effective_pending(state: SessionState, context: WorkingContext | None) -> PendingTurn | None:
    pending = context.pending if context is not None else None
    mark = state.pause
    if mark is None or pending is None:
        return None
    if mark.pause_id == pending.pause_id or mark.pause_id in pending.earlier:
        return pending  # the latter: a resume paused again and crashed before its mark
    return None


def _paused_at(pending: PendingTurn) -> datetime:
    return datetime.fromisoformat(pending.paused_at.replace("Z", "+00:00"))


def expired(pending: PendingTurn, now: datetime, timeout_seconds: int) -> bool:
    return now - _paused_at(pending) >= timedelta(seconds=timeout_seconds)


def pending_details(pending: PendingTurn, timeout_seconds: int) -> dict[str, Any]:
    """What a caller needs to go on: the turn and its pending calls, and until when."""
    closes = _paused_at(pending) + timedelta(seconds=timeout_seconds)
    return {
        "turn": pending.turn,
        "tool_calls": [call_view(call) for call in pending.calls],
        "expires_at": iso(closes),
    }


def results_required(session_id: str, pending: PendingTurn, timeout: int) -> ToolCallsStateError:
    n = len(pending.calls)
    return ToolCallsStateError(
        "tool_results_required",
        f"turn {pending.turn} of session {session_id} awaits the results of {n} tool "
        f"call{'s' if n > 1 else ''}: send tool_results, or cancel it",
        details=pending_details(pending, timeout),
    )


def no_pending(session_id: str) -> ToolCallsStateError:
    return ToolCallsStateError(
        "no_pending_tool_calls", f"no turn of session {session_id} awaits tool results"
    )


def check_results(
    session_id: str, pending: PendingTurn, results: list[ToolResult], timeout: int
) -> None:
    """One result for every pending call and nothing else: 422; results of calls this
    turn already took (a repeated submission): 409 with the calls it awaits now."""
    wanted = [call.id for call in pending.calls]
    given = [result.tool_call_id for result in results]
    unknown = [i for i in given if i not in wanted]
    if unknown and set(given) <= set(pending.answered):
        raise ToolCallsStateError(
            "tool_results_already_taken",
            f"these results were taken already; turn {pending.turn} now awaits others",
            details=pending_details(pending, timeout),
        )
    if unknown:
        raise ValidationFailedError(
            f"tool_results: no pending call has the id {', '.join(unknown)}",
            details=pending_details(pending, timeout),
        )
    missing = [i for i in wanted if i not in given]
    if missing:
        raise ValidationFailedError(
            f"tool_results: missing the result of {', '.join(missing)}",
            details=pending_details(pending, timeout),
        )


def answer_calls(
    pending: PendingTurn,
    results: list[ToolResult] | None,
    evict: Callable[[ToolCall, str], str],
    missing: str = CANCELLED,
) -> list[Message]:
    """The turn's messages with the pending calls answered, by the caller's results or,
    for a call without one, with ``missing``. Answers follow the order of the calls (the
    results of the calls run here may already sit between them)."""
    by_id = {r.tool_call_id: r for r in results or []}
    answered = list(pending.messages)
    for call in pending.calls:
        result = by_id.get(call.id)
        if result is None:
            answered.append(tool_result_message(call, missing))
            continue
        message = tool_result_message(call, result.content, is_error=result.is_error)
        answered.append(message.model_copy(update={"content": evict(call, message.content)}))
    return _in_call_order(answered)


def _in_call_order(messages: list[Message]) -> list[Message]:
    last = max(i for i, m in enumerate(messages) if m.role == "assistant")
    order = {call.id: n for n, call in enumerate(messages[last].tool_calls)}
    tail = sorted(messages[last + 1 :], key=lambda m: order.get(m.tool_call_id or "", len(order)))
    return [*messages[: last + 1], *tail]
