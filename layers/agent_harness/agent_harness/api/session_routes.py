"""Routes of sessions: a turn, a session's messages, a turn's memory record, importing
history, thread search."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_lambda_powertools.event_handler.api_gateway import Router

from agent_harness.api.http import Http, json_response

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import Response

    from agent_harness.agent.commit import TurnResult
    from agent_harness.runtime import Runtime

__all__ = ["session_routes", "usage_view"]


def usage_view(result: TurnResult) -> dict[str, object]:
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


def session_routes(rt: Runtime) -> Router:
    router = Router()
    http = Http(router, rt)

    @router.post("/v1/sessions/<session_id>/messages")
    def post_message(session_id: str) -> Response[str]:
        from agent_harness.agent.client_tools import ToolResult, call_view
        from agent_harness.agent.scoped import Binding, parse_bound
        from agent_harness.agent.turn import run_turn  # the turn machinery loads on first use
        from agent_harness.api.openai_options import turn_options
        from agent_harness.api.schemas import MessageBody

        user, session_id = http.user(), http.session(session_id)
        request = http.body(MessageBody)
        binding = Binding(parse_bound(request.scopes), tuple(http.groups()))
        # a resume sent without tools keeps the turn's, unknown here: its choice is unchecked
        names = [t.name for t in request.tools or []]
        resume_keeps = request.tools is None and request.message is None
        options = turn_options(request.options_fields(), None if resume_keeps else names)
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
            options=options,
            binding=binding,
        )
        return json_response(
            200,
            {
                "session_id": result.session_id,
                "turn": result.turn,
                "status": result.status,
                "reply": result.reply,
                "tool_calls": [call_view(call) for call in result.tool_calls],
                "usage": usage_view(result),
                "compacted": result.compacted,
                "flush": result.flush,
                "model": result.model,
                "scopes": result.scopes,
            },
        )

    @router.get("/v1/sessions/<session_id>/messages")
    def get_messages(session_id: str) -> Response[str]:
        from agent_harness.agent.history import list_turns

        user, session_id = http.user(), http.session(session_id)
        after = http.int_query("after", 0, 0, 10**9)
        limit = http.int_query("limit", 100, 1, 500)
        turns, next_after = list_turns(rt, user, session_id, after=after, limit=limit)
        return json_response(
            200,
            {
                "session_id": session_id,
                "turns": [t.model_dump(mode="json") for t in turns],
                "next_after": next_after,
            },
        )

    @router.get("/v1/sessions/<session_id>/turns/<turn>/memory")
    def turn_memory(session_id: str, turn: str) -> Response[str]:
        from agent_harness.errors import ValidationFailedError
        from agent_harness.memory.chain import turn_memory

        user, session_id = http.user(), http.session(session_id)
        if not (turn.isascii() and turn.isdigit()) or not 1 <= int(turn) <= 10**9:
            raise ValidationFailedError("turn must be a turn number (1 or more)")
        return json_response(200, turn_memory(rt, user, session_id, int(turn)))

    @router.post("/v1/sessions/<session_id>/import")
    def import_messages(session_id: str) -> Response[str]:
        from agent_harness.agent.importer import ImportBody, import_history

        user, session_id = http.user(), http.session(session_id)
        request = http.body(ImportBody)
        result = import_history(rt, user, session_id, request.messages)
        return json_response(
            200,
            {
                "session_id": result.session_id,
                "first_turn": result.first_turn,
                "last_turn": result.last_turn,
                "messages": result.messages,
                "flush": result.flush,
            },
        )

    @router.post("/v1/sessions/search")
    def sessions_search() -> Response[str]:
        from agent_harness.memory.threads import search_threads

        fields = ("session_id", "turn", "role", "at", "text")
        return http.search(search_threads, fields)

    return router
