"""The post-turn job: extract durable facts from the session's unflushed turns.

    PostTurnJob(user, session, turn N)
      -> session item: flush cursor C, index cursor I                DynamoDB GetItem
      -> turns min(C, I)+1..N from the thread log (200 at most a run) S3 GETs (concurrent)
      -> index turns I+1..N into index/threads/YYYY-MM.jsonl         S3 CAS append
      -> trigger: always | never | throttled (gap since the last flush); hooks disabled
      -> per ledger day (the day of each turn, in the configured zone):
           skip turns a section already covers (source line)         idempotency
           memory model: flush prompt                                 LLM (memory role)
           append "## Flush — <time>" + source + bullets              S3 CAS append
      -> cursor := N (never backwards); user marked due               DynamoDB

Each turn is extracted once (the cursor), so the cost is linear in the session length;
the reference re-sent the whole context on every flush. A redelivered job, a retry
after a crash between append and cursor, or a duplicate job never writes a fact
twice: the source lines say what is already there. A model failure raises before
anything is appended for that day, so the job is retried and nothing is half-written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import groupby
from typing import TYPE_CHECKING, Literal

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.clock import iso
from agent_harness.ids import MEMORY_FILE, User, ledger_path, turn_path, validate_session_id
from agent_harness.memory.ledger import Source, clean_bullets, covered_turns, day_of, render_section
from agent_harness.memory.prompts import flush_messages, render_conversation
from agent_harness.memory.threads import index_turns
from agent_harness.models.base import ChatRequest
from agent_harness.records import TurnRecord

if TYPE_CHECKING:
    from agent_harness.aws.state import SessionState
    from agent_harness.jobs import PostTurnJob
    from agent_harness.runtime import Runtime

__all__ = ["FlushOutcome", "flush_throttled", "flush_turns", "run_post_turn_job"]

logger = Logger(child=True)
metrics = Metrics()

#: at most this many turns go to the model in one flush call
TURNS_PER_CALL = 40
#: at most this many turns per job run; the rest goes to a continuation job
TURNS_PER_JOB = 200

Status = Literal["flushed", "nothing_new", "skipped", "throttled", "no_session"]


@dataclass
class FlushOutcome:
    status: Status
    turns: list[int] = field(default_factory=list)
    days: list[str] = field(default_factory=list)
    facts: int = 0
    indexed: int = 0  # thread-search entries added


def flush_throttled(state: SessionState, now: datetime, min_gap_seconds: int) -> bool:
    """THROTTLED trigger: the last *successful* flush of the session is too recent. A
    user's jobs run one at a time (FIFO group), so no claim is needed, and a failed flush
    does not hold the gate shut for its own retry."""
    if not state.last_flush_at:
        return False
    last = datetime.fromisoformat(state.last_flush_at.replace("Z", "+00:00"))
    return now - last < timedelta(seconds=min_gap_seconds)


def run_post_turn_job(rt: Runtime, job: PostTurnJob) -> FlushOutcome:
    """The post-turn job: index the new turns for thread search, then flush them. Raises on
    retryable failures (the record is redelivered; both steps are idempotent)."""
    metrics.add_metric("PostTurnJobs", MetricUnit.Count, 1)
    user = User.from_id(job.user_id)
    session_id = validate_session_id(job.session_id)
    state = rt.table.get_session(user, session_id)
    if state is None:
        return FlushOutcome("no_session")
    upto = min(job.turn, state.turn)
    low = max(min(state.index_cursor, state.flush_cursor), job.after)
    if upto <= low:
        return FlushOutcome("nothing_new")
    end = min(upto, low + TURNS_PER_JOB)  # a big import goes in windows

    wanted = [turn_path(session_id, n) for n in range(low + 1, end + 1)]
    records: list[TurnRecord] = []
    for path, obj in rt.store.get_many(user, wanted).items():
        record = TurnRecord.parse_or_none(obj.content)
        if record is None:
            logger.warning("skipping a turn object that is not a turn", extra={"path": path})
        else:
            records.append(record)
    records.sort(key=lambda r: r.turn)

    indexed = 0
    if end > state.index_cursor:
        indexed = index_turns(rt, user, [r for r in records if r.turn > state.index_cursor])
        rt.table.advance_index_cursor(user, session_id, end)
    outcome = flush_turns(
        rt, job, user, state, [r for r in records if r.turn > state.flush_cursor], end
    )
    outcome.indexed = indexed
    if end < upto:  # the rest in a continuation job, in order behind this one
        rest = job.model_copy(update={"after": end, "queued_at": iso(rt.clock.now())})
        rt.queue.send_post_turn(user, rest)
    return outcome


def flush_turns(
    rt: Runtime,
    job: PostTurnJob,
    user: User,
    state: SessionState,
    records: list[TurnRecord],
    upto: int,
) -> FlushOutcome:
    """Extract the facts of ``records`` (the unflushed turns up to ``upto``) into the
    ledgers of their days, then move the flush cursor to ``upto``."""
    session_id = job.session_id
    if upto <= state.flush_cursor:
        return FlushOutcome("nothing_new")
    settings = rt.settings
    if job.reason != "compaction":
        if settings.disable_memory_hooks or settings.flush_trigger == "never":
            return FlushOutcome("skipped")
        if settings.flush_trigger == "throttled" and flush_throttled(
            state, rt.clock.now(), settings.flush_min_gap_seconds
        ):
            return FlushOutcome("throttled")

    outcome = FlushOutcome("flushed", turns=[r.turn for r in records])
    memory_md: str | None = None
    for day, group in groupby(records, key=lambda r: day_of(r.created(), settings.zone)):
        day_turns = list(group)
        for start in range(0, len(day_turns), TURNS_PER_CALL):
            chunk = day_turns[start : start + TURNS_PER_CALL]
            if memory_md is None:
                existing = rt.store.get(user, MEMORY_FILE)
                memory_md = existing.content if existing else ""
            facts = _flush_chunk(rt, user, session_id, day, chunk, memory_md)
            if facts:
                outcome.facts += facts
                if day not in outcome.days:
                    outcome.days.append(day)

    now = rt.clock.now()
    rt.table.advance_flush_cursor(user, session_id, upto, iso(now))
    if outcome.facts:
        rt.table.mark_consolidation_due(user, iso(now), settings.due_shards)
    metrics.add_metric("TurnsFlushed", MetricUnit.Count, len(outcome.turns))
    metrics.add_metric("FactsFlushed", MetricUnit.Count, outcome.facts)
    logger.info(
        "flushed",
        extra={"session_id": session_id, "turns": outcome.turns, "facts": outcome.facts},
    )
    return outcome


def _flush_chunk(
    rt: Runtime, user: User, session_id: str, day: str, chunk: list[TurnRecord], memory_md: str
) -> int:
    """Extract and append one chunk of one day's turns. Returns the facts appended."""
    path = ledger_path(day)
    current = rt.store.get(user, path)
    ledger = current.content if current else ""
    todo = [r for r in chunk if r.turn not in covered_turns(ledger, session_id)]
    if not todo:
        return 0

    answer = (
        rt.models.for_role("memory")
        .complete(
            ChatRequest(
                messages=flush_messages(render_conversation(todo), memory_md, ledger),
                purpose="flush",
            )
        )
        .message.content
    )
    bullets = clean_bullets(answer)  # raises ModelOutputError on a malformed answer
    if not bullets:
        return 0

    turns = tuple(r.turn for r in todo)

    def build(existing: str) -> str | None:
        # re-checked after every lost race: a concurrent duplicate may have landed
        if covered_turns(existing, session_id) & set(turns):
            return None
        return render_section(
            "Flush", rt.clock.now(), rt.settings.zone, bullets, Source(session_id, turns).render()
        )

    return len(bullets) if rt.store.append(user, path, build) else 0
