"""Turns that pause for the caller's tool results, under crashes, duplicates, races and
generated bad bodies (no-lost-turn, session-lease, flush-once and bad-input-4xx of
docs/design.md#invariants): no 5xx, no lost or doubled turn, the
model never run twice for the same results, and nothing written by a refused request.

On the in-memory fakes (S3 and DynamoDB semantics, conditional writes), with the crash
harness of test_crashes: from the fault on, every AWS call of the invocation fails."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from aws_lambda_powertools import Metrics
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_harness.agent.client_tools import ToolResult
from agent_harness.agent.commit import TurnResult
from agent_harness.agent.turn import run_turn
from agent_harness.api.routes import build_app
from agent_harness.errors import SessionBusyError, ToolCallsStateError
from agent_harness.ids import User
from agent_harness.models.base import ChatRequest, ChatResponse, Message, ToolCall, Usage
from agent_harness.settings import Settings
from local_stack.lambdas import context_for, http_event
from tests.fakes import ORDER_TOOL, make_runtime
from tests.reliability.test_crashes import Crash, Dying, Fault, World, restart

ALICE = User.from_id("alice")
QUESTION = "Remember that I prefer rail. Where is order 42?"


class OrderDesk:
    """An agent model that answers by what the prompt ends with: the question -> save a
    fact and look the order up; the tool's result -> the answer. Counts its calls."""

    name = "order-desk"

    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()

    def complete(self, request: ChatRequest) -> ChatResponse:
        with self.lock:
            self.calls += 1
        last = request.messages[-1]
        if last.role == "tool":
            text = f"Order 42: {last.content}"
            message = Message(role="assistant", content=text)
        else:
            message = Message(
                role="assistant",
                tool_calls=[
                    ToolCall(id="save-1", name="memory_save", arguments='{"content": "- Rail"}'),
                    ToolCall(id="order-1", name="lookup_order", arguments='{"order_id": 42}'),
                ],
            )
        return ChatResponse(message=message, usage=Usage(input_tokens=3), model=self.name)


def client(rt, request: dict[str, Any], world: World | None = None) -> tuple[TurnResult, int]:
    """A persistent caller: on a crash it retries the same request (after the dead
    call's lease expired); on ``tool_results_required`` it answers the pending calls;
    on ``requires_action`` it sends the results. Returns the completed turn and crashes."""
    crashes = 0
    while True:
        try:
            result = run_turn(rt, ALICE, "s1", **request)
        except Crash:
            crashes += 1
            assert world is not None
            restart(rt, world, lease_seconds=rt.settings.session_lease_seconds)
            continue
        except ToolCallsStateError as exc:
            assert exc.code == "tool_results_required", exc.code
            calls = exc.details["tool_calls"]
            request = {"tool_results": [ToolResult(c["id"], "shipped") for c in calls]}
            continue
        if result.status == "completed":
            return result, crashes
        request = {"tool_results": [ToolResult(c.id, "shipped") for c in result.tool_calls]}


PAUSE_AND_RESUME_STEPS = {
    "pause: after the model reply": Fault("store", "put", "before", "context.json"),
    "pause: after the context write": Fault("store", "put", "after", "context.json"),
    "pause: before the pause mark": Fault("table", "pause_turn", "before"),
    "pause: after the pause mark": Fault("table", "pause_turn", "after"),
    "resume: after the model reply": Fault("store", "put", "before", "/turns/"),
    "resume: after the log write": Fault("store", "put", "after", "/turns/"),
    "resume: after the saves": Fault("store", "append", "after", "memory/2026"),
    "resume: after the context write": Fault("table", "commit_turn", "before"),
}


@pytest.mark.parametrize("step", list(PAUSE_AND_RESUME_STEPS))
def test_a_crash_between_pause_and_resume_loses_and_doubles_nothing(step: str, record) -> None:
    rt = make_runtime(agent=OrderDesk())
    world = World(PAUSE_AND_RESUME_STEPS[step])
    rt.store = Dying(rt.store, "store", world)  # type: ignore[assignment]
    rt.table = Dying(rt.table, "table", world)  # type: ignore[assignment]
    world.armed = True

    done, crashes = client(rt, {"message": QUESTION, "tools": [spec()]}, world)

    store = rt.store._inner
    turns = [i.path for i in store.list(ALICE, "sessions/s1/turns")]
    memory = store.text(ALICE, "MEMORY.md") or ""
    log = json.loads(store.text(ALICE, turns[0]))
    tool_results = [m for m in log["messages"] if m["role"] == "tool"]
    record(
        "no-lost-turn, flush-once",
        f"crash {step}: turns in the log (1 expected)",
        len(turns),
        "1",
        len(turns) == 1,
    )
    record(
        "flush-once",
        "  ... facts saved (1 expected)",
        memory.count("- [save:agent] Rail"),
        "1",
        memory.count("- [save:agent] Rail") == 1,
    )
    assert crashes == 1 and world.crashes == 1
    assert done.turn == 1 and done.reply == "Order 42: shipped"
    assert len(turns) == 1 and memory.count("- [save:agent] Rail") == 1
    assert [m["tool_call_id"] for m in tool_results] == ["save-1", "order-1"]
    assert rt.table._inner.get_session(ALICE, "s1").turn == 1
    assert rt.table._inner.get_session(ALICE, "s1").pause is None


def spec():
    from agent_harness.models.base import ToolSpec

    return ToolSpec(**ORDER_TOOL)


def paused_runtime(**settings_kw: Any):
    model = OrderDesk()
    rt = make_runtime(agent=model, settings=Settings(**settings_kw))
    first = run_turn(rt, ALICE, "s1", QUESTION, tools=[spec()])
    assert first.status == "requires_action"
    return rt, model


def test_a_duplicate_and_a_concurrent_resume_run_the_model_once(record) -> None:
    rt, model = paused_runtime(session_wait_seconds=5)
    rt.store.latency = 0.01  # requests interleave
    results = [ToolResult("order-1", "shipped")]
    outcomes: list[Any] = []

    def resume() -> None:
        try:
            outcomes.append(run_turn(rt, ALICE, "s1", tool_results=results))
        except (SessionBusyError, ToolCallsStateError) as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=resume) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    again = run_turn(rt, ALICE, "s1", tool_results=results)  # and once more, later

    answers = [o for o in outcomes if isinstance(o, TurnResult)]
    record(
        "session-lease, flush-once",
        "4 concurrent resumes + 1 repeat: model calls after the pause",
        model.calls - 1,
        "1",
        model.calls == 2,
    )
    assert model.calls == 2  # the pause, and one completion
    assert answers and all(a.reply == "Order 42: shipped" and a.turn == 1 for a in answers)
    assert again.reply == "Order 42: shipped" and again.turn == 1
    assert [i.path for i in rt.store.list(ALICE, "sessions/s1/turns")] == [
        "sessions/s1/turns/00000001.json"
    ]
    assert len(rt.queue.post_turn) == 1


def race(rt, round_: int) -> dict[str, Any]:
    """The caller's results and a new message at once; who goes first varies."""
    outcomes: dict[str, Any] = {}

    def send(name: str, **request: Any) -> None:
        try:
            outcomes[name] = run_turn(rt, ALICE, "s1", **request)
        except (SessionBusyError, ToolCallsStateError) as exc:
            outcomes[name] = exc

    results = {"tool_results": [ToolResult("order-1", "shipped")]}
    racers = [
        threading.Thread(target=send, args=("resume",), kwargs=results),
        threading.Thread(target=send, args=("message",), kwargs={"message": "thanks!"}),
    ]
    for thread in racers[:: 1 if round_ % 2 else -1]:
        thread.start()
    for thread in racers:
        thread.join()
    return outcomes


def test_a_resume_racing_a_new_message_loses_and_doubles_no_turn(record) -> None:
    bad: list[tuple[int, Any, Any, int]] = []
    for round_ in range(10):
        rt, _ = paused_runtime(session_wait_seconds=5)
        rt.store.latency = 0.002 * (round_ % 3)

        outcomes = race(rt, round_)

        resume, message = outcomes["resume"], outcomes["message"]
        turns = len(rt.store.list(ALICE, "sessions/s1/turns"))
        if isinstance(message, TurnResult):  # the results went first: two turns
            fine = message.turn == 2 and turns == 2
        else:  # the message found the turn still waiting
            fine = message.code == "tool_results_required" and turns == 1
        fine = fine and isinstance(resume, TurnResult) and resume.turn == 1
        fine = fine and rt.table.get_session(ALICE, "s1").turn == turns
        if not fine:
            bad.append((round_, resume, message, turns))
    record(
        "no-lost-turn, session-lease",
        "a resume racing a new message, 10 rounds: lost or doubled turns",
        len(bad),
        "0",
        not bad,
    )
    assert not bad


# -- generated bodies on a paused session ------------------------------------------------
names = st.one_of(
    st.sampled_from(["lookup_order", "memory_search", "a" * 65, "crm__x", ""]), st.text(max_size=12)
)
schemas = st.one_of(
    st.none(),
    st.just(ORDER_TOOL["parameters"]),
    st.dictionaries(
        st.sampled_from(["type", "properties", "required", "$ref", "items"]),
        st.one_of(
            st.text(max_size=8),
            st.integers(),
            st.lists(st.text(max_size=4), max_size=3),
            st.dictionaries(st.text(max_size=4), st.booleans(), max_size=2),
        ),
        max_size=3,
    ),
    st.integers(),
    st.text(max_size=10),
)
tool = st.fixed_dictionaries(
    {"name": names},
    optional={
        "description": st.text(max_size=20),
        "parameters": schemas,
        "type": st.sampled_from(["function", "custom", 3]),
    },
)
wrapped = tool.map(lambda t: {"type": "function", "function": t})
results = st.fixed_dictionaries(
    {
        "tool_call_id": st.one_of(
            st.sampled_from(["order-1", "save-1", "nope", ""]), st.text(max_size=8)
        )
    },
    optional={
        "content": st.one_of(
            st.text(max_size=30),
            st.integers(),
            st.lists(
                st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=5)}),
                max_size=2,
            ),
        ),
        "is_error": st.one_of(st.booleans(), st.integers()),
    },
)
bodies = st.fixed_dictionaries(
    {},
    optional={
        "message": st.one_of(st.text(max_size=20), st.none(), st.integers()),
        "tools": st.one_of(
            st.lists(st.one_of(tool, wrapped), max_size=3), st.integers(), st.none()
        ),
        "tool_results": st.one_of(st.lists(results, max_size=3), st.none(), st.text(max_size=3)),
        "cancel": st.one_of(st.booleans(), st.none(), st.integers()),
    },
)
seen = {"requests": 0, "5xx": 0, "refused": 0, "refused_with_writes": 0, "completed": 0}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies)
def check_body(payload: dict[str, Any]) -> None:
    Metrics().clear_metrics()
    rt, model = paused_runtime(auth_mode="dev")
    objects = {k: list(v) for k, v in rt.store.objects.items()}
    state = rt.table.get_session(ALICE, "s1")
    event = http_event(
        "POST",
        "/v1/sessions/s1/messages",
        headers={"content-type": "application/json", "x-user-id": "alice"},
        body=json.dumps(payload).encode(),
    )
    response = build_app(rt).resolve(event, context_for("AgentCallFunction"))
    status = response["statusCode"]
    seen["requests"] += 1
    seen["5xx"] += status >= 500
    assert status < 500, (payload, response["body"])
    if status >= 400:
        seen["refused"] += 1
        wrote = rt.store.objects != objects or rt.table.get_session(ALICE, "s1") != state
        seen["refused_with_writes"] += wrote
        assert not wrote, payload
        assert json.loads(response["body"])["error"]["code"]
    else:
        seen["completed"] += json.loads(response["body"])["status"] == "completed"
        assert model.calls <= 2


def test_generated_tool_bodies_never_5xx_and_a_refused_one_writes_nothing(record) -> None:
    seen.update(dict.fromkeys(seen, 0))
    check_body()
    record(
        "bad-input-4xx",
        f"{seen['requests']} generated tools/tool_results/cancel bodies on a paused turn: 5xx",
        seen["5xx"],
        "0",
        seen["5xx"] == 0,
    )
    record(
        "bad-input-4xx",
        f"  ... refused ({seen['refused']}) that wrote anything",
        seen["refused_with_writes"],
        "0",
        seen["refused_with_writes"] == 0,
    )
    assert seen["refused"] > 0 and seen["5xx"] == seen["refused_with_writes"] == 0
