"""The HTTP API v1 (DESIGN §4) on Powertools' ``APIGatewayHttpResolver``.

Each route: identity -> validated input -> one library call -> JSON. Errors are mapped
in one place (``HarnessError`` -> its status and ``{"error": {"code", "message"}}``).
Identity is the authorizer's ``sub`` claim, or ``X-User-Id`` in dev mode; never the body.
Each route imports its service when first used: importing the handler stays cheap (a
health check never loads the agent loop), and a container pays each import once.
"""

from __future__ import annotations

import binascii
import json
from typing import TYPE_CHECKING, Any, TypeVar

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, ValidationError

from agent_harness.api.schemas import (
    MemoryPutBody,
    MemorySaveBody,
    MessageBody,
    RollbackBody,
    SearchBody,
)
from agent_harness.clock import iso
from agent_harness.errors import (
    HarnessError,
    InvalidRequestError,
    NotFoundError,
    PayloadTooLargeError,
    UnauthorizedError,
    ValidationFailedError,
)
from agent_harness.ids import User, validate_session_id
from agent_harness.memory import files

if TYPE_CHECKING:
    from collections.abc import Callable

    from aws_lambda_powertools.event_handler.exceptions import NotFoundError as RouteNotFound

    from agent_harness.agent.turn import TurnResult
    from agent_harness.runtime import Runtime

__all__ = ["build_app"]

logger = Logger(child=True)
metrics = Metrics()
B = TypeVar("B", bound=BaseModel)


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    metrics.add_metric(f"Responses{status // 100}xx", MetricUnit.Count, 1)
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=json.dumps(body, ensure_ascii=False),
        headers=headers or {},
    )


def _usage(result: TurnResult) -> dict[str, object]:
    """Tokens of every model call of the turn (the providers' own counts), with the
    split by role; ``memory_tokens`` is the MEMORY.md part of the agent's input."""
    total = result.usage + result.compaction_usage
    return {
        "input_tokens": total.input_tokens,
        "output_tokens": total.output_tokens,
        "memory_tokens": result.memory_tokens,
        "by_role": {
            "agent": result.usage.model_dump(),
            "compaction": result.compaction_usage.model_dump(),
        },
    }


def build_app(rt: Runtime) -> APIGatewayHttpResolver:
    """All routes, bound to one ``Runtime``."""
    app = APIGatewayHttpResolver()

    # -- plumbing -----------------------------------------------------------
    def header(name: str) -> str | None:
        value = app.current_event.headers.get(name)  # case-insensitive in Powertools v3
        return value or None

    def current_user() -> User:
        if rt.settings.auth_mode == "dev":
            user_id = header("x-user-id")
            if not user_id:
                raise UnauthorizedError("dev mode: send the user id in the X-User-Id header")
        else:
            claims = app.current_event.request_context.authorizer.jwt_claim or {}
            user_id = claims.get("sub")
            if not user_id:
                raise UnauthorizedError("no authenticated user (the JWT has no 'sub' claim)")
        if len(str(user_id)) > rt.settings.max_user_id_chars:
            raise UnauthorizedError(
                f"unusable user id: longer than {rt.settings.max_user_id_chars} characters"
            )
        try:
            return User.from_id(str(user_id))
        except InvalidRequestError as exc:
            raise UnauthorizedError(f"unusable user id: {exc.message}") from exc

    def session(session_id: str) -> str:
        """A session id from the path: the id rules, and the configured length cap."""
        return validate_session_id(session_id, rt.settings.max_session_id_chars)

    def raw_body() -> str:
        try:
            return app.current_event.decoded_body or ""
        except (UnicodeDecodeError, binascii.Error) as exc:
            raise InvalidRequestError("the body is not valid UTF-8 text") from exc

    def body(model: type[B]) -> B:
        raw = raw_body()
        if not raw:
            raise InvalidRequestError("a JSON body is required")
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
            raise InvalidRequestError("the body is not valid JSON") from exc
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            details = [
                {"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()
            ]
            raise ValidationFailedError("the body failed validation", details=details) from exc

    def int_query(name: str, default: int, low: int, high: int) -> int:
        raw = app.current_event.get_query_string_value(name)
        if raw is None:
            return default
        if not raw.isdigit() or not low <= int(raw) <= high:
            raise ValidationFailedError(f"query parameter {name} must be an integer {low}-{high}")
        return int(raw)

    @app.exception_handler(HarnessError)
    def harness_error(exc: HarnessError) -> Response:
        if exc.status >= 500:
            logger.warning("request failed", extra={"code": exc.code, "error": exc.message})
        return _json(exc.status, exc.to_body(), exc.headers())

    @app.exception_handler(Exception)
    def unexpected_error(exc: Exception) -> Response:
        # a bug: keep the error contract, log the traceback, show nothing internal
        logger.exception("unhandled error")
        return _json(500, HarnessError("internal error").to_body())

    @app.not_found
    def route_not_found(_: RouteNotFound) -> Response:
        return _json(404, NotFoundError("no such route").to_body())

    # -- routes -------------------------------------------------------------
    @app.get("/health")
    def health() -> Response:
        return _json(200, {"status": "ok"})

    @app.get("/v1/openapi.json")
    def openapi() -> Response:
        """The API's OpenAPI document (no identity needed: it holds no user data)."""
        from agent_harness.api.openapi import openapi_document

        return _json(200, openapi_document())

    @app.post("/v1/sessions/<session_id>/messages")
    def post_message(session_id: str) -> Response:
        from agent_harness.agent.client_tools import ToolResult, call_view
        from agent_harness.agent.turn import run_turn  # the turn machinery loads on first use

        user = current_user()
        session_id = session(session_id)
        request = body(MessageBody)
        results = None
        if request.tool_results is not None:
            results = [ToolResult(r.tool_call_id, r.text, r.is_error) for r in request.tool_results]
        result = run_turn(
            rt,
            user,
            session_id,
            request.message,
            tools=request.tools,
            tool_results=results,
            cancel=bool(request.cancel),
        )
        return _json(
            200,
            {
                "session_id": result.session_id,
                "turn": result.turn,
                "status": result.status,
                "reply": result.reply,
                "tool_calls": [call_view(call) for call in result.tool_calls],
                "usage": _usage(result),
                "compacted": result.compacted,
                "flush": result.flush,
                "model": result.model,
            },
        )

    @app.get("/v1/sessions/<session_id>/messages")
    def get_messages(session_id: str) -> Response:
        user = current_user()
        from agent_harness.agent.history import list_turns

        session_id = session(session_id)
        turns, next_after = list_turns(
            rt,
            user,
            session_id,
            after=int_query("after", 0, 0, 10**9),
            limit=int_query("limit", 100, 1, 500),
        )
        return _json(
            200,
            {
                "session_id": session_id,
                "turns": [t.model_dump(mode="json") for t in turns],
                "next_after": next_after,
            },
        )

    @app.get("/v1/memory")
    def get_memory() -> Response:
        doc = files.get_memory(rt, current_user())
        headers = {"ETag": doc.etag} if doc.etag else {}
        return _json(200, {"content": doc.content, "etag": doc.etag}, headers)

    @app.put("/v1/memory")
    def put_memory() -> Response:
        user = current_user()
        request = body(MemoryPutBody)
        limit = rt.settings.max_memory_chars
        if len(request.content) > limit:
            raise PayloadTooLargeError(f"MEMORY.md is limited to {limit} characters")
        if_match, if_none_match = header("if-match"), header("if-none-match")
        doc = files.put_memory(
            rt, user, request.content, if_match=if_match, if_none_match=if_none_match
        )
        return _json(201 if not if_match else 200, {"etag": doc.etag}, {"ETag": doc.etag or ""})

    @app.get("/v1/memory/versions")
    def memory_versions() -> Response:
        versions = files.list_memory_versions(rt, current_user())
        return _json(
            200,
            {
                "versions": [
                    {
                        "version_id": v.version_id,
                        "last_modified": iso(v.last_modified) if v.last_modified else None,
                        "etag": v.etag,
                        "size": v.size,
                        "is_latest": v.is_latest,
                    }
                    for v in versions
                ]
            },
        )

    @app.post("/v1/memory/rollback")
    def memory_rollback() -> Response:
        user = current_user()
        request = body(RollbackBody)
        doc = files.rollback_memory(rt, user, request.version_id)
        return _json(200, {"etag": doc.etag, "restored_version_id": request.version_id})

    @app.get("/v1/memory/ledger")
    def ledger_days() -> Response:
        return _json(200, {"days": files.list_ledger_days(rt, current_user())})

    @app.get("/v1/memory/ledger/<day>")
    def ledger_day(day: str) -> Response:
        content = files.get_ledger_day(rt, current_user(), day)
        return _json(200, {"day": day, "content": content})

    def search(run: Callable[..., list[Any]], fields: tuple[str, ...]) -> Response:
        """A search route: blank queries say so; hits carry ``fields`` (+ score if ranked)."""
        user = current_user()
        request = body(SearchBody)
        query = request.query or ""
        if not query.strip():
            return _json(200, {"hits": [], "message": "no query provided"})
        hits = run(rt, user, query, request.match_mode, request.limit, rt.search_cache)
        rows = [
            {f: getattr(h, f) for f in fields} | ({"score": h.score} if h.score is not None else {})
            for h in hits
        ]
        return _json(200, {"hits": rows, "match_mode": request.match_mode})

    @app.post("/v1/memory/search")
    def memory_search() -> Response:
        from agent_harness.memory.search import search_memory

        return search(search_memory, ("path", "line", "text"))

    @app.post("/v1/sessions/search")
    def sessions_search() -> Response:
        from agent_harness.memory.threads import search_threads

        return search(search_threads, ("session_id", "turn", "role", "at", "text"))

    @app.post("/v1/sessions/<session_id>/import")
    def import_messages(session_id: str) -> Response:
        from agent_harness.agent.importer import ImportBody, import_history

        user = current_user()
        session_id = session(session_id)
        request = body(ImportBody)
        result = import_history(rt, user, session_id, request.messages)
        return _json(
            200,
            {
                "session_id": result.session_id,
                "first_turn": result.first_turn,
                "last_turn": result.last_turn,
                "messages": result.messages,
                "flush": result.flush,
            },
        )

    @app.post("/v1/memory/save")
    def memory_save() -> Response:
        user = current_user()
        request = body(MemorySaveBody)
        source = (request.source.session_id, request.source.turns) if request.source else None
        saved = files.save_facts(
            rt, user, request.content, timestamp=request.timestamp, source=source, origin="api"
        )
        return _json(200, {"saved": saved.count})

    def openai_answer(answer: tuple[int, str, dict[str, str]]) -> Response:
        status, text, headers = answer
        metrics.add_metric(f"Responses{status // 100}xx", MetricUnit.Count, 1)
        content_type = headers.pop("Content-Type")
        return Response(status_code=status, content_type=content_type, body=text, headers=headers)

    @app.post("/v1/chat/completions")
    def chat_completions() -> Response:
        """OpenAI's chat API over the agent with memory; errors in OpenAI's shape."""
        from agent_harness.api.openai_compat import chat_completion, openai_error

        try:
            user = current_user()
            named = header("x-session-id")
            answer = chat_completion(rt, user, session(named) if named else None, raw_body())
        except HarnessError as exc:
            if exc.status >= 500:
                logger.warning("request failed", extra={"code": exc.code, "error": exc.message})
            answer = openai_error(exc)
        return openai_answer(answer)

    @app.get("/v1/models")
    def models() -> Response:
        from agent_harness.api.openai_compat import list_models, openai_error

        try:
            current_user()
        except HarnessError as exc:
            return openai_answer(openai_error(exc))
        return _json(200, list_models())

    @app.post("/mcp")
    def mcp() -> Response:
        """The MCP server (Streamable HTTP, stateless, JSON answers): memory as tools."""
        from agent_harness.mcp.server import handle_http

        user = current_user()
        try:
            text = raw_body()
        except InvalidRequestError:
            text = ""  # not UTF-8: handle_http answers a JSON-RPC parse error
        status, payload, headers = handle_http(rt, user, dict(app.current_event.headers), text)
        metrics.add_metric(f"Responses{status // 100}xx", MetricUnit.Count, 1)
        body_text = json.dumps(payload, ensure_ascii=False) if payload is not None else ""
        return Response(
            status_code=status,
            content_type=content_types.APPLICATION_JSON,
            body=body_text,
            headers=headers,
        )

    @app.get("/mcp")
    def mcp_stream() -> Response:
        """No server-initiated stream: the server keeps no session (405, as the transport
        allows)."""
        error = {"code": "method_not_allowed", "message": "POST JSON-RPC messages to /mcp"}
        return _json(405, {"error": error}, {"Allow": "POST"})

    @app.post("/v1/memory/consolidate")
    def consolidate_now() -> Response:
        from agent_harness.memory.consolidate import request_consolidation

        job = request_consolidation(rt, current_user())
        return _json(202, {"status": "queued", "requested_at": job.requested_at})

    @app.delete("/v1/memory")
    def forget() -> Response:
        """Forget the caller entirely: every object version and every item (invariant 9)."""
        from agent_harness.memory.forget import forget_user

        forget_user(rt, current_user())
        return Response(status_code=204, body="")

    return app
