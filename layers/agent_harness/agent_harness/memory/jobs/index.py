"""What a write outside a turn leaves for later: its memory's vectors, derived off the
request path.

    index_later(rt, owner)   a save, an edit or a rollback through the API (or MCP):
                             an IndexJob on FlushQueue in the owner's group, after the
                             writes before it; nothing when embeddings are off
    run_index_job(rt, job)   memory_flush, for that job: the owner's vectors refreshed

A turn's writes are indexed by its own post-turn job, a consolidation's by the
consolidation. Until the job runs (or if queueing it failed: logged and counted,
``IndexJobsUnsent``), ranked search embeds the few newest lines it lacks on its own
(``memory.vectors.lines_by_meaning``), so a save is found by meaning at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.clock import iso
from agent_harness.errors import HarnessError
from agent_harness.ids import User
from agent_harness.jobs import IndexJob
from agent_harness.memory.vectors import refresh_best_effort

if TYPE_CHECKING:
    from agent_harness.runtime import Runtime

__all__ = ["index_later", "run_index_job"]

logger = Logger(child=True)
metrics = Metrics()


def index_later(rt: Runtime, owner: User) -> None:
    """Queue ``owner``'s index job (see the module). Never fails the write it follows."""
    if rt.embeddings() is None:
        return
    job = IndexJob(
        user_id=owner.id,
        scope=owner.id if owner.is_scope else None,
        queued_at=iso(rt.clock.now()),
    )
    try:
        rt.queue.send_index(owner, job)
    except HarnessError as exc:
        metrics.add_metric("IndexJobsUnsent", MetricUnit.Count, 1)
        logger.warning("index job not queued", extra={"error": str(exc)})


def run_index_job(rt: Runtime, job: IndexJob) -> str:
    """The job's memory's vectors refreshed (best effort: a failure is counted and the
    next refresh catches up). Returns the outcome word the handler logs."""
    metrics.add_metric("IndexJobs", MetricUnit.Count, 1)
    owner = User.for_scope(job.scope) if job.scope else User.from_id(job.user_id)
    refresh_best_effort(rt, owner)
    return "indexed"
