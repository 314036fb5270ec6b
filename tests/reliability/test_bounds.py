"""Bounds: every model call is counted whatever ends its request, and no door writes or
spends past a spent budget (docs/design.md#usage-exact, #budget-edge).

The provider here is a scripted model that records every request it answers: "made" is
what it answered (a failed call returns no usage), "counted" is what GET /v1/usage
says, per way a request can end."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from agent_harness.api.routes import build_app
from agent_harness.errors import ModelError, ModelTimeoutError, StoreError
from agent_harness.memory.jobs.flush import run_post_turn_job
from agent_harness.models.base import ChatRequest
from agent_harness.settings import Settings
from local_stack.lambdas import context_for, http_event
from tests.fakes import ORDER_TOOL, ScriptedModel, make_runtime, openai_tool, tool_call
from tests.unit import test_mcp_server as mcp

USER = "bound-ann"


class Provider(ScriptedModel):
    """A provider that answers with ``script(n)`` forever (n: its call number); a step
    that is an exception is a failed call, which returns no answer and no usage."""

    def __init__(self, script: Callable[[int], Any]) -> None:
        super().__init__()
        self.script = script
        self.answered = 0

    def complete(self, request: ChatRequest):
        self.steps = [self.script(len(self.requests) + 1)]
        response = super().complete(request)
        self.answered += 1
        return response


def http(rt, method: str, path: str, payload: object | None = None, **headers: str):
    head = {"content-type": "application/json", "x-user-id": USER, **headers}
    body = json.dumps(payload).encode() if payload is not None else b""
    raw_path, _, query = path.partition("?")
    event = http_event(method, raw_path, query=query, headers=head, body=body)
    response = build_app(rt).resolve(event, context_for("AgentCallFunction"))
    return response["statusCode"], json.loads(response["body"]) if response["body"] else None


def counted(rt) -> int:
    return http(rt, "GET", "/v1/usage?days=1")[1]["totals"]["by_role"]["agent"]["model_calls"]


def search_then(final: Any) -> Callable[[int], Any]:
    """A turn that searches memory once, then answers ``final`` (a reply or an error)."""
    return lambda n: tool_call("memory_search", '{"query": "tea"}', f"c{n}") if n % 2 else final


def _committed(rt, provider):
    return http(rt, "POST", "/v1/sessions/s1/messages", {"message": "What tea do I like?"})


def _paused_and_abandoned(rt, provider):
    body = {"message": "Where is order 42?", "tools": [ORDER_TOOL]}
    return http(rt, "POST", "/v1/sessions/s1/messages", body)


def _store_fails_at_the_commit(rt, provider):
    rt.store.fail_puts = lambda key: "/turns/" in key
    return http(rt, "POST", "/v1/sessions/s1/messages", {"message": "hello"})


def _chat_completion_fails_late(rt, provider):
    body = {"model": "any", "messages": [{"role": "user", "content": "hi"}]}
    return http(rt, "POST", "/v1/chat/completions", body)


FAILURE_MODES: dict[str, tuple[Callable[[int], Any], Callable[..., Any], dict[str, Any]]] = {
    "committed": (search_then("Green tea."), _committed, {}),
    "paused, never resumed": (
        lambda n: tool_call("lookup_order", '{"order_id": 42}'),
        _paused_and_abandoned,
        {},
    ),
    "model fails after a call": (search_then(ModelError("provider down")), _committed, {}),
    "deadline after a call": (search_then(ModelTimeoutError("deadline")), _committed, {}),
    "store fails at the commit": (lambda n: "fine", _store_fails_at_the_commit, {}),
    "token budget spent mid-turn": (
        lambda n: tool_call("memory_search", '{"query": "q"}', f"c{n}"),
        _committed,
        {"user_daily_tokens": 40},
    ),
    "chat completion fails late": (
        search_then(StoreError("injected")),
        _chat_completion_fails_late,
        {},
    ),
}


@pytest.mark.parametrize("mode", list(FAILURE_MODES))
def test_model_calls_made_equal_model_calls_counted(mode: str, record) -> None:
    script, drive, limits = FAILURE_MODES[mode]
    provider = Provider(script)
    rt = make_runtime(settings=Settings(auth_mode="dev", **limits), agent=provider)
    status, _ = drive(rt, provider)
    made, seen = provider.answered, counted(rt)
    record(
        "usage-exact",
        f"model calls made / counted: {mode} (answered {status})",
        f"{made} / {seen}",
        "equal",
        made == seen and made > 0,
    )
    assert made == seen and made > 0


def _spent_stack():
    """A one-turn day that its one turn has spent; every provider call after it is an
    escape."""
    agent = Provider(lambda n: "an answer")
    memory = Provider(lambda n: "- [user] The user likes tea.")
    settings = Settings(auth_mode="dev", user_daily_turns=1, consolidation_min_gap_seconds=0)
    rt = make_runtime(settings=settings, agent=agent, memory=memory)
    assert http(rt, "POST", "/v1/sessions/first/messages", {"message": "one"})[0] == 200
    return rt, agent, memory


def _mcp(rt, tool: str, arguments: dict) -> int:
    from agent_harness.ids import User

    result = mcp.call(rt, tool, arguments, user=User.from_id(USER))
    return 429 if result.get("isError") else 200


CONVERSATION = [{"role": "user", "content": "I like green tea"}]
DOORS: dict[str, Callable[[Any], int]] = {
    "POST /messages, a new session": lambda rt: http(
        rt, "POST", "/v1/sessions/s2/messages", {"message": "two"}
    )[0],
    "POST /import": lambda rt: http(
        rt, "POST", "/v1/sessions/s3/import", {"messages": CONVERSATION * 3}
    )[0],
    "POST /memory/save": lambda rt: http(rt, "POST", "/v1/memory/save", {"content": "tea"})[0],
    "MCP record_conversation": lambda rt: _mcp(
        rt, "record_conversation", {"session_id": "s4", "messages": CONVERSATION}
    ),
    "MCP memory_save": lambda rt: _mcp(rt, "memory_save", {"content": "I like tea"}),
    "chat completions with a history": lambda rt: http(
        rt,
        "POST",
        "/v1/chat/completions",
        {
            "model": "any",
            "messages": [*CONVERSATION, {"role": "assistant", "content": "ok"}, *CONVERSATION],
            "tools": [openai_tool(ORDER_TOOL)],
        },
    )[0],
}


@pytest.mark.parametrize("door", list(DOORS))
def test_no_door_spends_or_writes_past_a_spent_budget(door: str, record) -> None:
    rt, agent, memory = _spent_stack()
    while rt.queue.post_turn:  # the turn's own flush, before the budget was spent
        run_post_turn_job(rt, rt.queue.post_turn.pop(0))
    agent_before, memory_before = len(agent.requests), len(memory.requests)
    objects = set(rt.store.objects)
    status = DOORS[door](rt)
    while rt.queue.post_turn:
        run_post_turn_job(rt, rt.queue.post_turn.pop(0))
    escapes = len(agent.requests) - agent_before + len(memory.requests) - memory_before  # tried
    wrote = set(rt.store.objects) - objects
    record(
        "budget-edge",
        f"budget escapes through {door}: model calls / objects written (answered {status})",
        f"{escapes} / {len(wrote)}",
        "0 / 0",
        escapes == 0 and not wrote and status == 429,
    )
    assert status == 429 and escapes == 0 and not wrote, sorted(wrote)


def test_a_pause_and_its_resume_are_counted_once_each_call(record) -> None:
    steps = iter([tool_call("lookup_order", '{"order_id": 42}'), "Shipped."])
    provider = Provider(lambda n: next(steps))
    rt = make_runtime(settings=Settings(auth_mode="dev", user_daily_tokens=10**6), agent=provider)
    body = {"message": "Where is order 42?", "tools": [ORDER_TOOL]}
    assert http(rt, "POST", "/v1/sessions/s1/messages", body)[1]["status"] == "requires_action"
    at_pause = counted(rt)
    results = {"tool_results": [{"tool_call_id": "call_1", "content": "DHL"}]}
    assert http(rt, "POST", "/v1/sessions/s1/messages", results)[1]["status"] == "completed"
    record(
        "usage-exact",
        "a paused turn: calls counted at the pause / after its resume / made",
        f"{at_pause} / {counted(rt)} / {len(provider.requests)}",
        "1 / 2 / 2",
        (at_pause, counted(rt), len(provider.requests)) == (1, 2, 2),
    )
    assert (at_pause, counted(rt)) == (1, 2)


# -- the largest request each route accepts, on the real handler over moto -----------------
FN = "AgentCallFunction"


def _at_the_caps() -> list[tuple[str, str, str, Any]]:
    """(what, method, path, body): each route's request at every cap it documents."""
    tools = [
        {
            "name": f"tool_{n}",
            "description": "d" * 700,
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        }
        for n in range(64)
    ]
    imported = [
        {"role": ("user", "assistant")[n % 2], "content": f"{n} " + "w" * 1990} for n in range(2000)
    ]
    chat = [dict(m) for m in imported[:1999]] + [{"role": "user", "content": "and now?"}]
    return [
        (
            "POST /messages: 100,000 characters, 64 tools",
            "POST",
            "/v1/sessions/big/messages",
            {"message": "x " * 50_000, "tools": tools},
        ),
        (
            "POST /import: 2,000 messages, 4 MB",
            "POST",
            "/v1/sessions/imp/import",
            {"messages": imported},
        ),
        (
            "POST /v1/chat/completions: 2,000 messages, 4 MB",
            "POST",
            "/v1/chat/completions",
            {"model": "m", "messages": chat},
        ),
        (
            "PUT /v1/memory: 510,000 characters as stored, authority tags included",
            "PUT",
            "/v1/memory",
            {"content": "- [operator] fact number one\n" * 17_000},
        ),
        (
            "POST /v1/memory/search: a 2,000-character query over a full MEMORY.md",
            "POST",
            "/v1/memory/search",
            {"query": "fact " * 400, "match_mode": "any"},
        ),
        (
            "POST /messages with MEMORY.md at its cap (was 10 s, then 504)",
            "POST",
            "/v1/sessions/full/messages",
            {"message": "What do you remember?"},
        ),
        (
            "POST /v1/memory/save past MEMORY.md's cap",
            "POST",
            "/v1/memory/save",
            {"content": "".join(f"another fact, number {n}\n" for n in range(10_000))},
        ),
    ]


def test_the_largest_request_of_each_route_ends_well_within_the_timeout(stack, record) -> None:
    from local_stack.lambdas import function_timeout

    app = stack.handler(FN, HARNESS_AUTH_MODE="dev", HARNESS_MODEL="offline")
    timeout = function_timeout(stack.resolver.template, FN)
    worst = 0.0
    for what, method, path, payload in _at_the_caps():
        raw = json.dumps(payload).encode()
        headers = {"content-type": "application/json", "x-user-id": "bound-big"}
        if method == "PUT":
            headers["if-none-match"] = "*"
        event = http_event(method, path, headers=headers, body=raw)
        started = time.monotonic()
        response = stack.invoke(app, event, FN)
        share = (time.monotonic() - started) / timeout
        worst = max(worst, share)
        status = response["statusCode"]
        expected = 413 if "past" in what else 201 if method == "PUT" else 200
        record(
            "bad-input-4xx",
            f"largest request: {what} ({len(raw):,} bytes) answered {status} in",
            f"{share:.2f} of the {timeout} s timeout",
            f"{expected}, under 0.5",
            status == expected and share < 0.5,
        )
        assert status == expected, (what, response["body"][:300])
    assert worst < 1.0  # whatever the machine, each ends before the function would be killed
