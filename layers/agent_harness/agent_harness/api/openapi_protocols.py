"""The OpenAPI paths of the protocols other agents speak (api.protocol_routes): OpenAI's
chat completions, responses, conversations and model list, the MCP server, and the
OAuth protected resource metadata. Their answers are OpenAI's objects
(api.openai_answers); api.openapi assembles them with the native routes'."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_harness.api.openapi_components import answer, json_content, op

if TYPE_CHECKING:
    from agent_harness.api.openapi_components import Components

__all__ = ["protocol_paths"]

_CONVERSATION = {
    "name": "conversation_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": "^conv_[A-Za-z0-9_-]{1,64}$"},
}


def protocol_paths(c: Components) -> dict[str, Any]:
    from pydantic import TypeAdapter

    from agent_harness.api import answers as a
    from agent_harness.api import openai_answers as o
    from agent_harness.api.openai_compat import ChatBody
    from agent_harness.api.responses import ResponsesBody

    item = c.named("ConversationItem", TypeAdapter(o.ConversationItem))
    #: RFC 9728's document, or 404 without an issuer configured (api.oauth)
    metadata = {
        "200": {"description": "resource, authorization_servers, scopes_supported, ..."}
        | json_content(c.ref(a.ProtectedResource)),
        "404": {"description": "no authorization server is configured (dev mode)"},
    }
    return {
        "/v1/chat/completions": {
            "post": op(
                "OpenAI-compatible chat completion over the agent with memory "
                "(X-Session-Id names the session)",
                c.streamed("a chat.completion, or its chunks with stream: true", o.ChatCompletion),
                requestBody=c.body(ChatBody),
            ),
        },
        "/v1/responses": {
            "post": op(
                "OpenAI-compatible response (the Responses API) over the agent with memory "
                "(previous_response_id or X-Session-Id names the session)",
                c.streamed("a response, or its events with stream: true", o.ResponseObject),
                requestBody=c.body(ResponsesBody),
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
            "get": op("A stored response, as it was created", c.ok("a response", o.ResponseObject)),
            "delete": op("Forget a stored response", c.ok("forgotten", o.ResponseDeleted)),
        },
        "/v1/models": {"get": op("The model this API serves", c.ok("a model list", o.ModelList))},
        "/mcp": {
            "post": op(
                "The MCP server: JSON-RPC over Streamable HTTP (stateless, JSON answers)",
                answer("a JSON-RPC answer", {"type": ["object", "array"]})
                | {
                    "202": {"description": "a notification or response, taken"},
                    "403": {"description": "an Origin that is not allowed (a JSON-RPC error)"},
                    "406": {"description": "Accept allows no JSON"},
                    "415": {"description": "the body is not JSON"},
                },
                requestBody={"required": True} | json_content({"type": ["object", "array"]}),
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
                c.ok("a conversation", o.Conversation),
                requestBody={"required": False} | json_content({"type": "object"}),
            ),
        },
        "/v1/conversations/{conversation_id}": {
            "parameters": [_CONVERSATION],
            "get": op("A conversation", c.ok("a conversation", o.Conversation)),
            "post": op(
                "Update a conversation's metadata",
                c.ok("a conversation", o.Conversation),
                requestBody={"required": True} | json_content({"type": "object"}),
            ),
            "delete": op("Delete a conversation", c.ok("deleted", o.ConversationDeleted)),
        },
        "/v1/conversations/{conversation_id}/items": {
            "parameters": [_CONVERSATION],
            "get": op(
                "A conversation's items, a page at a time",
                c.ok("a list of items", o.ConversationItemList),
                parameters=[
                    {"name": "limit", "in": "query", "schema": {"type": "integer"}},
                    {"name": "order", "in": "query", "schema": {"enum": ["asc", "desc"]}},
                    {"name": "after", "in": "query", "schema": {"type": "string"}},
                ],
            ),
            "post": op(
                "Add up to 20 items (imported as turns, then remembered)",
                c.ok("the items added", o.ConversationItemList),
                requestBody={"required": True} | json_content({"type": "object"}),
            ),
        },
        "/v1/conversations/{conversation_id}/items/{item_id}": {
            "parameters": [
                _CONVERSATION,
                {"name": "item_id", "in": "path", "required": True, "schema": {"type": "string"}},
            ],
            "get": op("An item", answer("an item", item)),
            "delete": op(
                "Delete an item from the conversation", c.ok("the conversation", o.Conversation)
            ),
        },
        "/.well-known/oauth-protected-resource": {
            "get": op("OAuth protected resource metadata of the stack", metadata, security=[]),
        },
        "/.well-known/oauth-protected-resource/mcp": {
            "get": op("OAuth protected resource metadata of /mcp", metadata, security=[]),
        },
    }
