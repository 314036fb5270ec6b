"""agent_call: the HTTP API. Route -> one agent_harness call -> JSON response.

Module scope builds only cheap things (validated settings, boto3 clients, the router) and
warns and counts a cold start of a dev-mode stack; models, tokenizer files and
secrets load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging import correlation_paths

from agent_harness.api.routes import announce_cold_start, build_app
from agent_harness.runtime import Runtime
from agent_harness.settings import Settings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger()
metrics = Metrics()
settings = Settings.from_env()
announce_cold_start(settings)
runtime = Runtime.from_settings(settings)
app = build_app(runtime)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    runtime.deadline.start(context)  # model calls end in time to answer and release
    return app.resolve(event, context)
