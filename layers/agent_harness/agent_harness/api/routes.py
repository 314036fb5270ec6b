"""The HTTP API v1 (docs/api.md) on Powertools' ``APIGatewayHttpResolver``.

The app is assembled here from one ``Router`` per resource (sessions, memory, the
protocols other agents speak). Each route: identity -> validated input -> one service
call -> JSON. Errors are mapped in one place (``HarnessError`` -> its status and
``{"error": {"code", "message"}}``). Each route imports its service when first used:
importing the handler stays cheap (a health check never loads the agent loop), and a
container pays each import once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.api.http import json_response
from agent_harness.api.memory_routes import memory_routes
from agent_harness.api.protocol_routes import protocol_routes
from agent_harness.api.scope_routes import scope_routes
from agent_harness.api.session_routes import session_routes
from agent_harness.errors import HarnessError, NotFoundError

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import Response
    from aws_lambda_powertools.event_handler.exceptions import NotFoundError as RouteNotFound

    from agent_harness.runtime import Runtime
    from agent_harness.settings import Settings

__all__ = ["announce_cold_start", "build_app"]

logger = Logger(child=True)
metrics = Metrics()


def announce_cold_start(settings: Settings) -> None:
    """What a container says once, when it starts: in dev mode any valid token may act as
    any user, so every cold start warns and counts ``DevModeColdStarts``."""
    if settings.auth_mode == "dev":
        logger.warning("HARNESS_AUTH_MODE=dev: the X-User-Id header is trusted as the user id")
        metrics.add_metric("DevModeColdStarts", MetricUnit.Count, 1)


def build_app(rt: Runtime) -> APIGatewayHttpResolver:
    """All routes, bound to one ``Runtime``."""
    app = APIGatewayHttpResolver()

    @app.exception_handler(HarnessError)  # type: ignore[untyped-decorator]  # Powertools' is unannotated
    def harness_error(exc: HarnessError) -> Response[str]:
        if exc.status >= 500:
            logger.warning("request failed", extra={"code": exc.code, "error": exc.message})
        return json_response(exc.status, exc.to_body(), exc.response_headers())

    @app.exception_handler(Exception)  # type: ignore[untyped-decorator]  # Powertools' is unannotated
    def unexpected_error(exc: Exception) -> Response[str]:
        # a bug: keep the error contract, log the traceback, show nothing internal
        logger.exception("unhandled error")
        return json_response(500, HarnessError("internal error").to_body())

    @app.not_found
    def route_not_found(_: RouteNotFound) -> Response[str]:
        return json_response(404, NotFoundError("no such route").to_body())

    @app.get("/health")
    def health() -> Response[str]:
        return json_response(200, {"status": "ok"})

    @app.get("/v1/openapi.json")
    def openapi() -> Response[str]:
        """The API's OpenAPI document (no identity needed: it holds no user data)."""
        from agent_harness.api.openapi import openapi_document

        return json_response(200, openapi_document())

    app.include_router(session_routes(rt))
    app.include_router(memory_routes(rt))
    app.include_router(scope_routes(rt))
    app.include_router(protocol_routes(rt))
    return app
