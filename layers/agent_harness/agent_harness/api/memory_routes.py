"""Routes of a user's memory: MEMORY.md and its versions, the ledgers, search, saving,
consolidating now, forgetting the user; the caller's usage; and an operator's budget
override of any user (``/v1/admin/...``, operators only)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from agent_harness.api.http import Http, json_response
from agent_harness.clock import iso
from agent_harness.errors import ValidationFailedError
from agent_harness.ids import User

if TYPE_CHECKING:
    from agent_harness.runtime import Runtime

__all__ = ["memory_routes"]


def _user_of(user_id: str) -> User:
    """The user an operator's path names (percent-decoded once by the API)."""
    from urllib.parse import unquote

    return User.from_id(unquote(user_id))


def memory_routes(rt: Runtime) -> Router:
    router = Router()
    http = Http(router, rt)

    @router.get("/v1/memory")
    def get_memory() -> Response[str]:
        """The caller's MEMORY.md, or (``?scope=``) a shared scope's they are a member of."""
        from agent_harness.memory import files

        grant = http.grant(router.current_event.get_query_string_value("scope"), "read")
        doc = files.get_memory(rt, grant.owner)
        headers = {"ETag": doc.etag} if doc.etag else {}
        body: dict[str, object] = {"content": doc.content, "etag": doc.etag}
        if grant.scope.shared:
            body["scope"] = str(grant.scope)
        return json_response(200, body, headers)

    @router.put("/v1/memory")
    def put_memory() -> Response[str]:
        from agent_harness.api.schemas import MemoryPutBody
        from agent_harness.memory import files

        user, request = http.user(), http.body(MemoryPutBody)
        if_match, if_none_match = http.header("if-match"), http.header("if-none-match")
        doc = files.put_memory(
            rt,
            user,
            request.content,
            if_match=if_match,
            if_none_match=if_none_match,
            authority=http.editor(shared=False),
        )
        status = 201 if not if_match else 200
        body = {"etag": doc.etag, "content": doc.content, "held": doc.held}
        return json_response(status, body, {"ETag": doc.etag or ""})

    @router.get("/v1/memory/versions")
    def memory_versions() -> Response[str]:
        from agent_harness.memory import files

        user = http.user()
        limit = http.int_query("limit", files.VERSIONS_LIMIT, 1, files.MAX_VERSIONS_LIMIT)
        cursor = http.token_query("cursor")
        versions, next_cursor = files.memory_versions_page(rt, user, limit=limit, cursor=cursor)
        rows = [
            {
                "version_id": v.version_id,
                "last_modified": iso(v.last_modified) if v.last_modified else None,
                "etag": v.etag,
                "size": v.size,
                "is_latest": v.is_latest,
            }
            for v in versions
        ]
        return json_response(200, {"versions": rows, "next_cursor": next_cursor})

    @router.post("/v1/memory/rollback")
    def memory_rollback() -> Response[str]:
        from agent_harness.api.schemas import RollbackBody
        from agent_harness.memory import files

        user, request = http.user(), http.body(RollbackBody)
        doc = files.rollback_memory(
            rt, user, request.version_id, authority=http.editor(shared=False)
        )
        body = {"etag": doc.etag, "restored_version_id": request.version_id, "held": doc.held}
        return json_response(200, body)

    @router.get("/v1/memory/ledger")
    def ledger_days() -> Response[str]:
        from agent_harness.memory import files

        return json_response(200, {"days": files.list_ledger_days(rt, http.user())})

    @router.get("/v1/memory/ledger/<day>")
    def ledger_day(day: str) -> Response[str]:
        from agent_harness.memory import files

        content = files.get_ledger_day(rt, http.user(), day)
        return json_response(200, {"day": day, "content": content})

    @router.get("/v1/admin/users/<user_id>/budget")
    def get_budget(user_id: str) -> Response[str]:
        from agent_harness.usage import budget_view

        http.operator()
        return json_response(200, budget_view(rt, _user_of(user_id)))

    @router.put("/v1/admin/users/<user_id>/budget")
    def put_budget(user_id: str) -> Response[str]:
        from agent_harness.api.schemas import BudgetBody
        from agent_harness.ports import Budget
        from agent_harness.usage import set_user_budget

        http.operator()
        user, body = _user_of(user_id), http.body(BudgetBody)
        return json_response(200, set_user_budget(rt, user, Budget(**body.model_dump())))

    @router.delete("/v1/admin/users/<user_id>/budget")
    def delete_budget(user_id: str) -> Response[str]:
        from agent_harness.usage import set_user_budget

        http.operator()
        return json_response(200, set_user_budget(rt, _user_of(user_id), None))

    @router.get("/v1/usage")
    def usage() -> Response[str]:
        from agent_harness.usage import MAX_USAGE_DAYS, usage_report

        # a shared scope's spend (its consolidation, its saves) is counted to the scope
        grant = http.grant(router.current_event.get_query_string_value("scope"), "read")
        days = http.int_query("days", 7, 1, MAX_USAGE_DAYS)
        body = usage_report(rt, grant.owner, days).view()
        body["consolidation"] = rt.table.get_user(grant.owner).view()
        if grant.scope.shared:
            body["scope"] = str(grant.scope)
        return json_response(200, body)

    @router.post("/v1/memory/search")
    def memory_search() -> Response[str]:
        from agent_harness.api.schemas import MemorySearchBody
        from agent_harness.memory.search import search_memory

        fields = ("path", "line", "text", "authority")
        lifecycle = {"include_superseded": "include_superseded", "as_of": "as_of"}
        return http.search(search_memory, fields, MemorySearchBody, **lifecycle)

    @router.post("/v1/memory/save")
    def memory_save() -> Response[str]:
        from agent_harness.api.schemas import MemorySaveBody
        from agent_harness.memory import files

        user, request = http.user(), http.body(MemorySaveBody)
        grant = http.grant(request.scope, "write")  # a shared scope: its maintainers only
        if grant.scope.shared and request.source:
            raise ValidationFailedError(
                "source names turns of your own sessions; a save into a shared scope takes "
                "none (the member who saved it is recorded)"
            )
        source = (request.source.session_id, request.source.turns) if request.source else None
        saved = files.save_facts(
            rt,
            grant.owner,
            request.content,
            timestamp=request.timestamp,
            source=source,
            origin="api",
            by=user if grant.scope.shared else None,
        )
        body: dict[str, object] = {"saved": saved.count, "held": saved.held}
        if grant.scope.shared:
            body["scope"] = str(grant.scope)
        return json_response(200, body)

    @router.get("/v1/memory/facts/<fact_id>")
    def get_fact(fact_id: str) -> Response[str]:
        from agent_harness.memory.facts.corrections import fact_view, find_fact

        grant = http.grant(router.current_event.get_query_string_value("scope"), "read")
        return json_response(200, fact_view(*find_fact(rt, grant.owner, fact_id)))

    @router.post("/v1/memory/facts/<fact_id>/supersede")
    def supersede_fact(fact_id: str) -> Response[str]:
        """A person's correction (the user's own: ``user``; an operator's or a shared
        scope maintainer's: ``operator``), under the daily budgets as a save is."""
        from agent_harness.api.schemas import SupersedeBody
        from agent_harness.import_budget import imports_admitted
        from agent_harness.memory.facts.corrections import correct_fact, fact_view, find_fact
        from agent_harness.memory.facts.ledger import by_field
        from agent_harness.scopes import note_writer

        caller, request = http.user(), http.body(SupersedeBody)
        # a shared scope's fact: its maintainers correct it (named in its source line),
        # under the scope's budget
        grant = http.grant(request.scope, "write")
        user = grant.owner
        with imports_admitted(rt, user, 1, "memory correction"):
            done = correct_fact(
                rt,
                user,
                fact_id,
                request.by,
                authority=http.editor(grant.scope.shared),
                writer=f"api {by_field(caller)}" if grant.scope.shared else "api",
                via="supersede",
                reason=request.reason,
            )
            # after: a refused correction (no such fact, bad text) wrote nothing at all
            note_writer(rt, caller, user)
        fact = fact_view(*find_fact(rt, user, fact_id))
        body = {"id": done.id, "retired": done.retired, "state": done.state, "fact": fact}
        return json_response(200, body)

    @router.get("/v1/memory/review")
    def review_items() -> Response[str]:
        from agent_harness.memory.review import list_review

        # a shared scope's queue (its promotions) is for its maintainers
        grant = http.grant(router.current_event.get_query_string_value("scope"), "write")
        items = [item.view() for item in list_review(rt, grant.owner)]
        body: dict[str, object] = {"items": items}
        if grant.scope.shared:
            body["scope"] = str(grant.scope)
        return json_response(200, body)

    @router.post("/v1/memory/review/<item_id>")
    def review_decision(item_id: str) -> Response[str]:
        from agent_harness.api.schemas import ReviewBody
        from agent_harness.memory.review import decide

        request = http.body(ReviewBody)
        grant = http.grant(request.scope, "write")
        authority = http.editor(grant.scope.shared)
        decision = decide(rt, grant.owner, item_id, request.action, authority=authority)
        return json_response(200, decision.view())

    @router.post("/v1/memory/consolidate")
    def consolidate_now() -> Response[str]:
        from agent_harness.memory.jobs.schedule import request_consolidation

        user = http.user()
        job = request_consolidation(rt, user)
        # the queued run's outcome comes later: what people see until then is how the
        # last ones went (a run that keeps failing is reported, not a bare 202)
        status = rt.table.get_user(user).view()
        body = {"status": "queued", "requested_at": job.requested_at, "consolidation": status}
        return json_response(202, {**body, "last_failure": status["last_failure"]})

    @router.delete("/v1/memory")
    def forget() -> Response[str]:
        """Forget the caller entirely (docs/design.md#forget-removes-all)."""
        from agent_harness.memory.jobs.forget import erase

        erase(rt, http.user())
        return Response(status_code=204, body="")

    return router
