"""Powertools Idempotency for queue jobs, on the state table.

A post-turn job redelivered by SQS (visibility timeout, a retried batch) or sent twice
runs once: the first run leaves a record keyed by the job's hash, and a repeat within
``expires_after_seconds`` returns the recorded outcome without touching S3, DynamoDB
or the model. While a run is in progress its record also keeps a second delivery of
the same job from running beside it (Powertools raises, the record is retried later);
the in-progress mark expires with the Lambda's remaining time, so a crashed run never
blocks its retry. A run that raises leaves no record, so the retry runs in full.

This is the first line; the flush cursor and the ledger's source lines are the second:
they make overlapping jobs with different bodies (and anything past the record's
expiry) idempotent too.

Records live in the state table in the job's user partition, ``pk = U#<user key>``,
``sk = <function>#<hash>`` (so load spreads over users and forget-user deletes them
with the rest), and expire through the table's TTL attribute. They hold a hash and an
outcome word, no user content.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.ids import User
from agent_harness.keys import user_pk

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

    from agent_harness.jobs import PostTurnJob
    from agent_harness.runtime import Runtime

__all__ = ["IdempotentPostTurn"]

metrics = Metrics()

#: how long a finished job's outcome answers its repeats
RECORD_SECONDS = 6 * 3600


class IdempotentPostTurn:
    """``process(job) -> status``: ``run_post_turn_job`` behind a Powertools idempotency
    record. The handler calls ``register_lambda_context`` per invocation. Powertools'
    idempotency package is imported on first use, not at cold start."""

    def __init__(self, rt: Runtime, dynamodb_client: Any | None = None) -> None:
        self._rt = rt
        self._client = dynamodb_client
        self._config: IdempotencyConfig | None = None

    @property
    def config(self) -> IdempotencyConfig:
        if self._config is None:
            from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

            self._config = IdempotencyConfig(expires_after_seconds=RECORD_SECONDS)
        return self._config

    def register_lambda_context(self, context: Any) -> None:
        self.config.register_lambda_context(context)

    def _run(self, job: PostTurnJob) -> str:
        # the flush and its modules load with the first job, not with the container
        from agent_harness.memory.jobs.flush import run_post_turn_job

        status = run_post_turn_job(self._rt, job).status
        if status == "no_session":
            raise _NoSession  # Powertools deletes the record: nothing of a forgotten user
        return status

    def __call__(self, job: PostTurnJob) -> str:
        from aws_lambda_powertools.utilities.idempotency import (
            DynamoDBPersistenceLayer,
            idempotent_function,
        )

        # PostTurnJobs (counted inside) vs this: the repeats the record answered
        metrics.add_metric("PostTurnDeliveries", MetricUnit.Count, 1)
        persistence = DynamoDBPersistenceLayer(
            table_name=self._rt.settings.table,
            key_attr="pk",
            sort_key_attr="sk",
            static_pk_value=user_pk(User.from_id(job.user_id).key),
            expiry_attr="expires_at",
            boto3_client=self._client or self._rt.clients["dynamodb"],
        )
        process = idempotent_function(
            data_keyword_argument="job", persistence_store=persistence, config=self.config
        )(self._run)
        try:
            return str(process(job=job))
        except _NoSession:
            return "no_session"


class _NoSession(Exception):
    """The job's session does not exist (never did, or its user was forgotten)."""
