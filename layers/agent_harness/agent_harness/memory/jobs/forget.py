"""Forget a user entirely (DELETE /v1/memory, the operator CLI's ``forget``).

    S3: every version and delete marker under users/<key>/    ListObjectVersions + DeleteObjects
        (MEMORY.md and its snapshots, ledgers, archive, thread logs, working contexts,
         evicted tool results, thread-search segments)
    DynamoDB: every item of the user's partition              Query + BatchWriteItem
        (sessions, leases, cursors, throttle gates, watermark, due marks)
    S3 again: anything a call already in flight wrote meanwhile

Jobs still queued for the user find no session or nothing to merge and do nothing (a
consolidation job removes the user item its own lease created). Powertools idempotency
records hold a job hash and an outcome word, no user data, and expire within hours.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

if TYPE_CHECKING:
    from agent_harness.ids import User
    from agent_harness.runtime import Runtime

__all__ = ["ForgetOutcome", "forget_user"]

logger = Logger(child=True)
metrics = Metrics()


@dataclass(frozen=True)
class ForgetOutcome:
    object_versions: int
    items: int


def forget_user(rt: Runtime, user: User) -> ForgetOutcome:
    versions = rt.store.purge(user)
    items = rt.table.purge_user(user)
    versions += rt.store.purge(user)
    metrics.add_metric("UsersForgotten", MetricUnit.Count, 1)
    logger.info("user forgotten", extra={"object_versions": versions, "items": items})
    return ForgetOutcome(versions, items)
