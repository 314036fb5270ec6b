"""POST /v1/sessions/{id}/import: bring existing history in as turns, without a model call.

    messages -> turns (a new turn at each user message) -> turn objects (create-only,
    concurrent) -> working context -> counter + lease release -> one post-turn job

The imported turns are flushed and indexed by the post-turn job like any turn (in
windows, for hundreds of turns). Each turn keeps the timestamp of its first message, so
its facts land in the ledger of the day they were said.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StrictStr, field_validator

from agent_harness.agent.compaction import safe_cutoff
from agent_harness.agent.context import read_persona, save_context
from agent_harness.agent.history import turn_numbers
from agent_harness.agent.lease import session_lease
from agent_harness.clock import iso
from agent_harness.errors import (
    PayloadTooLargeError,
    ToolCallsStateError,
    ValidationFailedError,
)
from agent_harness.ids import validate_session_id
from agent_harness.import_budget import imports_admitted
from agent_harness.jobs import PostTurnJob
from agent_harness.memory.jobs.flush import extracts
from agent_harness.models.base import Message
from agent_harness.paths import context_path, turn_path
from agent_harness.records import TurnRecord, WorkingContext

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from agent_harness.ids import User
    from agent_harness.runtime import Runtime

__all__ = [
    "ImportBody",
    "ImportResult",
    "ImportedMessage",
    "check_history",
    "extend_context",
    "history_records",
    "import_history",
    "import_turns",
    "imported_turns",
    "put_records",
]

MAX_MESSAGES = 2000
MAX_TOTAL_CHARS = 4_000_000


class ImportedMessage(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    role: Literal["user", "assistant"]
    content: StrictStr
    timestamp: AwareDatetime | None = None

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("content must not be blank")
        return value


class ImportBody(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    messages: list[ImportedMessage] = Field(min_length=1, max_length=MAX_MESSAGES)


@dataclass
class ImportResult:
    session_id: str
    first_turn: int
    last_turn: int
    messages: int
    flush: str


def _group(messages: list[ImportedMessage]) -> list[list[ImportedMessage]]:
    turns: list[list[ImportedMessage]] = []
    for message in messages:
        if message.role == "user" or not turns:
            turns.append([])
        turns[-1].append(message)
    return turns


def imported_turns(messages: list[ImportedMessage]) -> int:
    """How many turns ``messages`` become (what the daily import budget counts)."""
    return len(_group(messages))


def check_history(messages: list[ImportedMessage]) -> None:
    total = sum(len(m.content) for m in messages)
    if total > MAX_TOTAL_CHARS:
        raise PayloadTooLargeError(f"an import is limited to {MAX_TOTAL_CHARS} characters")
    if len(messages) > MAX_MESSAGES:
        raise ValidationFailedError(f"an import is limited to {MAX_MESSAGES} messages")


def history_records(
    session_id: str, first: int, messages: list[ImportedMessage], now: datetime
) -> list[TurnRecord]:
    """The messages as turns numbered from ``first`` (a new turn at each user message)."""
    return [
        TurnRecord(
            session_id=session_id,
            turn=first + n,
            created_at=iso(group[0].timestamp or now),
            source="import",
            messages=[Message(role=m.role, content=m.content) for m in group],
        )
        for n, group in enumerate(_group(messages))
    ]


def put_records(rt: Runtime, user: User, session_id: str, records: list[TurnRecord]) -> None:
    """Turn objects, create-only and concurrent; the caller holds the session lease."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(
            pool.map(
                lambda r: rt.store.put(
                    user, turn_path(session_id, r.turn), r.model_dump_json(), create_only=True
                ),
                records,
            )
        )


def import_history(
    rt: Runtime, user: User, session_id: str, messages: list[ImportedMessage]
) -> ImportResult:
    validate_session_id(session_id)
    check_history(messages)
    groups = [
        (group[0].timestamp, [Message(role=m.role, content=m.content) for m in group])
        for group in _group(messages)
    ]
    return import_turns(rt, user, session_id, groups)


def import_turns(
    rt: Runtime,
    user: User,
    session_id: str,
    groups: Sequence[tuple[datetime | None, list[Message]]],
) -> ImportResult:
    """Turns of ``groups`` (each: when it was said, its messages: a user's, the
    assistant's with its tool calls, the tools' results) appended to the session,
    then one post-turn job that flushes and indexes them."""
    now = rt.clock.now()
    with (
        imports_admitted(rt, user, len(groups)),
        session_lease(rt, user, session_id) as lease,
    ):
        state = lease.state
        if state.pause is not None:  # its turn number is promised to the paused turn
            raise ToolCallsStateError(
                "tool_results_required",
                f"session {session_id} has turn {state.pause.turn} awaiting client tool "
                "results: send them, or cancel the turn, before importing",
                details={"turn": state.pause.turn},
            )
        # numbers taken by calls that crashed before committing are skipped, not reused
        first = max([state.turn, *turn_numbers(rt, user, session_id)]) + 1
        records = [
            TurnRecord(
                session_id=session_id,
                turn=first + n,
                created_at=iso(stamp or now),
                source="import",
                messages=said,
            )
            for n, (stamp, said) in enumerate(groups)
        ]
        put_records(rt, user, session_id, records)
        stored = rt.store.get(user, context_path(session_id))
        context = WorkingContext.parse_or_none(stored.content) if stored else None
        if context is None:
            context = WorkingContext(session_id=session_id, agents_md=read_persona(rt, user))
        extend_context(rt, context, records)
        save_context(rt, user, context, stored.etag if stored else None)
        last = records[-1].turn
        lease.commit(last)
    job = PostTurnJob(
        user_id=user.id, session_id=session_id, turn=last, reason="import", queued_at=iso(now)
    )
    rt.queue.send_post_turn(user, job)
    flushed = "queued" if extracts(rt.settings, "import") else "skipped"
    count = sum(len(said) for _, said in groups)
    return ImportResult(session_id, first, last, count, flushed)


def extend_context(rt: Runtime, context: WorkingContext, records: list[TurnRecord]) -> None:
    """Append the imported messages to the working context, so the next call sees them
    (and what they hold below the user is remembered: agent.exposure)."""
    from agent_harness.agent.exposure import Exposure

    messages = [*context.messages, *(m for r in records for m in r.messages)]
    for record in records:
        Exposure.remember(context, record.messages, imported=record.source == "import")
    # no model call here: the context keeps the newest messages; the rest is pointed to
    cut = safe_cutoff(messages, len(messages) - rt.settings.compaction_keep_messages)
    if cut > 0:
        note = (
            f"{cut} earlier messages of this session (imported history) are not shown here; "
            "they are in the thread log, and thread_search finds them."
        )
        context.summary = f"{context.summary}\n\n{note}" if context.summary else note
        messages = messages[cut:]
    context.messages = messages
    context.last_turn = records[-1].turn
