"""The agent acts, over HTTP against the local stack: the caller's own tools (pause with
``requires_action``, results, completion) and remote tools of an MCP server built with the
official SDK (`local_stack/mcp_demo.py`, Streamable HTTP on 127.0.0.1), one server up and
one down. The agent model is the scripted fake, so the tests see exactly what it was sent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from local_stack.mcp_demo import ORDERS, serve_in_thread
from local_stack.process import free_port
from tests.e2e.conftest import FakeLLM, LocalStackProcess, start_stack, stop_stack, wait_for
from tests.fakes import ORDER_TOOL as PLAIN_ORDER_TOOL
from tests.fakes import openai_tool

BUCKET = "agent-harness-local-workspace"
ORDER_TOOL = openai_tool(PLAIN_ORDER_TOOL)
TICKET_TOOL = {
    "name": "open_ticket",
    "description": "Open a support ticket",
    "parameters": {"type": "object", "properties": {"title": {"type": "string"}}},
}
KEEP = 4  # messages kept by compaction in this stack


@pytest.fixture(scope="module")
def tools_stack(fake_llm: FakeLLM) -> Iterator[LocalStackProcess]:
    """Remote tools of the demo server ("shop") and of a server that is down ("gone");
    compaction at 8 messages, so a few turns reach it."""
    shop = serve_in_thread(free_port())
    servers = [
        {"name": "shop", "url": shop.url, "forward_user": True},
        {"name": "gone", "url": f"http://127.0.0.1:{free_port()}/mcp", "timeout_seconds": 2},
    ]
    stack = start_stack(
        {
            "HARNESS_MODEL": "openai:fake-e2e",
            "HARNESS_MEMORY_MODEL": "offline",
            "HARNESS_COMPACTION_MODEL": "offline",
            "OPENAI_BASE_URL": f"http://127.0.0.1:{fake_llm.port}/v1",
            "OPENAI_API_KEY": "sk-e2e",
            "HARNESS_MCP_SERVERS": json.dumps(servers),
            "HARNESS_COMPACTION_TRIGGER_MESSAGES": "8",
            "HARNESS_COMPACTION_KEEP_MESSAGES": str(KEEP),
            "HARNESS_COMPACTION_KEEP_TOKENS": "0",
        }
    )
    yield stack
    stop_stack(stack)
    shop.stop()


def offered(request: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools", [])]


def tool_pairs_intact(request: dict[str, Any]) -> bool:
    """Every tool message answers a call of the assistant message before its run."""
    calls: set[str] = set()
    for message in request["messages"]:
        if message["role"] == "assistant":
            calls = {c["id"] for c in message.get("tool_calls") or []}
        elif message["role"] == "tool" and message["tool_call_id"] not in calls:
            return False
    return True


def test_a_client_tool_round_trip_shows_the_model_exactly_the_call_and_its_result(
    tools_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    question = "Where is my order 42?"
    fake_llm.script(
        question, [("call_a", "lookup_order", {"order_id": 42})], "Order 42 shipped with DHL."
    )
    erin = tools_stack.client("e2e-erin")

    paused = erin.post(
        "/v1/sessions/orders/messages", json={"message": question, "tools": [ORDER_TOOL]}
    )

    assert paused.status_code == 200, paused.text
    body = paused.json()
    assert (body["status"], body["reply"], body["turn"]) == ("requires_action", None, 1)
    assert body["tool_calls"] == [
        {"id": "call_a", "name": "lookup_order", "arguments": {"order_id": 42}}
    ]
    busy = erin.post("/v1/sessions/orders/messages", json={"message": "hello?"})
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "tool_results_required"

    result = '{"order_id": 42, "status": "shipped", "carrier": "DHL"}'
    done = erin.post(
        "/v1/sessions/orders/messages",
        json={"tool_results": [{"tool_call_id": "call_a", "content": result}]},
    )

    assert done.status_code == 200, done.text
    assert done.json()["status"] == "completed" and done.json()["turn"] == 1
    assert done.json()["reply"] == "Order 42 shipped with DHL."
    first, second = fake_llm.requests_of(question)
    assert "lookup_order" in offered(first) and "memory_search" in offered(first)
    assert second["messages"][-3:] == [
        {"role": "user", "content": question},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": '{"order_id": 42}'},
                }
            ],
        },
        {"role": "tool", "content": result, "tool_call_id": "call_a", "name": "lookup_order"},
    ]
    [turn] = erin.get("/v1/sessions/orders/messages").json()["turns"]
    assert [m["role"] for m in turn["messages"]] == ["user", "assistant", "tool", "assistant"]
    # the thread log's tool traffic is searchable, as data
    hits = wait_for(
        lambda: erin.post(
            "/v1/sessions/search", json={"query": "carrier", "match_mode": "any"}
        ).json()["hits"]
    )
    assert hits[0]["role"] == "tool" and "DHL" in hits[0]["text"]


def test_two_client_calls_in_one_response_are_answered_in_call_order(
    tools_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    question = "Check order 7 and open a ticket"
    fake_llm.script(
        question,
        [("c1", "lookup_order", {"order_id": 7}), ("c2", "open_ticket", {"title": "late"})],
        "Ticket T-1 is open for order 7.",
    )
    fay = tools_stack.client("e2e-fay")
    paused = fay.post(
        "/v1/sessions/two/messages",
        json={"message": question, "tools": [ORDER_TOOL, TICKET_TOOL]},
    ).json()
    assert [c["id"] for c in paused["tool_calls"]] == ["c1", "c2"]

    done = fay.post(
        "/v1/sessions/two/messages",
        json={
            "tool_results": [
                {"tool_call_id": "c2", "content": "T-1"},
                {"tool_call_id": "c1", "content": "in the warehouse"},
            ]
        },
    )

    assert done.json()["status"] == "completed"
    last = fake_llm.requests_of(question)[-1]["messages"]
    assert [(m["tool_call_id"], m["content"]) for m in last if m["role"] == "tool"] == [
        ("c1", "in the warehouse"),
        ("c2", "T-1"),
    ]


def test_a_pause_across_a_compaction_keeps_each_call_with_its_result(
    tools_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    gus = tools_stack.client("e2e-gus")
    for n in range(4):  # 8 messages: the next turn compacts
        assert gus.post("/v1/sessions/long/messages", json={"message": f"note {n}"}).is_success
    question = "Where is order 42 now?"
    fake_llm.script(question, [("k1", "lookup_order", {"order_id": 42})], "It has shipped.")

    paused = gus.post(
        "/v1/sessions/long/messages", json={"message": question, "tools": [ORDER_TOOL]}
    ).json()
    done = gus.post(
        "/v1/sessions/long/messages",
        json={"tool_results": [{"tool_call_id": "k1", "content": "shipped"}]},
    ).json()
    for n in range(4, 10):  # more turns: later compactions cut around the call
        later = gus.post("/v1/sessions/long/messages", json={"message": f"note {n}"}).json()
        assert later["status"] == "completed"

    assert paused["status"] == "requires_action" and paused["compacted"] is True
    assert done["status"] == "completed" and done["compacted"] is True
    assert done["usage"]["by_role"]["compaction"]["input_tokens"] > 0
    resumed = fake_llm.requests_of(question)[-1]
    assert any("conversation_summary" in m["content"] for m in resumed["messages"][:3])
    sent = [r for r in fake_llm.requests if any("note 0" in str(m) for m in r["messages"])]
    sent += [r for r in fake_llm.requests if last_note(r) is not None]
    assert len(sent) >= 10 and all(tool_pairs_intact(r) for r in sent)
    turns = gus.get("/v1/sessions/long/messages", params={"limit": 50}).json()["turns"]
    assert [t["turn"] for t in turns] == list(range(1, 12))  # the log keeps everything


def last_note(request: dict[str, Any]) -> str | None:
    text = request["messages"][-1].get("content") or ""
    return text if text.startswith("note ") else None


def test_a_300000_character_client_result_is_evicted_with_a_preview(
    tools_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    question = "Export the whole order history"
    fake_llm.script(question, [("big", "lookup_order", {"order_id": 1})], "Exported.")
    hal = tools_stack.client("e2e-hal")
    hal.post("/v1/sessions/export/messages", json={"message": question, "tools": [ORDER_TOOL]})
    history = "".join(f"order {n:06d}: delivered\n" for n in range(12_500))  # 300,000 chars
    assert len(history) == 300_000

    done = hal.post(
        "/v1/sessions/export/messages",
        json={"tool_results": [{"tool_call_id": "big", "content": history}]},
    )

    assert done.status_code == 200 and done.json()["status"] == "completed"
    seen = fake_llm.requests_of(question)[-1]["messages"][-1]["content"]
    assert "too large (300,000 characters)" in seen and len(seen) < 10_000
    listed = tools_stack.s3().list_objects_v2(
        Bucket=BUCKET, Prefix="users/e2e-hal/tool-results/export/"
    )
    [stored] = listed["Contents"]
    path = seen.split("`")[1]  # the preview names where the whole result is
    assert stored["Size"] == 300_000 and stored["Key"] == f"users/e2e-hal/{path}"


def test_a_remote_mcp_tool_runs_on_the_server_and_its_result_reaches_the_model(
    tools_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    question = "Ask the shop about order 42 and who I am"
    fake_llm.script(
        question,
        [("m1", "shop__lookup_order", {"order_id": 42}), ("m2", "shop__whoami", {})],
        "The shop says it shipped.",
    )
    ivy = tools_stack.client("e2e-ivy")

    done = ivy.post("/v1/sessions/shop/messages", json={"message": question})

    assert done.status_code == 200, done.text
    assert done.json()["status"] == "completed" and done.json()["tool_calls"] == []
    first, second = fake_llm.requests_of(question)
    names = offered(first)
    assert {"shop__lookup_order", "shop__open_ticket", "shop__whoami"} <= set(names)
    assert not any(name.startswith("gone__") for name in names)  # the down server
    schema = next(t for t in first["tools"] if t["function"]["name"] == "shop__lookup_order")
    assert schema["function"]["parameters"]["required"] == ["order_id"]
    results = {m["tool_call_id"]: m["content"] for m in second["messages"] if m["role"] == "tool"}
    assert results == {"m1": f"order 42: {ORDERS[42]}", "m2": "e2e-ivy"}


def test_a_tool_server_that_is_down_is_left_out_and_the_turn_goes_on(
    tools_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    question = "Just say hello, please"
    jo = tools_stack.client("e2e-jo")
    reply = jo.post("/v1/sessions/hi/messages", json={"message": question})
    assert reply.status_code == 200 and reply.json()["reply"] == f"ack: {question}"
    [request] = fake_llm.requests_of(question)
    assert not any(name.startswith("gone__") for name in offered(request))
    assert any("gone" in line and "left out" in line.lower() for line in tools_stack.output)


def test_the_documented_client_tool_example_runs_on_the_offline_stand_in(
    offline_stack: LocalStackProcess,
) -> None:
    """The curl example of docs/api.md#tools-yours-and-remote-ones, answer for answer."""
    me = offline_stack.client("e2e-readme")
    paused = me.post(
        "/v1/sessions/s3/messages",
        json={"message": "Where is my order 42?", "tools": [PLAIN_ORDER_TOOL]},
    ).json()
    assert paused["status"] == "requires_action"
    assert paused["tool_calls"] == [
        {"id": "offline-call-1", "name": "lookup_order", "arguments": {"order_id": 42}}
    ]
    done = me.post(
        "/v1/sessions/s3/messages",
        json={
            "tool_results": [{"tool_call_id": "offline-call-1", "content": "shipped on 2026-11-28"}]
        },
    ).json()
    assert (done["status"], done["turn"]) == ("completed", 1)
    assert done["reply"] == "[offline model] lookup_order returned: shipped on 2026-11-28"
