"""agent_call: the HTTP API. Route -> one agent_harness call -> JSON response.

Module scope builds only cheap things (validated settings, boto3 clients, the router) and
warns and counts a cold start of a dev-mode stack; models, tokenizer files and
secrets load on first use. Under SnapStart (the template's ``SnapStart``), the first
turn's modules and the tokenizer are loaded before the snapshot instead, and a restore
gets new clients and randomness (agent_harness.snapstart).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging import correlation_paths

from agent_harness.api.routes import announce_cold_start, build_app
from agent_harness.runtime import Runtime
from agent_harness.settings import Settings
from agent_harness.snapstart import install as install_snapstart_hooks

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger()
metrics = Metrics()
settings = Settings.from_env()
announce_cold_start(settings)
runtime = Runtime.from_settings(settings)
app = build_app(runtime)
#: what a first turn imports: under SnapStart, loaded before the snapshot (paid once, at
#: publish), and restores start with them (agent_harness.snapstart)
FIRST_TURN = (
    "agent_harness.agent.turn",
    "agent_harness.api.openai_compat",
    "agent_harness.api.responses",
    "agent_harness.api.schemas",
    "agent_harness.memory.files",
    "agent_harness.memory.search",
)
install_snapstart_hooks(runtime, FIRST_TURN)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    runtime.deadline.start(context)  # model calls end in time to answer and release
    return app.resolve(event, context)
