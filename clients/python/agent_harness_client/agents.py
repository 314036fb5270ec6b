"""``HarnessSession``: the OpenAI Agents SDK's ``Session`` over a conversation of the
stack (``pip install "./clients/python[agents]"``).

    from agents import Agent, Runner
    from agent_harness_client.agents import HarnessSession

    session = HarnessSession()  # AGENT_HARNESS_URL, AGENT_HARNESS_USER or _TOKEN
    await Runner.run(agent, "I live in Lisbon.", session=session)

The session's history is a conversation of the Conversations API (``POST
/v1/conversations``), created at the first read or write: its items are the session's
items, stored as turns of a session of ours, so what is said is remembered like any
session (flushed into the ledger, found by ``thread_search`` and recall), whichever
model the agent runs on. ``clear_session`` deletes the conversation; the next read or
write starts a new one. The stack keeps a conversation's items in order and answers
them with its own ids (``msg_...``); reasoning items without an id are not kept.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Literal, cast

from agent_harness_client._async import AsyncAgentHarness

if TYPE_CHECKING:
    from collections.abc import Mapping

    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings

    from agent_harness_client.openai_types import ConversationItem

__all__ = ["HarnessSession"]

#: the most items one ``POST .../items`` takes
MAX_ITEMS_PER_REQUEST = 20
#: items read per page
PAGE = 100


def _as_input(item: ConversationItem) -> dict[str, Any]:
    """An item as the API sent it (what the SDK sends back as input)."""
    return item.model_dump(mode="json", exclude_unset=True)


def _storable(item: Mapping[str, Any]) -> dict[str, Any] | None:
    """An item as the stack stores it: without the SDK's provider data; None for a
    reasoning item (not a conversation's: the model's own)."""
    if item.get("type") == "reasoning":
        return None
    return {k: v for k, v in item.items() if k != "provider_data"}


class HarnessSession:
    """A session of the OpenAI Agents SDK kept in a conversation of the stack.

    ``client``: the async client (default: ``AsyncAgentHarness()``, configured by the
    environment); ``conversation_id``: an existing conversation to continue (default: a
    new one, created when first needed); ``metadata``: the new conversation's;
    ``session_settings``: the SDK's (its ``limit`` caps what ``get_items`` reads)."""

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        client: AsyncAgentHarness | None = None,
        *,
        conversation_id: str | None = None,
        metadata: Mapping[str, str] | None = None,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.client = client or AsyncAgentHarness()
        self._conversation_id = conversation_id
        self._metadata = dict(metadata or {})
        self.session_settings = session_settings
        self._lock = asyncio.Lock()

    @property
    def session_id(self) -> str:
        """The conversation's id; ValueError until one exists (the first read or write
        creates it)."""
        if self._conversation_id is None:
            raise ValueError(
                "no conversation yet: the session creates one at its first get_items() "
                "or add_items()"
            )
        return self._conversation_id

    async def _conversation(self) -> str:
        if self._conversation_id is None:
            created = await self.client.conversations.create(metadata=self._metadata or None)
            self._conversation_id = created.id
        return self._conversation_id

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The items, oldest first; with ``limit``, the latest ``limit`` of them."""
        async with self._lock:
            return await self._items(limit)

    async def _items(self, limit: int | None) -> list[TResponseInputItem]:
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        if limit is not None and limit <= 0:
            return []
        conversation = await self._conversation()
        items = self.client.conversations.items
        found: list[dict[str, Any]] = []
        after: str | None = None
        while True:
            size = PAGE if limit is None else min(PAGE, limit - len(found))
            order: Literal["asc", "desc"] = "asc" if limit is None else "desc"
            page = await items.list(conversation, limit=size, order=order, after=after)
            found += [_as_input(item) for item in page.data]
            if not page.has_more or not page.data or (limit and len(found) >= limit):
                break
            after = page.last_id
        if limit is not None:
            found.reverse()
        return cast("list[TResponseInputItem]", found)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items``, in requests of at most 20 (a failed request leaves the ones
        before it stored)."""
        stored = [
            one for item in items if (one := _storable(cast("Mapping[str, Any]", item))) is not None
        ]
        if not stored:
            return
        async with self._lock:
            conversation = await self._conversation()
            for start in range(0, len(stored), MAX_ITEMS_PER_REQUEST):
                batch = stored[start : start + MAX_ITEMS_PER_REQUEST]
                await self.client.conversations.items.create(conversation, batch)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the latest item from the conversation's items, and return it."""
        async with self._lock:
            latest = await self._items(1)
            if not latest:
                return None
            item = cast("dict[str, Any]", latest[0])
            await self.client.conversations.items.delete(await self._conversation(), item["id"])
            return latest[0]

    async def clear_session(self) -> None:
        """Delete the conversation; the next read or write starts a new one. What memory
        learned from it stays (``client.memory.forget()`` forgets everything)."""
        async with self._lock:
            if self._conversation_id is None:
                return
            await self.client.conversations.delete(self._conversation_id)
            self._conversation_id = None
