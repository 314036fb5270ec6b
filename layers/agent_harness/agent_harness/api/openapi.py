"""The OpenAPI 3.1 document of the HTTP API, served at ``GET /v1/openapi.json``.

Built from the same pydantic models the routes validate with, so the document cannot
drift from what the API accepts. Clients generate from it; the reliability suite fuzzes
the running API from it (schemathesis). Built on first request, then cached.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from agent_harness.api.openapi_components import Components, answer, json_content, op
from agent_harness.ids import SESSION_ID_PATTERN

__all__ = ["openapi_document"]

_SESSION = {
    "name": "session_id",
    "in": "path",
    "required": True,
    "description": "1-128 characters: letters, digits, '.', '_', ':', '-'; starts alphanumeric",
    "schema": {"type": "string", "pattern": SESSION_ID_PATTERN},
}
_DAY = {
    "name": "day",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
}
_FACT = {
    "name": "fact_id",
    "in": "path",
    "required": True,
    "description": "a ledger fact's id, its day and 8 hex digits, as search hits show it",
    "schema": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}\.[0-9a-f]{8}$"},
}
_PAGE = [
    {"name": "after", "in": "query", "schema": {"type": "integer", "minimum": 0}},
    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 500}},
]
#: a shared scope in a path: ``project:<name>``, ``agent:<name>`` or ``org``
_SCOPE_PARAM = {
    "name": "scope",
    "in": "path",
    "required": True,
    "schema": {
        "type": "string",
        "pattern": r"^(org|(project|agent):[A-Za-z0-9][A-Za-z0-9._-]{0,63})$",
    },
}


#: whose memory a read is of: ``user`` (the default) or a shared scope
_SCOPE_QUERY = {
    "name": "scope",
    "in": "query",
    "required": False,
    "schema": {"type": "string", "default": "user"},
    "description": "'user' (the caller's own), or a shared scope the caller is a member of",
}


@cache
def openapi_document() -> dict[str, Any]:
    from agent_harness.agent.importer import ImportBody
    from agent_harness.api import answers as a
    from agent_harness.api import memory_answers as m
    from agent_harness.api.openapi_protocols import protocol_paths
    from agent_harness.api.schemas import (
        BudgetBody,
        MemberBody,
        MemoryPutBody,
        MemorySaveBody,
        MemorySearchBody,
        MessageBody,
        PromoteBody,
        ReviewBody,
        RollbackBody,
        SearchBody,
        SupersedeBody,
    )

    c = Components()

    paths: dict[str, Any] = {
        "/health": {
            "get": op(
                "Liveness",
                {"200": {"description": "ok"} | json_content(c.ref(a.Health))},
                security=[],
            ),
        },
        "/v1/openapi.json": {
            "get": op(
                "This document",
                {"200": {"description": "OpenAPI 3.1"} | json_content({"type": "object"})},
                security=[],
            ),
        },
        "/v1/sessions/{session_id}/messages": {
            "parameters": [_SESSION],
            "post": op(
                "One agent turn", c.ok("the reply", a.TurnAnswer), requestBody=c.body(MessageBody)
            ),
            "get": op("The thread log, turn by turn", c.ok("turns", a.ThreadLog), parameters=_PAGE),
        },
        "/v1/sessions/{session_id}/turns/{turn}/memory": {
            "parameters": [
                _SESSION,
                {
                    "name": "turn",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "integer", "minimum": 1},
                },
            ],
            "get": op(
                "What memory reached the model in one turn, and why",
                c.ok("the record", a.TurnMemory),
            ),
        },
        "/v1/sessions/{session_id}/import": {
            "parameters": [_SESSION],
            "post": op(
                "Import history as turns",
                c.ok("imported", a.ImportAnswer),
                requestBody=c.body(ImportBody),
            ),
        },
        "/v1/sessions/search": {
            "post": op(
                "Search past messages", c.ok("hits", a.ThreadSearch), requestBody=c.body(SearchBody)
            ),
        },
        "/v1/memory": {
            "get": op(
                "MEMORY.md and its ETag (?scope=: a shared scope's, for its members)",
                c.ok("the document", m.MemoryDocument),
                parameters=[_SCOPE_QUERY],
            ),
            "put": op(
                "A person's edit of MEMORY.md",
                c.ok("the new ETag (201: created)", m.MemoryWrite, "200", "201"),
                requestBody=c.body(MemoryPutBody),
                parameters=[
                    {"name": "If-Match", "in": "header", "schema": {"type": "string"}},
                    {"name": "If-None-Match", "in": "header", "schema": {"type": "string"}},
                ],
            ),
            "delete": op("Forget this user entirely", answer("forgotten", None, "204")),
        },
        "/v1/memory/versions": {
            "get": op(
                "Versions of MEMORY.md, newest first, a page at a time",
                c.ok("versions and next_cursor", m.MemoryVersions),
                parameters=[
                    {
                        "name": "limit",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 1, "maximum": 200},
                    },
                    {
                        "name": "cursor",
                        "in": "query",
                        "description": "next_cursor of the previous page",
                        "schema": {"type": "string", "pattern": "^[!-~]{1,1024}$"},
                    },
                ],
            )
        },
        "/v1/memory/rollback": {
            "post": op(
                "Restore a version", c.ok("restored", m.Rollback), requestBody=c.body(RollbackBody)
            ),
        },
        "/v1/memory/ledger": {"get": op("Ledger days", c.ok("days", m.LedgerDays))},
        "/v1/memory/ledger/{day}": {
            "parameters": [_DAY],
            "get": op("One day's ledger", c.ok("the ledger", m.Ledger)),
        },
        "/v1/memory/search": {
            "post": op(
                "Search memory", c.ok("hits", m.MemorySearch), requestBody=c.body(MemorySearchBody)
            ),
        },
        "/v1/memory/save": {
            "post": op(
                "Save facts", c.ok("saved", m.SaveAnswer), requestBody=c.body(MemorySaveBody)
            ),
        },
        "/v1/memory/promote": {
            "post": op(
                "Propose facts for a shared scope (a maintainer's are written at once)",
                c.ok("promoted or queued", m.Promotion),
                requestBody=c.body(PromoteBody),
            ),
        },
        "/v1/memory/facts/{fact_id}": {
            "parameters": [_FACT],
            "get": op(
                "One ledger fact, where it stands, and its history",
                c.ok("the fact", m.Fact),
                parameters=[_SCOPE_QUERY],
            ),
        },
        "/v1/memory/facts/{fact_id}/supersede": {
            "parameters": [_FACT],
            "post": op(
                "Supersede a fact with corrected text, or retract it ({}), as an operator",
                c.ok("the record written and the retired fact", m.Supersession),
                requestBody=c.body(SupersedeBody),
            ),
        },
        "/v1/memory/consolidate": {
            "post": op(
                "Consolidate now: queued (202), with the consolidation's status and its "
                "last failure while runs keep failing",
                c.ok("queued", m.ConsolidationQueued, "202"),
            )
        },
        "/v1/memory/review": {
            "get": op(
                "Lines held for a person's review",
                c.ok("items", m.ReviewQueue),
                parameters=[_SCOPE_QUERY],
            )
        },
        "/v1/memory/review/{item_id}": {
            "parameters": [
                {"name": "item_id", "in": "path", "required": True, "schema": {"type": "string"}}
            ],
            "post": op(
                "Approve (written as operator) or reject a held line",
                c.ok("the decision", m.Decision),
                requestBody=c.body(ReviewBody),
            ),
        },
        "/v1/admin/users/{user_id}/budget": {
            "parameters": [
                {"name": "user_id", "in": "path", "required": True, "schema": {"type": "string"}}
            ],
            "get": op("A user's daily budget (operators only)", c.ok("the budget", a.UserBudget)),
            "put": op(
                "Override a user's daily budget (operators only)",
                c.ok("the budget", a.UserBudget),
                requestBody=c.body(BudgetBody),
            ),
            "delete": op(
                "Remove a user's override (operators only)", c.ok("the budget", a.UserBudget)
            ),
        },
        "/v1/admin/scopes": {
            "get": op(
                "Shared memory scopes that have members (operators only)",
                c.ok("scopes", a.ScopeList),
            ),
        },
        "/v1/admin/scopes/{scope}/members": {
            "parameters": [_SCOPE_PARAM],
            "get": op(
                "A shared scope's members and roles (operators only)", c.ok("members", a.Members)
            ),
        },
        "/v1/admin/scopes/{scope}/members/{user_id}": {
            "parameters": [
                _SCOPE_PARAM,
                {"name": "user_id", "in": "path", "required": True, "schema": {"type": "string"}},
            ],
            "put": op(
                "Grant a user a role in a shared scope: member reads, maintainer writes "
                "(operators only)",
                c.ok("the membership", a.Membership),
                requestBody=c.body(MemberBody),
            ),
            "delete": op(
                "Remove a user from a shared scope (operators only; 404 if not a member)",
                c.ok("the removal", a.MemberRemoved),
            ),
        },
        "/v1/usage": {
            "get": op(
                "The caller's spend: tokens by role and day, turns, model calls; and the "
                "consolidation's status (due, last run, last failure)",
                c.ok("usage", a.UsageReport),
                parameters=[
                    _SCOPE_QUERY,
                    {
                        "name": "days",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 1, "maximum": 90, "default": 7},
                    },
                ],
            ),
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "agent-harness",
            "version": "1",
            "description": "Long-term memory for LLM agents. The user is the JWT's sub; "
            "in local dev mode the X-User-Id header.",
        },
        "paths": paths | protocol_paths(c),
        "components": c.document(),
        "security": [{"jwt": []}, {"devUser": []}],
    }
