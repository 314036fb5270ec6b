"""The routes of shared memory scopes: the operators' (who is a member, with which role;
``scopes`` holds the rules; operators only, as the budget routes), and a member's
promotion of their facts into one (memory.facts.promotion)."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import unquote

from aws_lambda_powertools.event_handler.api_gateway import Router

from agent_harness import scopes
from agent_harness.api.http import Http, json_response
from agent_harness.ids import User

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import Response

    from agent_harness.runtime import Runtime

__all__ = ["scope_routes"]


def scope_routes(rt: Runtime) -> Router:
    router = Router()
    http = Http(router, rt)

    @router.get("/v1/admin/scopes")
    def list_scopes() -> Response[str]:
        http.operator()
        return json_response(200, scopes.list_scopes(rt))

    @router.get("/v1/admin/scopes/<scope>/members")
    def list_members(scope: str) -> Response[str]:
        http.operator()
        return json_response(200, scopes.list_members(rt, unquote(scope)))

    @router.put("/v1/admin/scopes/<scope>/members/<user_id>")
    def put_member(scope: str, user_id: str) -> Response[str]:
        from agent_harness.api.schemas import MemberBody

        http.operator()
        user, body = User.from_id(unquote(user_id)), http.body(MemberBody)
        return json_response(200, scopes.set_member(rt, unquote(scope), user, body.role))

    @router.delete("/v1/admin/scopes/<scope>/members/<user_id>")
    def delete_member(scope: str, user_id: str) -> Response[str]:
        http.operator()
        user = User.from_id(unquote(user_id))
        return json_response(200, scopes.remove_member(rt, unquote(scope), user))

    @router.post("/v1/memory/promote")
    def promote() -> Response[str]:
        from agent_harness.api.schemas import PromoteBody
        from agent_harness.memory.facts.promotion import propose

        caller, body = http.user(), http.body(PromoteBody)
        grant = http.grant(body.scope, "read")  # a member proposes; a maintainer writes
        source = body.source
        done = propose(
            rt,
            caller,
            grant,
            body.content,
            origin="api",
            session_id=source.session_id if source else None,
            turns=source.turns if source else None,
        )
        return json_response(200, done.view())

    return router
