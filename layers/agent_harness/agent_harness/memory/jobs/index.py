"""What a write outside a turn leaves for later: its memory's vectors, derived off the
request path.

    index_later(rt, owner)   a write outside a turn (a save, an edit or a rollback, an
                             approval): an IndexJob on FlushQueue in the owner's group,
                             after the writes before it; nothing when embeddings are
                             off, nor for a shared scope (its consolidation indexes it)
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
    """Queue ``owner``'s index job (see the module). Never fails the write it follows.
    A shared scope's memory is indexed by its consolidation instead: memory_flush may
    read and write users' prefixes only (its role: least privilege), and a scope is
    consolidated on the schedule like a user."""
    if rt.embeddings() is None or owner.is_scope:
        return
    job = IndexJob(user_id=owner.id, queued_at=iso(rt.clock.now()))
    try:
        rt.queue.send_index(owner, job)
    except HarnessError as exc:
        metrics.add_metric("IndexJobsUnsent", MetricUnit.Count, 1)
        logger.warning("index job not queued", extra={"error": str(exc)})


def run_index_job(rt: Runtime, job: IndexJob) -> str:
    """The job's memory's vectors refreshed (best effort: a failure is counted and the
    next refresh catches up). Returns the outcome word the handler logs."""
    metrics.add_metric("IndexJobs", MetricUnit.Count, 1)
    refresh_best_effort(rt, User.from_id(job.user_id))
    return "indexed"
