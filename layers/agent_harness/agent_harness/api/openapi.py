"""The OpenAPI 3.1 document of the HTTP API, served at ``GET /v1/openapi.json``.

Built from the same pydantic models the routes validate with, so the document cannot
drift from what the API accepts. Clients generate from it; the reliability suite fuzzes
the running API from it (schemathesis). Built on first request, then cached.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from agent_harness.ids import SESSION_ID_PATTERN

if TYPE_CHECKING:
    from pydantic import BaseModel

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
_ERRORS = {
    str(code): {"$ref": f"#/components/responses/{name}"}
    for code, name in (
        (400, "BadRequest"),
        (401, "Unauthorized"),
        (404, "NotFound"),
        (409, "Conflict"),
        (412, "PreconditionFailed"),
        (413, "TooLarge"),
        (422, "Invalid"),
        (428, "PreconditionRequired"),
        (429, "RateLimited"),
        (502, "ModelFailed"),
        (503, "StoreUnavailable"),
        (504, "ModelTimeout"),
    )
}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def _ok(description: str, status: str = "200") -> dict[str, Any]:
    body = {"description": description} | (_json({"type": "object"}) if status != "204" else {})
    return {status: body} | _ERRORS


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


_CONVERSATION = {
    "name": "conversation_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": "^conv_[A-Za-z0-9_-]{1,64}$"},
}

#: RFC 9728's document, or 404 without an issuer configured (api.oauth)
_METADATA = {
    "200": {"description": "resource, authorization_servers, scopes_supported, ..."}
    | _json(
        {
            "type": "object",
            "required": ["resource", "authorization_servers"],
            "properties": {
                "resource": {"type": "string"},
                "authorization_servers": {"type": "array", "items": {"type": "string"}},
                "scopes_supported": {"type": "array", "items": {"type": "string"}},
                "bearer_methods_supported": {"type": "array", "items": {"type": "string"}},
                "resource_name": {"type": "string"},
            },
        }
    ),
    "404": {"description": "no authorization server is configured (dev mode)"},
}


@cache
def openapi_document() -> dict[str, Any]:
    from agent_harness.agent.importer import ImportBody
    from agent_harness.api.openai_compat import ChatBody
    from agent_harness.api.responses import ResponsesBody
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

    schemas: dict[str, Any] = {}

    def body(model: type[BaseModel]) -> dict[str, Any]:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
        return {"required": True} | _json({"$ref": f"#/components/schemas/{model.__name__}"})

    def op(summary: str, responses: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {"summary": summary, "responses": responses} | extra

    paths: dict[str, Any] = {
        "/health": {
            "get": op("Liveness", {"200": {"description": "ok"}}, security=[]),
        },
        "/v1/openapi.json": {
            "get": op("This document", {"200": {"description": "OpenAPI 3.1"}}, security=[]),
        },
        "/v1/sessions/{session_id}/messages": {
            "parameters": [_SESSION],
            "post": op("One agent turn", _ok("the reply"), requestBody=body(MessageBody)),
            "get": op("The thread log, turn by turn", _ok("turns"), parameters=_PAGE),
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
            "get": op("What memory reached the model in one turn, and why", _ok("the record")),
        },
        "/v1/sessions/{session_id}/import": {
            "parameters": [_SESSION],
            "post": op("Import history as turns", _ok("imported"), requestBody=body(ImportBody)),
        },
        "/v1/sessions/search": {
            "post": op("Search past messages", _ok("hits"), requestBody=body(SearchBody)),
        },
        "/v1/memory": {
            "get": op(
                "MEMORY.md and its ETag (?scope=: a shared scope's, for its members)",
                _ok("the document"),
                parameters=[_SCOPE_QUERY],
            ),
            "put": op(
                "A person's edit of MEMORY.md",
                _ok("the new ETag"),
                requestBody=body(MemoryPutBody),
                parameters=[
                    {"name": "If-Match", "in": "header", "schema": {"type": "string"}},
                    {"name": "If-None-Match", "in": "header", "schema": {"type": "string"}},
                ],
            ),
            "delete": op("Forget this user entirely", _ok("forgotten", "204")),
        },
        "/v1/memory/versions": {
            "get": op(
                "Versions of MEMORY.md, newest first, a page at a time",
                _ok("versions and next_cursor"),
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
            "post": op("Restore a version", _ok("restored"), requestBody=body(RollbackBody)),
        },
        "/v1/memory/ledger": {"get": op("Ledger days", _ok("days"))},
        "/v1/memory/ledger/{day}": {
            "parameters": [_DAY],
            "get": op("One day's ledger", _ok("the ledger")),
        },
        "/v1/memory/search": {
            "post": op("Search memory", _ok("hits"), requestBody=body(MemorySearchBody)),
        },
        "/v1/memory/save": {
            "post": op("Save facts", _ok("saved"), requestBody=body(MemorySaveBody)),
        },
        "/v1/memory/promote": {
            "post": op(
                "Propose facts for a shared scope (a maintainer's are written at once)",
                _ok("promoted or queued"),
                requestBody=body(PromoteBody),
            ),
        },
        "/v1/memory/facts/{fact_id}": {
            "parameters": [_FACT],
            "get": op(
                "One ledger fact, where it stands, and its history",
                _ok("the fact"),
                parameters=[_SCOPE_QUERY],
            ),
        },
        "/v1/memory/facts/{fact_id}/supersede": {
            "parameters": [_FACT],
            "post": op(
                "Supersede a fact with corrected text, or retract it ({}), as an operator",
                _ok("the record written and the retired fact"),
                requestBody=body(SupersedeBody),
            ),
        },
        "/v1/memory/consolidate": {
            "post": op(
                "Consolidate now: queued (202), with the consolidation's status and its "
                "last failure while runs keep failing",
                _ok("queued", "202"),
            )
        },
        "/v1/memory/review": {
            "get": op("Lines held for a person's review", _ok("items"), parameters=[_SCOPE_QUERY])
        },
        "/v1/memory/review/{item_id}": {
            "parameters": [
                {"name": "item_id", "in": "path", "required": True, "schema": {"type": "string"}}
            ],
            "post": op(
                "Approve (written as operator) or reject a held line",
                _ok("the decision"),
                requestBody=body(ReviewBody),
            ),
        },
        "/v1/admin/users/{user_id}/budget": {
            "parameters": [
                {"name": "user_id", "in": "path", "required": True, "schema": {"type": "string"}}
            ],
            "get": op("A user's daily budget (operators only)", _ok("the budget")),
            "put": op(
                "Override a user's daily budget (operators only)",
                _ok("the budget"),
                requestBody=body(BudgetBody),
            ),
            "delete": op("Remove a user's override (operators only)", _ok("the budget")),
        },
        "/v1/admin/scopes": {
            "get": op("Shared memory scopes that have members (operators only)", _ok("scopes")),
        },
        "/v1/admin/scopes/{scope}/members": {
            "parameters": [_SCOPE_PARAM],
            "get": op("A shared scope's members and roles (operators only)", _ok("members")),
        },
        "/v1/admin/scopes/{scope}/members/{user_id}": {
            "parameters": [
                _SCOPE_PARAM,
                {"name": "user_id", "in": "path", "required": True, "schema": {"type": "string"}},
            ],
            "put": op(
                "Grant a user a role in a shared scope: member reads, maintainer writes "
                "(operators only)",
                _ok("the membership"),
                requestBody=body(MemberBody),
            ),
            "delete": op(
                "Remove a user from a shared scope (operators only; 404 if not a member)",
                _ok("the removal"),
            ),
        },
        "/v1/usage": {
            "get": op(
                "The caller's spend: tokens by role and day, turns, model calls; and the "
                "consolidation's status (due, last run, last failure)",
                _ok("usage"),
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
        "/v1/chat/completions": {
            "post": op(
                "OpenAI-compatible chat completion over the agent with memory "
                "(X-Session-Id names the session)",
                _ok("a chat.completion, or its chunks with stream: true"),
                requestBody=body(ChatBody),
            ),
        },
        "/v1/responses": {
            "post": op(
                "OpenAI-compatible response (the Responses API) over the agent with memory "
                "(previous_response_id or X-Session-Id names the session)",
                _ok("a response, or its events with stream: true"),
                requestBody=body(ResponsesBody),
            ),
        },
        "/v1/responses/{response_id}": {
            "parameters": [
                {
                    "name": "response_id",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "string", "pattern": "^resp_[A-Za-z0-9_-]{1,64}$"},
                }
            ],
            "get": op("A stored response, as it was created", _ok("a response")),
            "delete": op("Forget a stored response", _ok('{"id", "object", "deleted": true}')),
        },
        "/v1/models": {"get": op("The model this API serves", _ok("a model list"))},
        "/mcp": {
            "post": op(
                "The MCP server: JSON-RPC over Streamable HTTP (stateless, JSON answers)",
                _ok("a JSON-RPC answer")
                | {
                    "202": {"description": "a notification or response, taken"},
                    "403": {"description": "an Origin that is not allowed (a JSON-RPC error)"},
                    "406": {"description": "Accept allows no JSON"},
                    "415": {"description": "the body is not JSON"},
                },
                requestBody={"required": True} | _json({"type": ["object", "array"]}),
                parameters=[
                    {"name": "MCP-Protocol-Version", "in": "header", "schema": {"type": "string"}}
                ],
            ),
            "get": op("No server stream: 405", {"405": {"description": "POST only"}}),
            "delete": op("No session to end: 405", {"405": {"description": "POST only"}}),
        },
        "/v1/conversations": {
            "post": op(
                "Create a conversation (a session of ours), with up to 20 items",
                _ok("a conversation"),
                requestBody={"required": False} | _json({"type": "object"}),
            ),
        },
        "/v1/conversations/{conversation_id}": {
            "parameters": [_CONVERSATION],
            "get": op("A conversation", _ok("a conversation")),
            "post": op(
                "Update a conversation's metadata",
                _ok("a conversation"),
                requestBody={"required": True} | _json({"type": "object"}),
            ),
            "delete": op("Delete a conversation", _ok('{"id", "object", "deleted": true}')),
        },
        "/v1/conversations/{conversation_id}/items": {
            "parameters": [_CONVERSATION],
            "get": op(
                "A conversation's items, a page at a time",
                _ok("a list of items"),
                parameters=[
                    {"name": "limit", "in": "query", "schema": {"type": "integer"}},
                    {"name": "order", "in": "query", "schema": {"enum": ["asc", "desc"]}},
                    {"name": "after", "in": "query", "schema": {"type": "string"}},
                ],
            ),
            "post": op(
                "Add up to 20 items (imported as turns, then remembered)",
                _ok("the items added"),
                requestBody={"required": True} | _json({"type": "object"}),
            ),
        },
        "/v1/conversations/{conversation_id}/items/{item_id}": {
            "parameters": [
                _CONVERSATION,
                {"name": "item_id", "in": "path", "required": True, "schema": {"type": "string"}},
            ],
            "get": op("An item", _ok("an item")),
            "delete": op("Delete an item from the conversation", _ok("the conversation")),
        },
        "/.well-known/oauth-protected-resource": {
            "get": op("OAuth protected resource metadata of the stack", _METADATA, security=[]),
        },
        "/.well-known/oauth-protected-resource/mcp": {
            "get": op("OAuth protected resource metadata of /mcp", _METADATA, security=[]),
        },
    }
    error = {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
            }
        },
    }
    responses = {
        name: {"description": name} | _json({"$ref": "#/components/schemas/Error"})
        for name in {ref["$ref"].rsplit("/", 1)[-1] for ref in _ERRORS.values()}
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "agent-harness",
            "version": "1",
            "description": "Long-term memory for LLM agents. The user is the JWT's sub; "
            "in local dev mode the X-User-Id header.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas | {"Error": error},
            "responses": responses,
            "securitySchemes": {
                "jwt": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
                "devUser": {"type": "apiKey", "in": "header", "name": "X-User-Id"},
            },
        },
        "security": [{"jwt": []}, {"devUser": []}],
    }
