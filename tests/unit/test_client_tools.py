"""The caller's own tools over the HTTP contract, on in-memory fakes: declare, pause with
``requires_action``, resume with ``tool_results``, cancel, time out; refusals write nothing."""

from __future__ import annotations

import json

import pytest

from agent_harness.mcp_config import McpServerConfig
from agent_harness.models.base import Message, ToolCall
from agent_harness.settings import Settings
from tests.fakes import ORDER_TOOL, ScriptedModel, make_runtime
from tests.unit.test_routes import call

TICKET_TOOL = {
    "type": "function",
    "function": {
        "name": "open_ticket",
        "description": "Open a support ticket",
        "parameters": {"type": "object", "properties": {"title": {"type": "string"}}},
    },
}
URL = "/v1/sessions/s1/messages"


def calls(*pairs: tuple[str, dict | str], ids: list[str] | None = None) -> Message:
    """An assistant message calling tools: (name, arguments) pairs."""
    return Message(
        role="assistant",
        tool_calls=[
            ToolCall(
                id=(ids or [f"call_{n}" for n in range(1, len(pairs) + 1)])[n],
                name=name,
                arguments=args if isinstance(args, str) else json.dumps(args),
            )
            for n, (name, args) in enumerate(pairs)
        ],
    )


def runtime(model: ScriptedModel, **settings: object):
    return make_runtime(settings=Settings(auth_mode="dev", **settings), agent=model)


def turn_keys(rt) -> list[str]:
    return sorted(k for k in rt.store.objects if "/turns/" in k)


def session_item(rt):
    return rt.table.sessions[("alice", "s1")]


def test_a_client_tool_call_pauses_the_turn_and_its_result_completes_the_same_turn() -> None:
    model = ScriptedModel(calls(("lookup_order", {"order_id": 42})), "Order 42 has shipped.")
    rt = runtime(model)

    status, paused, _ = call(
        rt, "POST", URL, {"message": "Where is order 42?", "tools": [ORDER_TOOL]}
    )

    assert status == 200, paused
    assert paused["status"] == "requires_action" and paused["reply"] is None
    assert paused["turn"] == 1 and paused["flush"] is None
    assert paused["tool_calls"] == [
        {"id": "call_1", "name": "lookup_order", "arguments": {"order_id": 42}}
    ]
    assert [t.name for t in model.requests[0].tools][-1] == "lookup_order"
    # durable and released: the pending call in the context and the item, no turn yet
    assert turn_keys(rt) == [] and rt.queue.post_turn == []
    item = session_item(rt)
    assert item.lease_owner is None and item.state.pause is not None
    context = json.loads(rt.store.text(rt_user(), "sessions/s1/context.json"))
    assert context["pending"]["calls"][0]["id"] == "call_1"
    assert item.state.pause.pause_id == context["pending"]["pause_id"]

    result = {"tool_call_id": "call_1", "content": "shipped on 2026-11-28"}
    status, done, _ = call(rt, "POST", URL, {"tool_results": [result]})

    assert status == 200, done
    assert done["status"] == "completed" and done["turn"] == 1 and done["tool_calls"] == []
    assert done["reply"] == "Order 42 has shipped."
    assert done["usage"]["by_role"]["agent"] == {"input_tokens": 20, "output_tokens": 10}
    seen = model.requests[1].messages
    assert seen[-2].tool_calls[0].name == "lookup_order"
    assert (seen[-1].role, seen[-1].tool_call_id, seen[-1].content) == (
        "tool",
        "call_1",
        "shipped on 2026-11-28",
    )
    record = json.loads(rt.store.text(rt_user(), "sessions/s1/turns/00000001.json"))
    assert [m["role"] for m in record["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert len(record["pauses"]) == 1
    assert [(j.session_id, j.turn) for j in rt.queue.post_turn] == [("s1", 1)]
    assert session_item(rt).state.pause is None and session_item(rt).state.turn == 1


def rt_user():
    from agent_harness.ids import User

    return User.from_id("alice")


def test_memory_tools_in_the_same_response_run_first_and_results_follow_the_call_order() -> None:
    model = ScriptedModel(
        calls(
            ("open_ticket", {"title": "late"}),
            ("memory_search", {"query": "order"}),
            ("lookup_order", {"order_id": 7}),
        ),
        "Done.",
    )
    rt = runtime(model)

    _, paused, _ = call(
        rt, "POST", URL, {"message": "Check order 7", "tools": [ORDER_TOOL, TICKET_TOOL]}
    )
    assert [c["name"] for c in paused["tool_calls"]] == ["open_ticket", "lookup_order"]

    results = [
        {"tool_call_id": "call_3", "content": "order 7: in transit"},
        {"tool_call_id": "call_1", "content": "ticket T-1", "is_error": False},
    ]
    _, done, _ = call(rt, "POST", URL, {"tool_results": results})

    assert done["status"] == "completed"
    tool_messages = [m for m in model.requests[1].messages if m.role == "tool"]
    assert [m.tool_call_id for m in tool_messages] == ["call_1", "call_2", "call_3"]
    assert tool_messages[0].content == "ticket T-1"
    assert tool_messages[2].content == "order 7: in transit"


def test_an_error_result_reaches_the_model_as_an_error() -> None:
    model = ScriptedModel(calls(("lookup_order", {"order_id": 1})), "Sorry.")
    rt = runtime(model)
    call(rt, "POST", URL, {"message": "order 1?", "tools": [ORDER_TOOL]})
    results = [{"tool_call_id": "call_1", "content": "database down", "is_error": True}]
    call(rt, "POST", URL, {"tool_results": results})
    assert model.requests[1].messages[-1].content == "Error: database down"


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ("{not json", "Error: the arguments of lookup_order are not valid JSON"),
        ('{"order_id": "42"}', "Error: invalid arguments for lookup_order: order_id"),
        ("{}", "Error: invalid arguments for lookup_order:"),
    ],
)
def test_a_malformed_client_call_is_answered_to_the_model_and_never_reaches_the_caller(
    arguments: str, error: str
) -> None:
    model = ScriptedModel(calls(("lookup_order", arguments)), "I could not look it up.")
    rt = runtime(model)

    _, done, _ = call(rt, "POST", URL, {"message": "order?", "tools": [ORDER_TOOL]})

    assert done["status"] == "completed" and done["tool_calls"] == []
    assert model.requests[1].messages[-1].content.startswith(error)


def test_a_message_while_results_are_awaited_is_409_with_the_pending_calls() -> None:
    model = ScriptedModel(calls(("lookup_order", {"order_id": 3})))
    rt = runtime(model)
    call(rt, "POST", URL, {"message": "order 3?", "tools": [ORDER_TOOL]})
    before = dict(rt.store.objects)

    status, body, _ = call(rt, "POST", URL, {"message": "hello?"})

    assert status == 409 and body["error"]["code"] == "tool_results_required"
    assert body["error"]["details"]["tool_calls"] == [
        {"id": "call_1", "name": "lookup_order", "arguments": {"order_id": 3}}
    ]
    assert body["error"]["details"]["turn"] == 1
    assert rt.store.objects == before and len(model.requests) == 1
    assert session_item(rt).lease_owner is None


@pytest.mark.parametrize(
    "results",
    [
        [{"tool_call_id": "call_9", "content": "x"}],
        [{"tool_call_id": "call_1", "content": "x"}, {"tool_call_id": "call_9", "content": "y"}],
        [{"tool_call_id": "call_1", "content": "x"}],  # call_2 missing
    ],
)
def test_results_for_unknown_calls_or_missing_one_are_422_and_change_nothing(results) -> None:
    model = ScriptedModel(calls(("lookup_order", {"order_id": 1}), ("open_ticket", {})))
    rt = runtime(model)
    call(rt, "POST", URL, {"message": "go", "tools": [ORDER_TOOL, TICKET_TOOL]})
    before = dict(rt.store.objects)

    status, body, _ = call(rt, "POST", URL, {"tool_results": results})

    assert status == 422, body
    assert [c["id"] for c in body["error"]["details"]["tool_calls"]] == ["call_1", "call_2"]
    assert rt.store.objects == before and len(model.requests) == 1


def test_a_repeated_submission_gets_the_same_answer_and_never_runs_the_model_twice() -> None:
    model = ScriptedModel(calls(("lookup_order", {"order_id": 5})), "Shipped.")
    rt = runtime(model)
    call(rt, "POST", URL, {"message": "order 5?", "tools": [ORDER_TOOL]})
    payload = {"tool_results": [{"tool_call_id": "call_1", "content": "shipped"}]}
    _, first, _ = call(rt, "POST", URL, payload)

    status, again, _ = call(rt, "POST", URL, payload)

    assert status == 200 and again["reply"] == first["reply"] == "Shipped."
    assert again["turn"] == first["turn"] == 1 and again["status"] == "completed"
    assert len(model.requests) == 2 and len(rt.queue.post_turn) == 1


def test_results_already_taken_while_the_turn_awaits_others_are_409() -> None:
    model = ScriptedModel(
        calls(("lookup_order", {"order_id": 1})),
        calls(("open_ticket", {"title": "lost"}), ids=["call_b"]),
        "Ticket opened.",
    )
    rt = runtime(model)
    call(rt, "POST", URL, {"message": "go", "tools": [ORDER_TOOL, TICKET_TOOL]})
    first = {"tool_results": [{"tool_call_id": "call_1", "content": "not found"}]}
    _, second_pause, _ = call(rt, "POST", URL, first)
    assert second_pause["status"] == "requires_action" and second_pause["turn"] == 1

    status, body, _ = call(rt, "POST", URL, first)

    assert status == 409 and body["error"]["code"] == "tool_results_already_taken"
    assert body["error"]["details"]["tool_calls"][0]["id"] == "call_b"
    _, done, _ = call(
        rt, "POST", URL, {"tool_results": [{"tool_call_id": "call_b", "content": "T-9"}]}
    )
    assert done["status"] == "completed" and done["turn"] == 1 and len(model.requests) == 3
    record = json.loads(rt.store.text(rt_user(), "sessions/s1/turns/00000001.json"))
    assert len(record["pauses"]) == 2


def test_cancel_answers_each_pending_call_as_cancelled_and_the_model_answers_without_tools() -> (
    None
):
    model = ScriptedModel(
        calls(("lookup_order", {"order_id": 1}), ("open_ticket", {})), "Cancelled, as you asked."
    )
    rt = runtime(model)
    call(rt, "POST", URL, {"message": "go", "tools": [ORDER_TOOL, TICKET_TOOL]})

    status, done, _ = call(rt, "POST", URL, {"cancel": True})

    assert status == 200 and done["status"] == "completed" and done["turn"] == 1
    last = model.requests[-1]
    assert last.tools == []
    assert [m.content for m in last.messages if m.role == "tool"] == [
        "Error: cancelled by the caller"
    ] * 2
    assert session_item(rt).state.pause is None


def test_cancel_or_results_without_a_paused_turn_are_409() -> None:
    rt = runtime(ScriptedModel("hi"))
    status, body, _ = call(rt, "POST", URL, {"cancel": True})
    assert (status, body["error"]["code"]) == (409, "no_pending_tool_calls")
    call(rt, "POST", URL, {"message": "hello"})
    status, body, _ = call(
        rt, "POST", URL, {"tool_results": [{"tool_call_id": "x", "content": "y"}]}
    )
    assert (status, body["error"]["code"]) == (409, "no_pending_tool_calls")


def test_a_message_after_the_timeout_closes_the_pending_turn_then_proceeds() -> None:
    model = ScriptedModel(
        calls(("lookup_order", {"order_id": 1})), "Never mind the order.", "Hello again!"
    )
    rt = runtime(model, tool_result_timeout_seconds=60)
    call(rt, "POST", URL, {"message": "order 1?", "tools": [ORDER_TOOL]})
    rt.clock.advance(seconds=61)

    status, body, _ = call(rt, "POST", URL, {"message": "hi"})

    assert status == 200 and body["turn"] == 2 and body["reply"] == "Hello again!"
    closing = model.requests[1]
    assert closing.tools == [] and closing.messages[-1].content == "Error: cancelled by the caller"
    assert turn_keys(rt) == [
        "users/alice/sessions/s1/turns/00000001.json",
        "users/alice/sessions/s1/turns/00000002.json",
    ]
    assert session_item(rt).state.turn == 2 and session_item(rt).state.pause is None
    assert [j.turn for j in rt.queue.post_turn] == [2]  # the job covers both turns


def test_a_turn_pauses_at_most_until_the_model_call_budget_and_then_answers() -> None:
    model = ScriptedModel(
        calls(("lookup_order", {"order_id": 1})),
        calls(("lookup_order", {"order_id": 2}), ids=["call_2"]),
        "Final answer.",
    )
    rt = runtime(model, max_model_calls=3)
    call(rt, "POST", URL, {"message": "go", "tools": [ORDER_TOOL]})
    call(rt, "POST", URL, {"tool_results": [{"tool_call_id": "call_1", "content": "a"}]})
    _, done, _ = call(
        rt, "POST", URL, {"tool_results": [{"tool_call_id": "call_2", "content": "b"}]}
    )
    assert done["status"] == "completed" and done["reply"] == "Final answer."
    assert [bool(r.tools) for r in model.requests] == [True, True, False]
    assert done["usage"]["by_role"]["agent"]["input_tokens"] == 30


def test_a_large_client_result_is_evicted_to_the_workspace_with_a_preview() -> None:
    model = ScriptedModel(calls(("lookup_order", {"order_id": 1})), "Read it.")
    rt = runtime(model)
    call(rt, "POST", URL, {"message": "go", "tools": [ORDER_TOOL]})
    big = "row\n" * 75_000  # 300,000 characters

    call(rt, "POST", URL, {"tool_results": [{"tool_call_id": "call_1", "content": big}]})

    seen = model.requests[1].messages[-1].content
    assert "too large (300,000 characters)" in seen and len(seen) < 10_000
    [stored] = [k for k in rt.store.objects if "/tool-results/s1/call_1-" in k]
    assert rt.store.objects[stored][-1].data.decode() == big


def test_tools_sent_again_with_the_results_replace_the_offered_tools() -> None:
    model = ScriptedModel(calls(("lookup_order", {"order_id": 1})), "ok")
    rt = runtime(model)
    call(rt, "POST", URL, {"message": "go", "tools": [ORDER_TOOL]})
    results = [{"tool_call_id": "call_1", "content": "x"}]
    call(rt, "POST", URL, {"tool_results": results, "tools": [TICKET_TOOL]})
    offered = [t.name for t in model.requests[1].tools]
    assert "open_ticket" in offered and "lookup_order" not in offered


def test_a_memory_save_before_the_pause_is_applied_once_when_the_turn_completes() -> None:
    model = ScriptedModel(
        calls(("memory_save", {"content": "- Prefers rail"}), ("lookup_order", {"order_id": 1})),
        "Saved and looked up.",
    )
    rt = runtime(model)
    call(rt, "POST", URL, {"message": "remember I prefer rail; order 1?", "tools": [ORDER_TOOL]})
    assert rt.store.text(rt_user(), "MEMORY.md") is None  # a paused turn saved nothing

    call(rt, "POST", URL, {"tool_results": [{"tool_call_id": "call_2", "content": "ok"}]})

    assert rt.store.text(rt_user(), "MEMORY.md").count("Prefers rail") == 1
    ledger = rt.store.text(rt_user(), "memory/2026-11-30.md")
    assert "> source: session=s1 turns=1 via=memory_save\n- [save:agent] Prefers rail" in ledger


@pytest.mark.parametrize(
    ("tools", "status", "fragment"),
    [
        ([{"name": "memory_search"}], 422, "built-in tool"),
        ([{"name": "crm__lookup"}], 422, "tool server"),
        ([ORDER_TOOL, ORDER_TOOL], 422, "declared twice"),
        ([{"name": "x", "parameters": {"type": "string"}}], 422, "parameters"),
        ([{"name": "x", "parameters": [1, 2]}], 422, "parameters"),
        (
            [{"name": "sku", "parameters": {"properties": {"id": {"pattern": "(?<=a)b"}}}}],
            422,
            "tools.0 (sku).parameters: properties.id.pattern: invalid pattern '(?<=a)b'",
        ),
        ([{"name": f"t{n}"} for n in range(65)], 422, "at most 64"),
        ([{"name": "big", "description": "d" * 70_000}], 413, "bytes"),
        ([{"name": "has space"}], 422, "failed validation"),
        ([{"name": "x", "surprise": 1}], 422, "failed validation"),
    ],
)
def test_bad_tool_declarations_are_refused_and_nothing_is_written(
    tools: list, status: int, fragment: str
) -> None:
    model = ScriptedModel("never")
    rt = make_runtime(
        settings=Settings(
            auth_mode="dev", mcp_servers=(McpServerConfig(name="crm", url="http://crm/mcp"),)
        ),
        agent=model,
    )
    got, body, _ = call(rt, "POST", URL, {"message": "hi", "tools": tools})
    assert got == status, body
    assert fragment in json.dumps(body)
    assert rt.store.objects == {} and rt.table.sessions == {} and model.requests == []


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"message": "hi", "cancel": True},
        {"message": "hi", "tool_results": [{"tool_call_id": "a", "content": "b"}]},
        {"cancel": False},
        {"tool_results": []},
        {"tool_results": [{"tool_call_id": "a", "content": 1}]},
        {
            "tool_results": [
                {"tool_call_id": "a", "content": "b"},
                {"tool_call_id": "a", "content": "c"},
            ]
        },
    ],
)
def test_a_body_that_is_not_exactly_one_action_is_refused(payload: dict) -> None:
    rt = runtime(ScriptedModel("never"))
    status, body, _ = call(rt, "POST", URL, payload)
    assert status == 422, body
    assert rt.store.objects == {} and rt.table.sessions == {}


def test_openai_anthropic_and_plain_declarations_are_the_same_tool() -> None:
    model = ScriptedModel("ok")
    rt = runtime(model)
    anthropic = {
        "name": "weather",
        "description": "Weather",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    bare = {"type": "function", "function": {"name": "ping", "description": None}}
    call(rt, "POST", URL, {"message": "hi", "tools": [ORDER_TOOL, TICKET_TOOL, anthropic, bare]})
    offered = {t.name: t for t in model.requests[0].tools}
    assert offered["ping"].parameters == {"type": "object", "properties": {}}
    assert offered["open_ticket"].description == "Open a support ticket"
    assert offered["weather"].parameters["properties"] == {"city": {"type": "string"}}
    assert offered["lookup_order"].parameters["required"] == ["order_id"]


def test_a_model_failure_on_resume_leaves_the_turn_paused_and_resumable() -> None:
    from tests.fakes import failing

    model = ScriptedModel(calls(("lookup_order", {"order_id": 1})), failing(), "Recovered.")
    rt = runtime(model)
    call(rt, "POST", URL, {"message": "go", "tools": [ORDER_TOOL]})
    before = dict(rt.store.objects)
    payload = {"tool_results": [{"tool_call_id": "call_1", "content": "x"}]}

    status, _, _ = call(rt, "POST", URL, payload)
    assert status == 502 and rt.store.objects == before

    status, done, _ = call(rt, "POST", URL, payload)
    assert status == 200 and done["reply"] == "Recovered." and done["turn"] == 1


def test_arguments_nested_past_the_parsers_depth_are_an_error_result_not_a_crash() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    model = ScriptedModel(calls(("lookup_order", deep), ("memory_search", deep)), "ok")
    rt = runtime(model)
    status, done, _ = call(rt, "POST", URL, {"message": "go", "tools": [ORDER_TOOL]})
    assert status == 200 and done["status"] == "completed"
    results = [m.content for m in model.requests[1].messages if m.role == "tool"]
    assert results == [
        "Error: the arguments of lookup_order are not valid JSON",
        "Error: the arguments of memory_search are not valid JSON",
    ]


def test_an_import_into_a_session_whose_turn_awaits_results_is_409_and_writes_nothing() -> None:
    model = ScriptedModel(calls(("lookup_order", {"order_id": 1})))
    rt = runtime(model)
    call(rt, "POST", URL, {"message": "go", "tools": [ORDER_TOOL]})
    before = dict(rt.store.objects)

    status, body, _ = call(
        rt, "POST", "/v1/sessions/s1/import", {"messages": [{"role": "user", "content": "hi"}]}
    )

    assert status == 409 and body["error"]["code"] == "tool_results_required"
    assert rt.store.objects == before and session_item(rt).state.pause is not None
