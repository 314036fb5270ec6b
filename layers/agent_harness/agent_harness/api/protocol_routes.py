"""Memory for other agents: the OpenAI-compatible chat, responses and conversations APIs
and the MCP server. Their
errors keep each protocol's own shape (OpenAI's error object, JSON-RPC)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import content_types
from aws_lambda_powertools.event_handler.api_gateway import Router

from agent_harness.api.http import Http, json_response, text_response
from agent_harness.errors import HarnessError, InvalidRequestError, UnauthorizedError

if TYPE_CHECKING:
    from collections.abc import Callable

    from aws_lambda_powertools.event_handler import Response

    from agent_harness.agent.scoped import Binding
    from agent_harness.ids import User
    from agent_harness.runtime import Runtime

__all__ = ["protocol_routes"]

logger = Logger(child=True)


#: an OpenAI route's answer: status, body, headers (the content type among them)
Answer = tuple[int, str, dict[str, str]]


def _openai_answer(answer: Answer) -> Response[str]:
    status, text, headers = answer
    content_type = headers.pop("Content-Type")
    return text_response(status, content_type, text, headers)


def protocol_routes(rt: Runtime) -> Router:
    router = Router()
    http = Http(router, rt)

    def _turn(serve: Callable[[Runtime, User, str | None, str, Binding], Answer]) -> Response[str]:
        """An OpenAI route's turn: the caller, the session it pins, the raw body, the
        scopes its ``X-Harness-Scopes`` header binds; errors in OpenAI's shape."""
        from agent_harness.agent.scoped import SCOPES_HEADER, Binding, parse_bound
        from agent_harness.api.openai_compat import openai_error

        try:
            user = http.user()
            named = http.header("x-session-id")
            session_id = http.session(named) if named else None
            binding = Binding(parse_bound(http.header(SCOPES_HEADER)), tuple(http.groups()))
            answer = serve(rt, user, session_id, http.raw_body(), binding)
        except HarnessError as exc:
            if exc.status >= 500:
                logger.warning("request failed", extra={"code": exc.code, "error": exc.message})
            answer = openai_error(exc)
        return _openai_answer(answer)

    @router.post("/v1/chat/completions")
    def chat_completions() -> Response[str]:
        """OpenAI's chat API over the agent with memory."""
        from agent_harness.api.openai_compat import chat_completion

        return _turn(chat_completion)

    @router.post("/v1/responses")
    def responses() -> Response[str]:
        """OpenAI's Responses API over the agent with memory."""
        from agent_harness.api.responses import create_response

        return _turn(create_response)

    @router.get("/v1/responses/<response_id>")
    def response(response_id: str) -> Response[str]:
        from agent_harness.api.responses import get_response

        return _stored_response(get_response, response_id)

    @router.delete("/v1/responses/<response_id>")
    def forget_response(response_id: str) -> Response[str]:
        from agent_harness.api.responses import delete_response

        return _stored_response(delete_response, response_id)

    def _stored_response(
        serve: Callable[[Runtime, User, str], Answer], response_id: str
    ) -> Response[str]:
        from agent_harness.api.openai_compat import openai_error

        try:
            answer = serve(rt, http.user(), response_id)
        except HarnessError as exc:
            answer = openai_error(exc)
        return _openai_answer(answer)

    def _conversations(serve: Callable[[User], Answer]) -> Response[str]:
        """A Conversations API route (api/conversations): errors in OpenAI's shape."""
        from agent_harness.api.openai_compat import openai_error

        try:
            answer = serve(http.user())
        except HarnessError as exc:
            answer = openai_error(exc)
        return _openai_answer(answer)

    @router.post("/v1/conversations")
    def create_conversation() -> Response[str]:
        from agent_harness.api import conversations as c

        return _conversations(lambda user: c.create_conversation(rt, user, http.raw_body()))

    @router.get("/v1/conversations/<conversation_id>")
    def conversation(conversation_id: str) -> Response[str]:
        from agent_harness.api import conversations as c

        return _conversations(lambda user: c.get_conversation(rt, user, conversation_id))

    @router.post("/v1/conversations/<conversation_id>")
    def update_conversation(conversation_id: str) -> Response[str]:
        from agent_harness.api import conversations as c

        return _conversations(
            lambda user: c.update_conversation(rt, user, conversation_id, http.raw_body())
        )

    @router.delete("/v1/conversations/<conversation_id>")
    def delete_conversation(conversation_id: str) -> Response[str]:
        from agent_harness.api import conversations as c

        return _conversations(lambda user: c.delete_conversation(rt, user, conversation_id))

    @router.get("/v1/conversations/<conversation_id>/items")
    def conversation_items(conversation_id: str) -> Response[str]:
        from agent_harness.api import conversations as c

        query = dict(router.current_event.query_string_parameters or {})
        return _conversations(lambda user: c.list_items(rt, user, conversation_id, query))

    @router.post("/v1/conversations/<conversation_id>/items")
    def add_conversation_items(conversation_id: str) -> Response[str]:
        from agent_harness.api import conversations as c

        return _conversations(
            lambda user: c.create_items(rt, user, conversation_id, http.raw_body())
        )

    @router.get("/v1/conversations/<conversation_id>/items/<item_id>")
    def conversation_item(conversation_id: str, item_id: str) -> Response[str]:
        from agent_harness.api import conversations as c

        return _conversations(lambda user: c.get_item(rt, user, conversation_id, item_id))

    @router.delete("/v1/conversations/<conversation_id>/items/<item_id>")
    def delete_conversation_item(conversation_id: str, item_id: str) -> Response[str]:
        from agent_harness.api import conversations as c

        return _conversations(lambda user: c.delete_item(rt, user, conversation_id, item_id))

    @router.get("/v1/models")
    def models() -> Response[str]:
        from agent_harness.api.openai_compat import list_models, openai_error

        try:
            http.user()
        except HarnessError as exc:
            return _openai_answer(openai_error(exc))
        return json_response(200, list_models())

    @router.post("/mcp")
    def mcp() -> Response[str]:
        """The MCP server (Streamable HTTP, stateless, JSON answers): memory as tools."""
        from agent_harness.api.origins import refusal
        from agent_harness.mcp.server import handle_http, unauthenticated

        # before identity: a page of another web origin learns nothing, not even a 401
        refused = refusal(http.headers(), rt.settings.allowed_origins)
        if refused is not None:
            return json_response(refused.status, refused.rpc_body())
        try:
            user = http.user()
        except UnauthorizedError as exc:
            status, payload, headers = unauthenticated(exc.message, _challenge(exc))
            return json_response(status, payload, headers)
        try:
            text = http.raw_body()
        except InvalidRequestError:
            text = ""  # not UTF-8: handle_http answers a JSON-RPC parse error
        status, payload, headers = handle_http(rt, user, http.headers(), text, http.groups())
        body = json.dumps(payload, ensure_ascii=False) if payload is not None else ""
        return text_response(status, content_types.APPLICATION_JSON, body, headers)

    def _challenge(refusal: UnauthorizedError) -> str:
        """What a 401 of /mcp asks for: in dev mode the X-User-Id header; else a bearer
        token, and where to sign in to get one (api.oauth)."""
        if rt.settings.auth_mode == "dev":
            wanted = "send the user id in the X-User-Id header (dev mode)"
            return (
                'Bearer realm="agent-harness", error="invalid_request", '
                f'error_description="{wanted}"'
            )
        from agent_harness.api.oauth import challenge

        refused = refusal.message if http.bearer_token() is not None else None
        return challenge(rt.settings, http.stack_url(), refused=refused)

    @router.get("/.well-known/oauth-protected-resource")
    def resource_metadata() -> Response[str]:
        """OAuth protected resource metadata of the stack (RFC 9728; no identity)."""
        return _metadata("")

    @router.get("/.well-known/oauth-protected-resource/mcp")
    def mcp_resource_metadata() -> Response[str]:
        """OAuth protected resource metadata of the MCP endpoint (RFC 9728)."""
        return _metadata("/mcp")

    def _metadata(path: str) -> Response[str]:
        from agent_harness.api.oauth import resource_metadata

        if not rt.settings.jwt_issuer:
            error = {"code": "not_found", "message": "no authorization server is configured"}
            return json_response(404, {"error": error})
        document = resource_metadata(rt.settings, http.stack_url(), path)
        return json_response(200, document, {"Cache-Control": "public, max-age=3600"})

    @router.get("/mcp")
    @router.delete("/mcp")
    def mcp_stream() -> Response[str]:
        """No server-initiated stream (GET) and no session to end (DELETE): a stateless
        server answers both 405, as the transport allows."""
        error = {"code": "method_not_allowed", "message": "POST JSON-RPC messages to /mcp"}
        return json_response(405, {"error": error}, {"Allow": "POST"})

    return router
