"""memory_flush: FlushQueue (FIFO, group = user) -> one job per record: a post-turn job
(index the new turns for thread search, then flush their facts into the ledger), or an
index job (the vectors of a write made outside a turn).

Partial batch failures: a failed record and the rest of its user's group are retried
(order per user is kept); other users' records in the batch still complete. Each job
runs once per body (Powertools Idempotency on the state table).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.batch import (
    SqsFifoPartialProcessor,
    process_partial_response,
)

from agent_harness.jobs import IndexJob, flush_queue_job
from agent_harness.memory.jobs.idempotency import IdempotentPostTurn
from agent_harness.runtime import Runtime
from agent_harness.settings import Settings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger()
metrics = Metrics()
runtime = Runtime.from_settings(Settings.from_env())
process_job = IdempotentPostTurn(runtime)
processor = SqsFifoPartialProcessor(skip_group_on_error=True)


def record_handler(record: SQSRecord) -> str:
    job = flush_queue_job(record.body)
    if isinstance(job, IndexJob):
        from agent_harness.memory.jobs.index import run_index_job

        return run_index_job(runtime, job)
    return process_job(job)


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    runtime.deadline.start(context)
    process_job.register_lambda_context(context)
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
