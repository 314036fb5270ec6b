"""``AgentHarness``: the sync client (httpx.Client), one method per route.

``_async.py`` is this module made async (``python clients/python/make_async.py``); a
test checks that it is, so change this one and regenerate that one.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import httpx

from agent_harness_client import _endpoints as e
from agent_harness_client._base import (
    DEFAULT_TIMEOUT,
    MAX_RETRY_AFTER,
    Call,
    ClientBase,
    backoff,
    retry_after,
    retry_on_error,
    should_retry,
)
from agent_harness_client.errors import APIConnectionError, error_from_response

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from types import TracebackType

    from agent_harness_client.models import (
        ConsolidationQueued,
        Decision,
        Fact,
        Health,
        ImportAnswer,
        ImportMessage,
        Ledger,
        LedgerDays,
        MatchMode,
        MemberRemoved,
        Members,
        Membership,
        MemoryDocument,
        MemorySearch,
        MemoryVersions,
        MemoryWrite,
        Promotion,
        ProtectedResource,
        ReviewQueue,
        Rollback,
        SaveAnswer,
        SaveSource,
        ScopeList,
        Supersession,
        ThreadLog,
        ThreadSearch,
        ToolResult,
        ToolSpec,
        TurnAnswer,
        TurnMemory,
        UsageReport,
        UserBudget,
    )
    from agent_harness_client.openai_types import (
        ChatCompletion,
        Conversation,
        ConversationDeleted,
        ConversationItem,
        ConversationItemList,
        ModelList,
        ResponseDeleted,
        ResponseObject,
    )

__all__ = ["AgentHarness"]

T = TypeVar("T")


def _scopes_header(scopes: Sequence[str] | None) -> str | None:
    return None if scopes is None else ",".join(scopes)


class Sessions:
    """``client.sessions``: turns, thread logs, a turn's memory record, imports, search."""

    def __init__(self, client: AgentHarness) -> None:
        self._client = client

    def send(
        self,
        session_id: str,
        message: str | None = None,
        *,
        tools: Sequence[ToolSpec | Mapping[str, Any]] | None = None,
        tool_results: Sequence[ToolResult] | None = None,
        cancel: bool | None = None,
        scopes: Sequence[str] | None = None,
        response_format: Mapping[str, Any] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        stop: str | Sequence[str] | None = None,
        seed: int | None = None,
    ) -> TurnAnswer:
        """One turn: a new ``message`` (with your ``tools``), or the ``tool_results`` the
        paused turn awaits, or ``cancel=True`` of it. ``scopes`` on a session's first
        message binds those shared scopes."""
        body = {
            "message": message,
            "tools": tools,
            "tool_results": tool_results,
            "cancel": cancel,
            "scopes": scopes,
            "response_format": response_format,
            "tool_choice": tool_choice,
            "temperature": temperature,
            "top_p": top_p,
            "max_tokens": max_tokens,
            "stop": stop,
            "seed": seed,
        }
        return self._client._request(Call(e.SEND, {"session_id": session_id}, body=body))

    def messages(
        self, session_id: str, *, after: int | None = None, limit: int | None = None
    ) -> ThreadLog:
        """The thread log, turn by turn, after turn ``after``; ``next_after`` pages on."""
        params = {"after": after, "limit": limit}
        return self._client._request(Call(e.MESSAGES, {"session_id": session_id}, params))

    def turn_memory(self, session_id: str, turn: int) -> TurnMemory:
        """What memory reached turn ``turn``'s model, and why."""
        path = {"session_id": session_id, "turn": turn}
        return self._client._request(Call(e.TURN_MEMORY, path))

    def import_(self, session_id: str, messages: Sequence[ImportMessage]) -> ImportAnswer:
        """Existing history as turns of the session: no model call, then flushed."""
        body = {"messages": messages}
        return self._client._request(Call(e.IMPORT, {"session_id": session_id}, body=body))

    def search(
        self, query: str, *, match_mode: MatchMode | None = None, limit: int | None = None
    ) -> ThreadSearch:
        """Every past message of yours, in any session."""
        body = {"query": query, "match_mode": match_mode, "limit": limit}
        return self._client._request(Call(e.THREAD_SEARCH, body=body))


class Memory:
    """``client.memory``: MEMORY.md and its versions, the ledgers, search, save, facts
    and their corrections, the review queue, promotion, consolidation, forgetting."""

    def __init__(self, client: AgentHarness) -> None:
        self._client = client

    def get(self, *, scope: str | None = None) -> MemoryDocument:
        """MEMORY.md and its ETag (``scope``: a shared scope's, for its members)."""
        return self._client._request(Call(e.MEMORY_GET, params={"scope": scope}))

    def put(self, content: str, *, etag: str | None = None, create: bool = False) -> MemoryWrite:
        """Replace MEMORY.md if it is still at ``etag`` (else PreconditionFailedError), or
        ``create`` it where there is none; a person's edit, through the gate."""
        headers = {"If-Match": etag, "If-None-Match": "*" if create else None}
        call = Call(e.MEMORY_PUT, body={"content": content}, headers=headers)
        return self._client._request(call)

    def forget(self) -> None:
        """Forget the caller entirely: every object and item of theirs, for good."""
        return self._client._request(Call(e.FORGET))

    def versions(self, *, limit: int | None = None, cursor: str | None = None) -> MemoryVersions:
        """Versions of MEMORY.md, newest first, a page at a time."""
        params = {"limit": limit, "cursor": cursor}
        return self._client._request(Call(e.VERSIONS, params=params))

    def rollback(self, version_id: str) -> Rollback:
        """Restore a version of MEMORY.md (itself a new version, through the gate)."""
        return self._client._request(Call(e.ROLLBACK, body={"version_id": version_id}))

    def ledger(self) -> LedgerDays:
        """The days that have a ledger."""
        return self._client._request(Call(e.LEDGER))

    def ledger_day(self, day: str) -> Ledger:
        """One day's ledger (``YYYY-MM-DD``)."""
        return self._client._request(Call(e.LEDGER_DAY, {"day": day}))

    def search(
        self,
        query: str,
        *,
        match_mode: MatchMode | None = None,
        limit: int | None = None,
        include_superseded: bool | None = None,
        as_of: str | None = None,
        scope: str | None = None,
    ) -> MemorySearch:
        """MEMORY.md and the ledgers: current facts only, unless ``include_superseded``;
        ``as_of`` (``YYYY-MM-DD``) answers what was current then."""
        body = {
            "query": query,
            "match_mode": match_mode,
            "limit": limit,
            "include_superseded": include_superseded,
            "as_of": as_of,
            "scope": scope,
        }
        return self._client._request(Call(e.SEARCH, body=body))

    def save(
        self,
        content: str,
        *,
        timestamp: datetime | str | None = None,
        source: SaveSource | None = None,
        scope: str | None = None,
    ) -> SaveAnswer:
        """Facts, one per line, through the gate into MEMORY.md and today's ledger (or
        the ledger of ``timestamp``'s day); ``source`` names the turns they came from."""
        when = timestamp.isoformat() if isinstance(timestamp, datetime) else timestamp
        body = {"content": content, "timestamp": when, "source": source, "scope": scope}
        return self._client._request(Call(e.SAVE, body=body))

    def fact(self, fact_id: str, *, scope: str | None = None) -> Fact:
        """A ledger fact, where it stands (current, superseded, ...) and its history."""
        params = {"scope": scope}
        return self._client._request(Call(e.FACT, {"fact_id": fact_id}, params))

    def supersede(
        self,
        fact_id: str,
        by: str | None = None,
        *,
        reason: str | None = None,
        scope: str | None = None,
    ) -> Supersession:
        """Supersede the fact with the corrected text ``by``; without it, retract it."""
        body = {"by": by, "reason": reason, "scope": scope}
        return self._client._request(Call(e.SUPERSEDE, {"fact_id": fact_id}, body=body))

    def review(self, *, scope: str | None = None) -> ReviewQueue:
        """The lines the gate held for a person, oldest first."""
        return self._client._request(Call(e.REVIEW, params={"scope": scope}))

    def decide(
        self, item_id: str, action: Literal["approve", "reject"], *, scope: str | None = None
    ) -> Decision:
        """Approve (write it, as yours) or reject one held line."""
        body = {"action": action, "scope": scope}
        return self._client._request(Call(e.DECIDE, {"item_id": item_id}, body=body))

    def promote(self, scope: str, content: str, *, source: SaveSource | None = None) -> Promotion:
        """Propose facts of yours for a shared scope (a maintainer's are written)."""
        body = {"scope": scope, "content": content, "source": source}
        return self._client._request(Call(e.PROMOTE, body=body))

    def consolidate(self) -> ConsolidationQueued:
        """Queue a consolidation of your memory now."""
        return self._client._request(Call(e.CONSOLIDATE))


class Admin:
    """``client.admin``: the operators' routes (budgets, scope memberships)."""

    def __init__(self, client: AgentHarness) -> None:
        self._client = client

    def budget(self, user_id: str) -> UserBudget:
        """One user's daily budget: the stack's, the override, what applies."""
        return self._client._request(Call(e.BUDGET, {"user_id": user_id}))

    def set_budget(
        self,
        user_id: str,
        *,
        tokens: int | None = None,
        turns: int | None = None,
        memory_tokens: int | None = None,
    ) -> UserBudget:
        """Override one user's daily limits (0: unlimited; None: the stack's)."""
        body = {"tokens": tokens, "turns": turns, "memory_tokens": memory_tokens}
        return self._client._request(Call(e.SET_BUDGET, {"user_id": user_id}, body=body))

    def delete_budget(self, user_id: str) -> UserBudget:
        """Remove one user's override."""
        return self._client._request(Call(e.DELETE_BUDGET, {"user_id": user_id}))

    def scopes(self) -> ScopeList:
        """Every shared scope that has had a member."""
        return self._client._request(Call(e.SCOPES))

    def members(self, scope: str) -> Members:
        """A shared scope's members and their roles."""
        return self._client._request(Call(e.MEMBERS, {"scope": scope}))

    def set_member(
        self, scope: str, user_id: str, role: Literal["member", "maintainer"]
    ) -> Membership:
        """Grant a role in a shared scope: a member reads it, a maintainer writes it."""
        path = {"scope": scope, "user_id": user_id}
        return self._client._request(Call(e.SET_MEMBER, path, body={"role": role}))

    def remove_member(self, scope: str, user_id: str) -> MemberRemoved:
        """Take a user out of a shared scope (NotFoundError if not a member)."""
        path = {"scope": scope, "user_id": user_id}
        return self._client._request(Call(e.REMOVE_MEMBER, path))


class ConversationItems:
    """``client.conversations.items``: a conversation's items (its turns' messages)."""

    def __init__(self, client: AgentHarness) -> None:
        self._client = client

    def list(
        self,
        conversation_id: str,
        *,
        limit: int | None = None,
        order: Literal["asc", "desc"] | None = None,
        after: str | None = None,
    ) -> ConversationItemList:
        """A page of items (``order`` desc by default); ``after`` an item id."""
        params = {"limit": limit, "order": order, "after": after}
        path = {"conversation_id": conversation_id}
        return self._client._request(Call(e.ITEMS_LIST, path, params))

    def create(
        self, conversation_id: str, items: Sequence[Mapping[str, Any]]
    ) -> ConversationItemList:
        """Add up to 20 items (messages, function calls and their outputs) as turns."""
        path = {"conversation_id": conversation_id}
        return self._client._request(Call(e.ITEMS_CREATE, path, body={"items": items}))

    def retrieve(self, conversation_id: str, item_id: str) -> ConversationItem:
        """One item."""
        path = {"conversation_id": conversation_id, "item_id": item_id}
        return self._client._request(Call(e.ITEM_GET, path))

    def delete(self, conversation_id: str, item_id: str) -> Conversation:
        """Remove an item from the conversation's items; the conversation."""
        path = {"conversation_id": conversation_id, "item_id": item_id}
        return self._client._request(Call(e.ITEM_DELETE, path))


class Conversations:
    """``client.conversations``: OpenAI's Conversations API (a conversation is a
    session of ours, remembered like any)."""

    def __init__(self, client: AgentHarness) -> None:
        self._client = client
        self.items = ConversationItems(client)

    def create(
        self,
        *,
        items: Sequence[Mapping[str, Any]] | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Conversation:
        """A new conversation, with up to 20 items."""
        body = {"items": items, "metadata": metadata}
        return self._client._request(Call(e.CONVERSATION_CREATE, body=body))

    def retrieve(self, conversation_id: str) -> Conversation:
        path = {"conversation_id": conversation_id}
        return self._client._request(Call(e.CONVERSATION_GET, path))

    def update(self, conversation_id: str, *, metadata: Mapping[str, str]) -> Conversation:
        """Replace the conversation's metadata."""
        path = {"conversation_id": conversation_id}
        body = {"metadata": metadata}
        return self._client._request(Call(e.CONVERSATION_UPDATE, path, body=body))

    def delete(self, conversation_id: str) -> ConversationDeleted:
        """The conversation and its items are not found any more (memory keeps what it
        learned, until ``memory.forget``)."""
        path = {"conversation_id": conversation_id}
        return self._client._request(Call(e.CONVERSATION_DELETE, path))


class Responses:
    """``client.responses``: OpenAI's Responses API over the agent with memory."""

    def __init__(self, client: AgentHarness) -> None:
        self._client = client

    def create(
        self,
        input: str | Sequence[Mapping[str, Any]],
        *,
        model: str = "agent-harness",
        instructions: str | None = None,
        previous_response_id: str | None = None,
        conversation: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        text: Mapping[str, Any] | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        max_output_tokens: int | None = None,
        metadata: Mapping[str, str] | None = None,
        store: bool | None = None,
        session_id: str | None = None,
        scopes: Sequence[str] | None = None,
    ) -> ResponseObject:
        """One turn as a response (no streaming). ``session_id`` pins the session
        (X-Session-Id), ``scopes`` binds shared scopes (X-Harness-Scopes)."""
        body = {
            "model": model,
            "input": input,
            "instructions": instructions,
            "previous_response_id": previous_response_id,
            "conversation": conversation,
            "tools": tools,
            "tool_choice": tool_choice,
            "text": text,
            "temperature": temperature,
            "top_p": top_p,
            "max_output_tokens": max_output_tokens,
            "metadata": metadata,
            "store": store,
        }
        headers = {"X-Session-Id": session_id, "X-Harness-Scopes": _scopes_header(scopes)}
        call = Call(e.RESPONSE_CREATE, body=body, headers=headers)
        return self._client._request(call)

    def retrieve(self, response_id: str) -> ResponseObject:
        """A stored response, as it was created."""
        return self._client._request(Call(e.RESPONSE_GET, {"response_id": response_id}))

    def delete(self, response_id: str) -> ResponseDeleted:
        """Forget a stored response (its turn stays its session's)."""
        return self._client._request(Call(e.RESPONSE_DELETE, {"response_id": response_id}))


class ChatCompletions:
    """``client.chat.completions``: OpenAI's chat API over the agent with memory."""

    def __init__(self, client: AgentHarness) -> None:
        self._client = client

    def create(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        model: str = "agent-harness",
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        response_format: Mapping[str, Any] | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        stop: str | Sequence[str] | None = None,
        seed: int | None = None,
        session_id: str | None = None,
        scopes: Sequence[str] | None = None,
    ) -> ChatCompletion:
        """One chat completion (no streaming); ``session_id`` and ``scopes`` as on
        ``responses.create``."""
        body = {
            "model": model,
            "messages": messages,
            "tools": tools,
            "tool_choice": tool_choice,
            "response_format": response_format,
            "temperature": temperature,
            "top_p": top_p,
            "max_tokens": max_tokens,
            "stop": stop,
            "seed": seed,
        }
        headers = {"X-Session-Id": session_id, "X-Harness-Scopes": _scopes_header(scopes)}
        return self._client._request(Call(e.CHAT, body=body, headers=headers))


class Chat:
    """``client.chat``."""

    def __init__(self, client: AgentHarness) -> None:
        self.completions = ChatCompletions(client)


class AgentHarness(ClientBase):
    """The API's client (sync). ``base_url``: the stack (``make dev``'s by default);
    ``token``: a JWT, sent as ``Authorization: Bearer``; ``user_id``: dev mode's user,
    sent as ``X-User-Id``; ``headers``: more of them (``{"X-Admin": "true"}`` for an
    operator in dev mode); ``timeout`` in seconds (default 120, or ``http_client``'s
    own); ``max_retries`` (default 2, see ``agent_harness_client._base``); ``sleep``:
    how to wait before a retry (tests pass their own)."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        token: str | None = None,
        user_id: str | None = None,
        timeout: float | httpx.Timeout | None = None,
        max_retries: int = 2,
        headers: Mapping[str, str] | None = None,
        http_client: httpx.Client | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        super().__init__(
            base_url,
            token=token,
            user_id=user_id,
            timeout=timeout,
            max_retries=max_retries,
            headers=headers,
        )
        self._owns_http = http_client is None
        self._http = http_client or httpx.Client(
            timeout=DEFAULT_TIMEOUT if timeout is None else timeout
        )
        self._sleep = sleep or time.sleep
        self.sessions = Sessions(self)
        self.memory = Memory(self)
        self.admin = Admin(self)
        self.conversations = Conversations(self)
        self.responses = Responses(self)
        self.chat = Chat(self)

    def _request(self, call: Call[T]) -> T:
        """Send ``call``, retrying as the policy says; its answer, parsed."""
        request = self._build(self._http, call)
        attempt = 0
        while True:
            try:
                response = self._http.send(request)
            except httpx.TransportError as exc:
                if attempt < self.max_retries and retry_on_error(exc, request.method):
                    self._sleep(backoff(attempt))
                    attempt += 1
                    continue
                raise APIConnectionError(str(exc) or type(exc).__name__) from exc
            if response.is_success:
                return call.endpoint.parse(response)
            wait = retry_after(response)
            delay = backoff(attempt) if wait is None else wait
            if attempt < self.max_retries and should_retry(response) and delay <= MAX_RETRY_AFTER:
                self._sleep(delay)
                attempt += 1
                continue
            raise error_from_response(response, wait)

    def health(self) -> Health:
        return self._request(Call(e.HEALTH))

    def openapi(self) -> dict[str, Any]:
        """The API's OpenAPI 3.1 document."""
        return self._request(Call(e.OPENAPI))

    def models(self) -> ModelList:
        return self._request(Call(e.MODELS))

    def usage(self, *, days: int | None = None, scope: str | None = None) -> UsageReport:
        """Your spend over the last ``days`` days (or a shared scope's), and the
        consolidation's status."""
        return self._request(Call(e.USAGE, params={"days": days, "scope": scope}))

    def protected_resource(self, *, mcp: bool = False) -> ProtectedResource:
        """The stack's OAuth protected resource metadata (of ``/mcp``'s, with ``mcp``)."""
        return self._request(Call(e.RESOURCE_MCP if mcp else e.RESOURCE))

    def close(self) -> None:
        """Close the HTTP client (unless it was passed in: it is yours to close)."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> AgentHarness:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
