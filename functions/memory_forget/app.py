"""memory_forget: forget one user entirely, for the agent function's `DELETE /v1/memory`.

The agent function faces the internet and runs tools; it holds no right to delete an
object version for good or to batch-delete the table's items. This function holds them,
has no trigger of its own and is invoked synchronously by the agent function alone
(docs/deploy.md#permissions). Event: ``{"user_id"}``; answer: what was removed, in counts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics

from agent_harness.ids import User
from agent_harness.memory.jobs.forget import forget_user
from agent_harness.runtime import Runtime
from agent_harness.settings import Settings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger()
metrics = Metrics()
runtime = Runtime.from_settings(Settings.from_env())


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    runtime.deadline.start(context)
    user_id = event.get("user_id") if isinstance(event, dict) else None
    if not isinstance(user_id, str) or not user_id:
        raise ValueError('unsupported event: expected {"user_id": "<the user to forget>"}')
    return forget_user(runtime, User.from_id(user_id)).to_json()
