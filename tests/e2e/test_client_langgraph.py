"""``HarnessStore`` with the real LangGraph against the local stack (every role offline):
put, get, search and delete of the caller's memory and of a shared scope's, each item a
fact with its authority and state; and graphs whose nodes use the store
(``builder.compile(store=store)``), run with ``invoke`` (``batch``) and ``ainvoke``
(``abatch``)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore, Item

from agent_harness_client import AgentHarness, AsyncAgentHarness, PermissionDeniedError
from agent_harness_client.langgraph import HarnessStore
from local_stack.process import LocalStackProcess


def fresh(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"


def store_of(stack: LocalStackProcess, user: str, **kwargs: Any) -> HarnessStore:
    return HarnessStore(
        AgentHarness(stack.url, user_id=user),
        async_client=AsyncAgentHarness(stack.url, user_id=user),
        **kwargs,
    )


def test_put_get_search_and_delete_are_facts(offline_stack: LocalStackProcess) -> None:
    user = fresh("lg-amy")
    store = store_of(offline_stack, user)
    me = ("memories", user)
    assert isinstance(store, BaseStore)

    store.put(me, "diet", {"text": "I am vegetarian."})
    store.put(me, "city", {"content": "I live in Porto."})
    diet = store.get(me, "diet")
    assert isinstance(diet, Item) and diet.key == "diet" and diet.namespace == me
    assert diet.value["text"] == "I am vegetarian."
    assert (diet.value["authority"], diet.value["state"]) == ("save:api", "current")
    first_id = diet.value["fact_id"]
    assert first_id and diet.created_at <= diet.updated_at
    with AgentHarness(offline_stack.url, user_id=user) as client:
        assert "I am vegetarian. [key:diet]" in client.memory.get().content  # the key, visible

    store.put(me, "diet", {"text": "I am vegan now."})  # a correction of the fact
    diet = store.get(me, "diet")
    assert diet is not None and diet.value["text"] == "I am vegan now."
    assert diet.value["authority"] == "user" and diet.value["fact_id"] != first_id
    store.put(me, "diet", {"text": "I am vegan now."})  # the same again: nothing written
    with AgentHarness(offline_stack.url, user_id=user) as client:
        history = client.memory.fact(diet.value["fact_id"]).history
        assert [h.state for h in history] == ["superseded", "current"]

    ranked = store.search(me, query="vegan")
    assert ranked[0].key == "diet" and ranked[0].value["text"] == "I am vegan now."
    listed = {item.key: item.value["text"] for item in store.search(me)}
    assert listed == {"diet": "I am vegan now.", "city": "I live in Porto."}
    by_user = store.search(me, filter={"authority": "user"})
    assert [item.key for item in by_user] == ["diet"]
    assert store.search(("user",), query="Porto")[0].value["text"] == "I live in Porto."
    assert store.list_namespaces() == [me]

    store.delete(me, "diet")  # retracted
    assert store.get(me, "diet") is None
    assert [item.key for item in store.search(me)] == ["city"]
    with pytest.raises(ValueError, match="acts as"):
        store.get(("memories", "somebody-else"), "city")
    with pytest.raises(ValueError, match="shared scope"):
        store.put(("notes",), "x", {"text": "y"})


def test_a_shared_scope_is_a_namespace(offline_stack: LocalStackProcess) -> None:
    scope = f"project:{fresh('lg')}"
    maintainer, member, outsider = fresh("lg-max"), fresh("lg-mel"), fresh("lg-out")
    with AgentHarness(offline_stack.url, user_id="ops", headers={"X-Admin": "true"}) as ops:
        ops.admin.set_member(scope, maintainer, "maintainer")
        ops.admin.set_member(scope, member, "member")
    namespace = ("scope", scope)
    store_of(offline_stack, maintainer).put(namespace, "refunds", {"text": "Refunds need two."})
    reader = store_of(offline_stack, member, scopes=[scope])
    item = reader.get(namespace, "refunds")
    assert item is not None and item.value["text"] == "Refunds need two."
    assert reader.search(namespace, query="refunds")[0].key == "refunds"
    assert ("scope", scope) in reader.list_namespaces()
    with pytest.raises(PermissionDeniedError):  # a member reads, a maintainer writes
        reader.put(namespace, "refunds", {"text": "Refunds need one."})
    with pytest.raises(PermissionDeniedError):
        store_of(offline_stack, outsider).get(namespace, "refunds")


class State(TypedDict):
    said: str
    notes: list[str]


def test_a_graph_uses_the_store_in_its_nodes(offline_stack: LocalStackProcess) -> None:
    user = fresh("lg-ben")
    me = ("memories", user)

    def remember(state: State, runtime: Runtime) -> dict[str, list[str]]:
        assert runtime.store is not None
        runtime.store.put(me, "pet", {"text": state["said"]})
        return {}

    def recall(state: State, runtime: Runtime) -> dict[str, list[str]]:
        assert runtime.store is not None
        found = runtime.store.search(me, query="cat", limit=3)
        return {"notes": [item.value["text"] for item in found]}

    async def arecall(state: State, runtime: Runtime) -> dict[str, list[str]]:
        assert runtime.store is not None
        item = await runtime.store.aget(me, "pet")
        return {"notes": [item.value["text"]] if item else []}

    def graph(*nodes: Any) -> Any:
        builder = StateGraph(State)
        previous = START
        for node in nodes:
            builder.add_node(node.__name__, node)
            builder.add_edge(previous, node.__name__)
            previous = node.__name__
        builder.add_edge(previous, END)
        return builder.compile(store=store_of(offline_stack, user))

    out = graph(remember, recall).invoke({"said": "My cat is called Miso.", "notes": []})
    assert out["notes"][0] == "My cat is called Miso."
    out = asyncio.run(graph(arecall).ainvoke({"said": "", "notes": []}))
    assert out["notes"] == ["My cat is called Miso."]
