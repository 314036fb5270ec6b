"""Every route of the API the client calls: method, path, the client method, the answer.

``ENDPOINTS`` lists them; a test checks it against the API's OpenAPI document (every
route has one, every answer's model matches its schema). ``/mcp`` is not here: it is
the MCP server, for MCP clients.
"""

from __future__ import annotations

from typing import Any

from agent_harness_client import models as m
from agent_harness_client import openai_types as o
from agent_harness_client._base import Endpoint

E = Endpoint

HEALTH = E[m.Health]("GET", "/health", "health", m.Health)
OPENAPI = E[dict[str, Any]]("GET", "/v1/openapi.json", "openapi", dict[str, Any])
MODELS = E[o.ModelList]("GET", "/v1/models", "models", o.ModelList)
USAGE = E[m.UsageReport]("GET", "/v1/usage", "usage", m.UsageReport)
_RESOURCE = "/.well-known/oauth-protected-resource"
RESOURCE = E[m.ProtectedResource]("GET", _RESOURCE, "protected_resource", m.ProtectedResource)
RESOURCE_MCP = E[m.ProtectedResource](
    "GET", f"{_RESOURCE}/mcp", "protected_resource", m.ProtectedResource
)

# -- sessions ---------------------------------------------------------------------------------
_MESSAGES = "/v1/sessions/{session_id}/messages"
SEND = E[m.TurnAnswer]("POST", _MESSAGES, "sessions.send", m.TurnAnswer)
MESSAGES = E[m.ThreadLog]("GET", _MESSAGES, "sessions.messages", m.ThreadLog)
TURN_MEMORY = E[m.TurnMemory](
    "GET", "/v1/sessions/{session_id}/turns/{turn}/memory", "sessions.turn_memory", m.TurnMemory
)
IMPORT = E[m.ImportAnswer](
    "POST", "/v1/sessions/{session_id}/import", "sessions.import_", m.ImportAnswer
)
THREAD_SEARCH = E[m.ThreadSearch]("POST", "/v1/sessions/search", "sessions.search", m.ThreadSearch)

# -- memory -----------------------------------------------------------------------------------
MEMORY_GET = E[m.MemoryDocument]("GET", "/v1/memory", "memory.get", m.MemoryDocument)
MEMORY_PUT = E[m.MemoryWrite]("PUT", "/v1/memory", "memory.put", m.MemoryWrite)
FORGET = E[None]("DELETE", "/v1/memory", "memory.forget", None)
VERSIONS = E[m.MemoryVersions]("GET", "/v1/memory/versions", "memory.versions", m.MemoryVersions)
ROLLBACK = E[m.Rollback]("POST", "/v1/memory/rollback", "memory.rollback", m.Rollback)
LEDGER = E[m.LedgerDays]("GET", "/v1/memory/ledger", "memory.ledger", m.LedgerDays)
LEDGER_DAY = E[m.Ledger]("GET", "/v1/memory/ledger/{day}", "memory.ledger_day", m.Ledger)
SEARCH = E[m.MemorySearch]("POST", "/v1/memory/search", "memory.search", m.MemorySearch)
SAVE = E[m.SaveAnswer]("POST", "/v1/memory/save", "memory.save", m.SaveAnswer)
PROMOTE = E[m.Promotion]("POST", "/v1/memory/promote", "memory.promote", m.Promotion)
FACT = E[m.Fact]("GET", "/v1/memory/facts/{fact_id}", "memory.fact", m.Fact)
SUPERSEDE = E[m.Supersession](
    "POST", "/v1/memory/facts/{fact_id}/supersede", "memory.supersede", m.Supersession
)
CONSOLIDATE = E[m.ConsolidationQueued](
    "POST", "/v1/memory/consolidate", "memory.consolidate", m.ConsolidationQueued
)
REVIEW = E[m.ReviewQueue]("GET", "/v1/memory/review", "memory.review", m.ReviewQueue)
DECIDE = E[m.Decision]("POST", "/v1/memory/review/{item_id}", "memory.decide", m.Decision)

# -- operators --------------------------------------------------------------------------------
_BUDGET = "/v1/admin/users/{user_id}/budget"
BUDGET = E[m.UserBudget]("GET", _BUDGET, "admin.budget", m.UserBudget)
SET_BUDGET = E[m.UserBudget]("PUT", _BUDGET, "admin.set_budget", m.UserBudget)
DELETE_BUDGET = E[m.UserBudget]("DELETE", _BUDGET, "admin.delete_budget", m.UserBudget)
SCOPES = E[m.ScopeList]("GET", "/v1/admin/scopes", "admin.scopes", m.ScopeList)
MEMBERS = E[m.Members]("GET", "/v1/admin/scopes/{scope}/members", "admin.members", m.Members)
_MEMBER = "/v1/admin/scopes/{scope}/members/{user_id}"
SET_MEMBER = E[m.Membership]("PUT", _MEMBER, "admin.set_member", m.Membership)
REMOVE_MEMBER = E[m.MemberRemoved]("DELETE", _MEMBER, "admin.remove_member", m.MemberRemoved)

# -- the OpenAI-shaped routes -----------------------------------------------------------------
CHAT = E[o.ChatCompletion](
    "POST", "/v1/chat/completions", "chat.completions.create", o.ChatCompletion
)
RESPONSE_CREATE = E[o.ResponseObject]("POST", "/v1/responses", "responses.create", o.ResponseObject)
_RESPONSE = "/v1/responses/{response_id}"
RESPONSE_GET = E[o.ResponseObject]("GET", _RESPONSE, "responses.retrieve", o.ResponseObject)
RESPONSE_DELETE = E[o.ResponseDeleted]("DELETE", _RESPONSE, "responses.delete", o.ResponseDeleted)

_CONVERSATIONS = "/v1/conversations"
_CONVERSATION = "/v1/conversations/{conversation_id}"
CONVERSATION_CREATE = E[o.Conversation](
    "POST", _CONVERSATIONS, "conversations.create", o.Conversation
)
CONVERSATION_GET = E[o.Conversation]("GET", _CONVERSATION, "conversations.retrieve", o.Conversation)
CONVERSATION_UPDATE = E[o.Conversation](
    "POST", _CONVERSATION, "conversations.update", o.Conversation
)
CONVERSATION_DELETE = E[o.ConversationDeleted](
    "DELETE", _CONVERSATION, "conversations.delete", o.ConversationDeleted
)
_ITEMS = f"{_CONVERSATION}/items"
ITEMS_LIST = E[o.ConversationItemList](
    "GET", _ITEMS, "conversations.items.list", o.ConversationItemList
)
ITEMS_CREATE = E[o.ConversationItemList](
    "POST", _ITEMS, "conversations.items.create", o.ConversationItemList
)
_ITEM = f"{_ITEMS}/{{item_id}}"
ITEM_GET = E[o.ConversationItem](
    "GET", _ITEM, "conversations.items.retrieve", o.ConversationItem, schema="ConversationItem"
)
ITEM_DELETE = E[o.Conversation]("DELETE", _ITEM, "conversations.items.delete", o.Conversation)

#: every endpoint, in the order above
ENDPOINTS: tuple[Endpoint[Any], ...] = tuple(
    value for value in list(globals().values()) if isinstance(value, Endpoint)
)
