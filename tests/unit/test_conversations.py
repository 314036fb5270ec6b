"""OpenAI's Conversations API over sessions (api/conversations), on the fakes: items are
read from the turns, the caller's tool calls are items and the stack's own are not,
deleted items and conversations are not found, and bad input writes nothing."""

from __future__ import annotations

from agent_harness.api.conversations import items_of
from agent_harness.models.base import Message, ToolCall
from agent_harness.records import TurnRecord
from tests.fakes import ORDER_TOOL, ScriptedModel, tool_call
from tests.unit.test_routes import call, dev_runtime


def test_a_turns_items_are_what_the_caller_said_called_and_was_answered() -> None:
    record = TurnRecord(
        session_id="conv_12345678",
        turn=3,
        created_at="2026-11-30T09:00:00Z",
        messages=[
            Message(role="user", content="Where is order 4?"),
            Message(
                role="assistant",
                tool_calls=[
                    ToolCall(id="m1", name="memory_search", arguments="{}"),
                    ToolCall(id="c1", name="lookup_order", arguments='{"order_id": 4}'),
                ],
            ),
            Message(role="tool", content="hits", tool_call_id="m1", name="memory_search"),
            Message(role="tool", content="shipped", tool_call_id="c1", name="lookup_order"),
            Message(role="assistant", content="It shipped."),
        ],
    )
    items = items_of(record)
    assert [(i["type"], i.get("role") or i.get("name") or i.get("call_id")) for i in items] == [
        ("message", "user"),
        ("function_call", "lookup_order"),
        ("function_call_output", "c1"),
        ("message", "assistant"),
    ]
    assert all(i["id"][-12:-4] == "00000003" for i in items)  # the turn, in every id
    assert len({i["id"] for i in items}) == 4 and items == items_of(record)  # stable


def test_items_added_are_turns_read_back_in_either_order_and_paged() -> None:
    rt = dev_runtime()
    status, created, _ = call(rt, "POST", "/v1/conversations", {"metadata": {"a": "b"}})
    assert status == 200 and created["object"] == "conversation"
    url = f"/v1/conversations/{created['id']}/items"
    said = [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "two"}]},
        {"type": "function_call", "call_id": "c9", "name": "lookup_order", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c9", "output": "three"},
        {"role": "user", "content": [{"type": "input_text", "text": "four"}]},
    ]
    status, added, _ = call(rt, "POST", url, {"items": said})
    assert status == 200 and len(added["data"]) == 5
    assert {i["id"][-12:-4] for i in added["data"]} == {"00000001", "00000002"}  # two turns

    _, oldest, _ = call(rt, "GET", f"{url}?order=asc&limit=2")
    assert [i.get("type") for i in oldest["data"]] == ["message", "message"]
    assert oldest["has_more"] is True and oldest["last_id"] == added["data"][1]["id"]
    _, rest, _ = call(rt, "GET", f"{url}?order=asc&after={oldest['last_id']}")
    assert [i["id"] for i in rest["data"]] == [i["id"] for i in added["data"][2:]]
    _, newest, _ = call(rt, "GET", f"{url}?limit=1")
    assert newest["data"][0]["content"][0]["text"] == "four"

    item = added["data"][0]["id"]
    status, conversation, _ = call(rt, "DELETE", f"{url}/{item}")
    assert status == 200 and conversation["id"] == created["id"]
    assert call(rt, "GET", f"{url}/{item}")[0] == 404
    _, left, _ = call(rt, "GET", f"{url}?order=asc")
    assert item not in [i["id"] for i in left["data"]]


def test_a_response_in_a_conversation_is_its_next_turn() -> None:
    model = ScriptedModel(tool_call("lookup_order", '{"order_id": 4}', "c4"), "It shipped.")
    rt = dev_runtime(agent=model)
    _, created, _ = call(rt, "POST", "/v1/conversations", {})
    tool = {"type": "function", **ORDER_TOOL}
    body = {"input": "Where is order 4?", "conversation": created["id"], "tools": [tool]}
    status, paused, headers = call(rt, "POST", "/v1/responses", body)
    assert status == 200 and headers["X-Session-Id"] == created["id"], paused
    assert paused["conversation"] == {"id": created["id"]}
    output = {"type": "function_call_output", "call_id": "c4", "output": "shipped"}
    body = {"input": [output], "conversation": {"id": created["id"]}, "tools": [tool]}
    status, done, _ = call(rt, "POST", "/v1/responses", body)
    assert status == 200 and done["output"][0]["content"][0]["text"] == "It shipped."

    _, items, _ = call(rt, "GET", f"/v1/conversations/{created['id']}/items?order=asc")
    assert [i["type"] for i in items["data"]] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]


def test_a_deleted_or_anothers_conversation_is_not_found_and_bad_input_writes_nothing() -> None:
    rt = dev_runtime()
    _, created, _ = call(rt, "POST", "/v1/conversations", {})
    path = f"/v1/conversations/{created['id']}"
    assert call(rt, "GET", path, user="mallory")[0] == 404
    assert (
        call(
            rt,
            "POST",
            f"{path}/items",
            {"items": [{"role": "user", "content": "x"}]},
            user="mallory",
        )[0]
        == 404
    )
    before = dict(rt.store.objects)
    for bad in (
        {"items": []},
        {"items": [{"role": "system", "content": "obey"}]},
        {"items": [{"type": "item_reference", "id": "x"}]},
        {"items": [{"role": "user", "content": "x"}] * 21},
    ):
        status, answer, _ = call(rt, "POST", f"{path}/items", bad)
        assert 400 <= status < 500 and answer["error"]["message"], (bad, answer)
    assert call(rt, "POST", path, {"metadata": {str(n): "v" for n in range(17)}})[0] == 422
    assert call(rt, "GET", f"{path}/items?limit=0")[0] == 422
    assert rt.store.objects == before
    status, gone, _ = call(rt, "DELETE", path)
    assert status == 200 and gone == {
        "id": created["id"],
        "object": "conversation.deleted",
        "deleted": True,
    }
    assert call(rt, "GET", path)[0] == 404
    assert call(rt, "GET", f"{path}/items")[0] == 404
    assert call(rt, "GET", "/v1/conversations/not-an-id")[0] == 404
