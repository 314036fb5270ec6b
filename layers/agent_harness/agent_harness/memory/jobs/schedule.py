"""The consolidation's schedule: which users are due and when.

schedule tick   fan_out: one ConsolidationJob per due user whose last run is older
                than the minimum gap and whose backoff has passed (a failed run
                moves its due mark to the retry time: retry_after); users whose
                next ``until`` passed are marked due (sweep_expiries); throttled
                sessions' tails flushed
POST /v1/memory/consolidate   request_consolidation: a forced job (no gap, no
                backoff: a person asked)
after a run     next_expiry: when MEMORY.md must drop the soonest expiring fact
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.clock import iso
from agent_harness.ids import User
from agent_harness.jobs import ConsolidationJob
from agent_harness.keys import shard_name
from agent_harness.memory.jobs.flush import sweep_flush_tails

if TYPE_CHECKING:
    from agent_harness.memory.engine.truth import Truth
    from agent_harness.runtime import Runtime

__all__ = [
    "RETRY_AFTER",
    "RETRY_AT_MOST",
    "fan_out",
    "forced_job",
    "next_expiry",
    "parse_time",
    "request_consolidation",
    "retry_after",
    "sweep_expiries",
    "tick",
]

logger = Logger(child=True)
metrics = Metrics()


def parse_time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def forced_job(rt: Runtime, user: User) -> ConsolidationJob:
    """A consolidation of ``user`` that ignores the minimum gap (asked for by a person)."""
    return ConsolidationJob(
        user_id=user.id,
        scope=user.id if user.is_scope else None,
        force=True,
        requested_at=iso(rt.clock.now()),
    )


def request_consolidation(rt: Runtime, user: User) -> ConsolidationJob:
    """Queue a forced consolidation of ``user`` (POST /v1/memory/consolidate)."""
    job = forced_job(rt, user)
    rt.queue.send_consolidation([job])
    return job


def fan_out(rt: Runtime) -> int:
    """Schedule tick: one job per due user whose last run is older than the minimum gap."""
    metrics.add_metric("ConsolidationTicks", MetricUnit.Count, 1)
    now = rt.clock.now()
    gap = timedelta(seconds=rt.settings.consolidation_min_gap_seconds)
    jobs: list[ConsolidationJob] = []
    for shard in range(rt.settings.due_shards):
        for due in rt.table.query_due(shard_name("due", shard)):
            last = parse_time(due.last_consolidated_at)
            if last is not None and now - last < gap:
                continue
            if due.due_at and due.due_at > iso(now):
                continue  # a failed run's backoff: due again at due_at
            user = User.from_key(due.user_key)  # a shared scope's owner, or a user
            scope = user.id if user.is_scope else None
            jobs.append(ConsolidationJob(user_id=user.id, scope=scope, requested_at=iso(now)))
    rt.queue.send_consolidation(jobs)
    metrics.add_metric("ConsolidationJobsQueued", MetricUnit.Count, len(jobs))
    logger.info("consolidation fan-out", extra={"jobs": len(jobs)})
    return len(jobs)


def tick(rt: Runtime) -> dict[str, int]:
    """The scheduled event: fan out consolidations, mark due the users a fact of whose
    expired (the next tick consolidates them), flush throttled sessions' tails."""
    expired = sweep_expiries(rt)
    return {"queued": fan_out(rt), "expired": expired, "flush_tails": sweep_flush_tails(rt)}


def sweep_expiries(rt: Runtime) -> int:
    """Users whose next ``until`` has passed: marked due, their expiry mark cleared (the
    consolidation that drops the fact sets the next one)."""
    now = iso(rt.clock.now())
    swept = 0
    for shard in range(rt.settings.due_shards):
        for due in rt.table.query_expiry_due(shard_name("expire", shard), now):
            user = User.from_key(due.user_key)
            rt.table.mark_consolidation_due(user, now, rt.settings.due_shards)
            rt.table.clear_expiry_due(user)
            swept += 1
    return swept


def next_expiry(truth: Truth, today: str) -> str | None:
    """The day after the soonest ``until`` of a current fact not yet passed: when the
    consolidation must run again for MEMORY.md to drop it."""
    days = [
        f.marks.until
        for f in truth.life.facts.values()
        if f.marks.until and f.marks.until >= today and truth.status(f).state == "current"
    ]
    if not days:
        return None
    return (date.fromisoformat(min(days)) + timedelta(days=1)).isoformat()


#: the schedule's wait after the first failed run, doubled after each one, at most a day
RETRY_AFTER = timedelta(minutes=15)
RETRY_AT_MOST = timedelta(days=1)


def retry_after(failures: int) -> timedelta:
    """How long the schedule waits after the ``failures``-th failed run in a row."""
    wait: timedelta = RETRY_AFTER * 2 ** max(failures - 1, 0)
    return min(wait, RETRY_AT_MOST)
