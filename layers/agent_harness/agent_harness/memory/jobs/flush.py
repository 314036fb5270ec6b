"""The post-turn job: index the session's new turns, extract their durable facts.

    PostTurnJob(user, session, turn N, reason)
      -> session item: flush cursor C, index cursor I, throttle gate   DynamoDB GetItem
      -> trigger (always | throttled:<gap> | on_compact | never, hooks switch);
         the user's memory budget spent today? -> tail mark at its renewal, no model call
           extract? throttled -> claim the session's gate              DynamoDB conditional
                     lost   -> tail mark (the tick flushes the rest)   DynamoDB
      -> turns min(C, I)+1..N (I+1..N when not extracting), 200 a run  S3 GETs (concurrent)
      -> index turns I+1..N into index/threads/YYYY-MM.jsonl          S3 CAS append
      -> per ledger day (the day of each turn, in the configured zone), 40 turns a call:
           skip turns a section already covers (source line)          idempotency
           the user's current facts most related to the turns          memory.jobs.related
             (every ledger once a job: cached, one LIST, GETs of changes)  S3 LIST, GETs
           a call per pass (memory.facts.flow, memory.jobs.extract):    LLM (memory role)
             the user's messages, shown facts of at least their authority -> [user]
             tool results (or imported assistant text), shown all     -> the lowest label
             the user's messages beside each lower level of facts     -> marks of that level
           its marks: only shown ids its authority may retire           lifecycle contract
           the owner's record (memory.owner.Memory.record):
             the gate on the text without marks; marks re-attached      memory.facts.gate
             held lines -> review/queue.jsonl                          S3 CAS (if any)
             append "## Flush — <time>" + source + "- [authority] fact"  S3 CAS append
      -> cursor := N (never backwards); user marked due                DynamoDB
      -> ranked-index snapshots of the months written (best effort)   S3 LIST, GET, PUT

Each turn is extracted once (the cursor), so the cost is linear in the session length;
the reference re-sent the whole context on every flush. A skipped or throttled flush
skips a model call, never a turn: the next flush starts at the cursor. A redelivered
job, a retry after a crash between append and cursor, or a duplicate job never writes
a fact twice: the source lines say what is already there. A model failure raises
before anything is appended for that day and gives the throttle slot back, so the job
is retried and nothing is half-written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import groupby
from typing import TYPE_CHECKING, Literal

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.clock import epoch_ms, iso
from agent_harness.ids import User, validate_session_id
from agent_harness.jobs import PostTurnJob
from agent_harness.keys import shard_name
from agent_harness.memory.engine.corpus import refresh_snapshots
from agent_harness.memory.facts.flow import flush_passes
from agent_harness.memory.facts.ledger import Source, covered_turns, day_of
from agent_harness.memory.jobs.extract import extract, retire_below
from agent_harness.memory.jobs.related import load_ledger_files
from agent_harness.memory.owner import Memory
from agent_harness.memory.threads import index_turns
from agent_harness.memory.vectors import refresh_best_effort
from agent_harness.paths import MEMORY_FILE, SEGMENT_DIR, ledger_path, segment_path, turn_path
from agent_harness.records import TurnRecord
from agent_harness.usage import memory_budget_exhausted, renewal

if TYPE_CHECKING:
    from agent_harness.memory.engine.file_index import FileIndex
    from agent_harness.memory.facts.gate import Candidate
    from agent_harness.memory.facts.lifecycle import Marks
    from agent_harness.ports import GateClaim, SessionState
    from agent_harness.runtime import Runtime
    from agent_harness.settings import Settings

__all__ = [
    "FlushOutcome",
    "extracts",
    "flush_throttled",
    "flush_turns",
    "run_post_turn_job",
    "sweep_flush_tails",
]

logger = Logger(child=True)
metrics = Metrics()

#: at most this many turns go to the model in one flush call
TURNS_PER_CALL = 40
#: at most this many turns per job run; the rest goes to a continuation job
TURNS_PER_JOB = 200

Status = Literal["flushed", "nothing_new", "skipped", "throttled", "over_budget", "no_session"]


@dataclass
class FlushOutcome:
    status: Status
    turns: list[int] = field(default_factory=list)
    days: list[str] = field(default_factory=list)
    facts: int = 0
    indexed: int = 0  # thread-search entries added


def extracts(settings: Settings, reason: str) -> bool:
    """Does a job of this reason run the memory model under the configured trigger?

    ``never`` extracts nothing; a compaction flushes whatever else is configured; with
    memory hooks disabled nothing else does; an import flushes its history at once; a
    turn (or a tail sweep) flushes under ``always`` and ``throttled``, not ``on_compact``.
    """
    mode = settings.trigger.mode
    if mode == "never":
        return False
    if reason == "compaction":
        return True
    if settings.disable_memory_hooks:
        return False
    return reason == "import" or mode != "on_compact"


def flush_throttled(state: SessionState, now: datetime, settings: Settings) -> bool:
    """Will a turn's job find the session's throttle gate closed? (The turn reports it;
    the job itself claims the gate with a conditional write.)"""
    trigger = settings.trigger
    if trigger.mode != "throttled" or state.flush_gate_ms is None:
        return False
    return epoch_ms(now) - state.flush_gate_ms < trigger.gap_seconds * 1000


def run_post_turn_job(rt: Runtime, job: PostTurnJob) -> FlushOutcome:
    """The post-turn job: index the new turns for thread search, then flush them. Raises on
    retryable failures (the record is redelivered; both steps are idempotent)."""
    metrics.add_metric("PostTurnJobs", MetricUnit.Count, 1)
    user = User.from_id(job.user_id)
    session_id = validate_session_id(job.session_id)
    state = rt.table.get_session(user, session_id)
    if state is None:
        return FlushOutcome("no_session")
    upto = min(job.turn, state.turn) if job.reason != "tail" else state.turn
    if job.reason == "tail" and (upto <= state.flush_cursor or not extracts(rt.settings, "tail")):
        # a tail job with nothing to flush (done meanwhile, or the trigger changed since)
        rt.table.clear_flush_due(user, session_id)
    if upto <= min(state.index_cursor, state.flush_cursor):
        return FlushOutcome("nothing_new")

    # decide before reading: a job that will not extract reads only the unindexed turns
    status: Status = "flushed"
    claim: GateClaim | None = None
    if upto <= state.flush_cursor:
        status = "nothing_new"
    elif not extracts(rt.settings, job.reason):
        status = "skipped"
    elif memory_budget_exhausted(rt, user):
        # the cursor stays: the turns are flushed by a tail job once the budget renews
        status = "over_budget"
        rt.table.mark_flush_due(user, session_id, iso(renewal(rt)), rt.settings.due_shards)
        metrics.add_metric("MemoryBudgetExhausted", MetricUnit.Count, 1)
    elif rt.settings.trigger.mode == "throttled" and job.reason in ("turn", "tail"):
        claim = _claim_gate(rt, user, session_id)
        if not claim.claimed:
            status = "throttled"
    extract = status == "flushed"

    floor = min(state.index_cursor, state.flush_cursor) if extract else state.index_cursor
    low = max(floor, job.after)
    end = min(upto, low + TURNS_PER_JOB)  # a big import goes in windows
    try:
        records = _read_turns(rt, user, session_id, low, end)
        indexed = 0
        if end > state.index_cursor:
            indexed = index_turns(rt, user, [r for r in records if r.turn > state.index_cursor])
            rt.table.advance_index_cursor(user, session_id, end)
        if extract:
            outcome = flush_turns(
                rt,
                job,
                user,
                state,
                [r for r in records if r.turn > state.flush_cursor],
                end,
                complete=end >= state.turn,
            )
        else:
            outcome = FlushOutcome(status)
    except Exception:
        if claim is not None and claim.claimed:
            rt.table.release_flush_gate(user, session_id, claim)  # the retry is not throttled
        raise
    outcome.indexed = indexed
    _refresh_written(rt, user, records, outcome)
    if end < upto:  # the rest in a continuation job, in order behind this one
        rest = job.model_copy(update={"after": end, "queued_at": iso(rt.clock.now())})
        rt.queue.send_post_turn(user, rest)
    return outcome


def _refresh_written(
    rt: Runtime, user: User, records: list[TurnRecord], outcome: FlushOutcome
) -> None:
    """Refresh the ranked-index snapshots of what was written: the days this job flushed
    into, the months it indexed, and the days its turns called memory_save in (the save
    wrote the ledger during the turn)."""
    zone = rt.settings.zone
    saved = {
        day_of(r.created(), zone)
        for r in records
        if any(c.name == "memory_save" for m in r.messages for c in m.tool_calls)
    }
    paths = {ledger_path(day) for day in {*outcome.days, *saved}}
    if outcome.indexed:
        paths |= {segment_path(r.created().astimezone(zone)) for r in records}
    if paths:
        refresh_snapshots(rt, user, paths)
    months = {p for p in paths if p.startswith(SEGMENT_DIR)}
    refresh_best_effort(rt, user, memory=bool(outcome.days or saved), months=months)


def _claim_gate(rt: Runtime, user: User, session_id: str) -> GateClaim:
    """Claim the session's throttle slot; when it is taken, leave a tail mark for the time
    it reopens, so the session's last turns get a flush even if no turn follows."""
    settings = rt.settings
    gap_ms = int(settings.trigger.gap_seconds * 1000)
    now_ms = epoch_ms(rt.clock.now())
    claim = rt.table.claim_flush_gate(user, session_id, now_ms, gap_ms)
    if not claim.claimed:
        reopens = (claim.held_ms if claim.held_ms is not None else now_ms) + gap_ms
        due = datetime.fromtimestamp(reopens / 1000, tz=UTC)
        rt.table.mark_flush_due(user, session_id, iso(due), settings.due_shards)
        metrics.add_metric("FlushesThrottled", MetricUnit.Count, 1)
    return claim


def _read_turns(rt: Runtime, user: User, session_id: str, low: int, end: int) -> list[TurnRecord]:
    wanted = [turn_path(session_id, n) for n in range(low + 1, end + 1)]
    records: list[TurnRecord] = []
    for path, obj in rt.store.get_many(user, wanted).items():
        record = TurnRecord.parse_or_none(obj.content)
        if record is None:
            logger.warning("skipping a turn object that is not a turn", extra={"path": path})
        else:
            records.append(record)
    records.sort(key=lambda r: r.turn)
    return records


def sweep_flush_tails(rt: Runtime) -> int:
    """Schedule tick: queue a "tail" post-turn job for every session whose trailing turns
    wait behind a throttle gate that has reopened. Sparse GSI query, never a scan."""
    now = iso(rt.clock.now())
    sent = 0
    for shard in range(rt.settings.due_shards):
        for due in rt.table.query_flush_due(shard_name("flush", shard), now):
            if due.turn < 1:
                continue
            job = PostTurnJob(
                user_id=due.user_id,
                session_id=due.session_id,
                turn=due.turn,
                reason="tail",
                queued_at=now,
            )
            rt.queue.send_post_turn(User.from_id(due.user_id), job)
            sent += 1
    metrics.add_metric("FlushTailsQueued", MetricUnit.Count, sent)
    return sent


def flush_turns(
    rt: Runtime,
    job: PostTurnJob,
    user: User,
    state: SessionState,
    records: list[TurnRecord],
    upto: int,
    *,
    complete: bool = False,
) -> FlushOutcome:
    """Extract the facts of ``records`` (the unflushed turns up to ``upto``) into the
    ledgers of their days, then move the flush cursor to ``upto`` (``complete``: that is
    the session's last turn, so its tail mark goes too)."""
    session_id = job.session_id
    if upto <= state.flush_cursor:
        return FlushOutcome("nothing_new")
    settings = rt.settings
    outcome = FlushOutcome("flushed", turns=[r.turn for r in records])
    memory_md: str | None = None
    ledgers: list[tuple[str, FileIndex]] | None = None
    for day, group in groupby(records, key=lambda r: day_of(r.created(), settings.zone)):
        day_turns = list(group)
        for start in range(0, len(day_turns), TURNS_PER_CALL):
            chunk = day_turns[start : start + TURNS_PER_CALL]
            if memory_md is None:
                existing = rt.store.get(user, MEMORY_FILE)
                memory_md = existing.content if existing else ""
            if ledgers is None:
                ledgers = load_ledger_files(rt, user)
            facts = _flush_chunk(rt, user, session_id, day, chunk, memory_md, ledgers)
            if facts:
                outcome.facts += facts
                if day not in outcome.days:
                    outcome.days.append(day)

    now = rt.clock.now()
    rt.table.advance_flush_cursor(user, session_id, upto, iso(now), clear_due=complete)
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
    rt: Runtime,
    user: User,
    session_id: str,
    day: str,
    chunk: list[TurnRecord],
    memory_md: str,
    ledgers: list[tuple[str, FileIndex]],
) -> int:
    """Extract and append one chunk of one day's turns (shown the current facts of
    ``ledgers`` most related to them). Returns the facts appended."""
    path = ledger_path(day)
    current = rt.store.get(user, path)
    ledger = current.content if current else ""
    todo = [r for r in chunk if r.turn not in covered_turns(ledger, session_id)]
    if not todo:
        return 0

    model = rt.models.for_role("memory")
    candidates: list[tuple[Candidate, Marks]] = []
    for flush_pass in flush_passes(todo):
        found, below = extract(rt, user, day, ledger, memory_md, ledgers, flush_pass)
        if flush_pass.trusted and found and below:
            found = retire_below(rt, user, day, flush_pass, found, below)
        candidates += found
    # the owner's pipeline: the gate, held lines queued, then the ledger's CAS append
    source = Source(session_id, tuple(r.turn for r in todo), model.name)
    return Memory(rt, user).record(candidates, day=day, source=source)
