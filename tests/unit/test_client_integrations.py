"""``HarnessStore`` (LangGraph) and ``HarnessSession`` (OpenAI Agents SDK) on the real
routes in this process (tests/unit/test_client_answers.py's transport): what each
operation asks the API and makes of its answers. The local stack runs them with LangGraph
graphs and the Agents SDK's Runner in tests/e2e/test_client_langgraph.py and
test_client_agents.py."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from langgraph.store.base import ListNamespacesOp, MatchCondition, PutOp

from agent_harness_client import AgentHarness, AsyncAgentHarness, NotFoundError
from agent_harness_client.agents import HarnessSession
from agent_harness_client.langgraph import HarnessStore, key_mark
from tests.unit.test_client_answers import app_transport
from tests.unit.test_routes import dev_runtime


def clients(user: str = "alice") -> tuple[AgentHarness, AsyncAgentHarness]:
    transport = app_transport(dev_runtime())
    sync = AgentHarness("http://stack", user_id=user, http_client=httpx.Client(transport=transport))
    http = httpx.AsyncClient(transport=transport)
    return sync, AsyncAgentHarness("http://stack", user_id=user, http_client=http)


def test_the_store_keeps_each_key_as_one_current_fact() -> None:
    sync, asynchronous = clients()
    store = HarnessStore(sync, async_client=asynchronous)
    me = ("memories", "alice")
    store.put(me, "tea", {"text": "I prefer green\ntea."})  # one line: one fact
    item = store.get(me, "tea")
    assert item is not None and item.value["text"] == "I prefer green tea."
    assert item.value["state"] == "current" and item.value["authority"] == "save:api"
    store.put(me, "tea", {"text": "I prefer oolong."})
    assert store.get(me, "tea").value["text"] == "I prefer oolong."
    hits = sync.memory.search(key_mark("tea"), include_superseded=True).hits
    assert {h.state for h in hits if h.fact_id} == {"superseded", "current"}
    store.batch([PutOp(me, "tea", None)])  # a put of None deletes
    assert store.get(me, "tea") is None
    store.delete(me, "never-put")  # nothing to retract: nothing done


def test_search_ranks_lists_filters_and_pages() -> None:
    sync, asynchronous = clients()
    store = HarnessStore(sync, async_client=asynchronous)
    me = ("user",)
    for key, text in [("a", "I cycle to work."), ("b", "I cycle on Sundays."), ("c", "Tea.")]:
        store.put(me, key, {"text": text})
    assert [i.key for i in store.search(me)] == ["a", "b", "c"]
    assert [i.key for i in store.search(me, limit=1, offset=1)] == ["b"]
    ranked = store.search(me, query="cycle Sundays")
    assert ranked[0].key == "b" and ranked[0].score is not None
    assert [i.key for i in store.search(me, filter={"text": {"$ne": "Tea."}})] == ["a", "b"]
    assert store.search(me, filter={"line": {"$gt": 10_000}}) == []
    with pytest.raises(ValueError, match="operator"):
        store.search(me, filter={"text": {"$like": "x"}})


def test_namespaces_are_the_callers_memory_and_the_scopes_named() -> None:
    sync, _ = clients()
    store = HarnessStore(sync, scopes=["project:apollo", "org"])
    assert store.list_namespaces() == [
        ("memories", "alice"),
        ("scope", "project:apollo"),
        ("scope", "org"),
    ]
    assert store.list_namespaces(prefix=("scope",)) == [
        ("scope", "project:apollo"),
        ("scope", "org"),
    ]
    assert store.list_namespaces(suffix=("org",)) == [("scope", "org")]
    assert store.list_namespaces(max_depth=1) == [("memories",), ("scope",)]
    wild = ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("*", "org")),))
    assert store.batch([wild]) == [[("scope", "org")]]
    for bad in [("memories", "bob"), ("notes",), ("scope",)]:
        with pytest.raises(ValueError):
            store.get(bad, "k")
    with pytest.raises(ValueError, match="key"):
        store.put(("user",), "a]b", {"text": "x"})
    with pytest.raises(ValueError, match="text"):
        store.put(("user",), "k", {"other": 1})


def test_the_store_runs_async_with_its_own_client() -> None:
    sync, asynchronous = clients()
    store = HarnessStore(sync, async_client=asynchronous)

    async def scenario() -> Any:
        await store.aput(("user",), "pet", {"content": "My cat is Miso."})
        found = await store.asearch(("user",), query="cat")
        return await store.aget(("user",), "pet"), found

    item, found = asyncio.run(scenario())
    assert item.value["text"] == "My cat is Miso." and found[0].key == "pet"
    made = HarnessStore(sync)  # the async client, made like the sync one
    assert made.async_client.base_url == "http://stack" and made.async_client.user_id == "alice"


def test_the_session_adds_reads_pops_and_clears_its_conversation() -> None:
    _, asynchronous = clients()
    session = HarnessSession(asynchronous, metadata={"app": "unit"})
    said: list[Any] = [
        {"role": "user", "content": f"message {n}"}
        if n % 2 == 0
        else {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": f"answer {n}", "annotations": []}],
            "provider_data": {"model": "x"},
        }
        for n in range(24)
    ] + [{"type": "reasoning", "summary": []}]

    async def scenario() -> dict[str, Any]:
        assert await session.get_items() == []  # creates the conversation
        conversation = session.session_id
        await session.add_items(said)  # two requests: 20 items, then 4
        everything = await session.get_items()
        latest = await session.get_items(limit=3)
        popped = await session.pop_item()
        left = await session.get_items()
        meta = (await asynchronous.conversations.retrieve(conversation)).metadata
        await session.clear_session()
        with pytest.raises(NotFoundError):
            await asynchronous.conversations.retrieve(conversation)
        return {
            "conversation": conversation,
            "everything": everything,
            "latest": latest,
            "popped": popped,
            "left": left,
            "meta": meta,
        }

    done = asyncio.run(scenario())
    texts = [
        i["content"][0]["text"] if isinstance(i["content"], list) else i["content"]
        for i in done["everything"]
    ]
    assert texts == [f"{'message' if n % 2 == 0 else 'answer'} {n}" for n in range(24)]
    assert done["latest"] == done["everything"][-3:]
    assert done["popped"] == done["everything"][-1] and done["left"] == done["everything"][:-1]
    assert done["meta"] == {"app": "unit"}
    with pytest.raises(ValueError):
        _ = session.session_id  # cleared: a new conversation at the next read or write
