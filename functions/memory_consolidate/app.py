"""memory_consolidate: two event sources, one job.

EventBridge schedule tick -> one ConsolidationJob per due user, and a tail flush job
                            per throttled session whose gate has reopened
ConsolidationQueue batch  -> consolidate each user (partial batch failures)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)

from agent_harness.jobs import ConsolidationJob
from agent_harness.runtime import Runtime
from agent_harness.settings import Settings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger()
metrics = Metrics()
runtime = Runtime.from_settings(Settings.from_env())
processor = BatchProcessor(event_type=EventType.SQS)


def record_handler(record: SQSRecord) -> str:
    from agent_harness.memory.jobs.consolidate import consolidate  # with the first job

    job = ConsolidationJob.model_validate_json(record.body)
    return consolidate(runtime, job).status


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(
    event: dict[str, Any], context: LambdaContext
) -> PartialItemFailureResponse | dict[str, int]:
    runtime.deadline.start(context)
    if "Records" in event:
        return process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )
    if event.get("detail-type") == "Scheduled Event":
        from agent_harness.memory.jobs.schedule import tick  # with the first tick

        return tick(runtime)
    raise ValueError("unsupported event: expected an SQS batch or an EventBridge schedule tick")
