"""Per-user daily budgets for turns (checked by the write that takes a turn's session
lease, agent.lease; the rules in agent_harness.usage): the
turn and token limits, refusals that write nothing and say when to come back, renewal
at midnight, and admissions given back by turns that fail or pause."""

from __future__ import annotations

import pytest

from agent_harness.agent.lease import session_lease
from agent_harness.agent.turn import run_turn
from agent_harness.errors import BudgetExhaustedError, ModelError
from agent_harness.ids import User
from agent_harness.settings import Settings
from agent_harness.usage import DEFAULT_MEMORY_TOKENS, usage_report
from tests.fakes import ScriptedModel, failing, make_runtime

ANN, BOB = User.from_id("ann"), User.from_id("bob")
#: ManualClock starts at 2026-11-30T09:00Z; the budgets renew at midnight UTC
TO_MIDNIGHT = 15 * 3600


def budgeted(agent: ScriptedModel | None = None, **limits: int):
    settings = Settings(consolidation_min_gap_seconds=0, **limits)
    return make_runtime(settings=settings, agent=agent)


def test_the_turn_limit_refuses_the_next_turn_until_midnight_and_writes_nothing() -> None:
    rt = budgeted(user_daily_turns=2)
    run_turn(rt, ANN, "s1", "one")
    run_turn(rt, ANN, "s1", "two")
    objects, sessions = len(rt.store.objects), dict(rt.table.sessions)
    with pytest.raises(BudgetExhaustedError) as refused:
        run_turn(rt, ANN, "s9", "three, in a new session")
    assert refused.value.status == 429 and refused.value.code == "budget_exhausted"
    assert refused.value.headers() == {"Retry-After": str(TO_MIDNIGHT + 1)}
    assert len(rt.store.objects) == objects and rt.table.sessions == sessions
    assert run_turn(rt, BOB, "s1", "another user still works").status == "completed"
    rt.clock.advance(seconds=TO_MIDNIGHT)
    assert run_turn(rt, ANN, "s9", "a new day").status == "completed"


def test_the_token_limit_counts_committed_agent_tokens() -> None:
    rt = budgeted(ScriptedModel("a", "b", "c"), user_daily_tokens=30)  # 15 tokens a call
    run_turn(rt, ANN, "s1", "one")
    run_turn(rt, ANN, "s1", "two")  # 15 < 30 when admitted: the edge's one turn over
    with pytest.raises(BudgetExhaustedError, match="tokens"):
        run_turn(rt, ANN, "s1", "three")
    assert usage_report(rt, ANN, 1).view()["totals"]["by_role"]["agent"]["input_tokens"] == 20


def test_running_turns_hold_their_estimate_so_a_concurrent_one_waits_briefly() -> None:
    rt = budgeted(user_daily_tokens=500)
    with session_lease(rt, ANN, "s1", admit=True) as first:  # a turn in flight
        assert first.admission is not None and first.admission.estimate >= 500
        with pytest.raises(BudgetExhaustedError, match="running turns") as held:
            run_turn(rt, ANN, "s2", "at the same time")
    assert held.value.retry_after == 5
    assert held.value.response_headers()["x-should-retry"] == "true"  # seconds away


def test_a_failed_turn_gives_its_admission_back() -> None:
    agent = ScriptedModel(failing("provider down"), "fine")
    rt = budgeted(agent, user_daily_turns=1, user_daily_tokens=10_000)
    with pytest.raises(ModelError):
        run_turn(rt, ANN, "s1", "this one fails")
    assert rt.table.budget[(ANN.key, "2026-11-30")] == [0, 0, 0]
    assert run_turn(rt, ANN, "s1", "so this one is still allowed").status == "completed"


def test_without_budgets_a_turn_makes_no_admission() -> None:
    rt = make_runtime()
    run_turn(rt, ANN, "s1", "hello")
    assert "lease_and_admit" not in rt.table.calls
    assert rt.table.calls.count("acquire_session_lease") == 1


def test_with_budgets_the_lease_write_admits_the_turn_in_one_call() -> None:
    rt = budgeted(user_daily_turns=5)
    run_turn(rt, ANN, "s1", "one")
    run_turn(rt, ANN, "s1", "two")
    writes = [c for c in rt.table.calls if c in ("acquire_session_lease", "lease_and_admit")]
    assert writes == ["lease_and_admit", "lease_and_admit"]  # a new session, then as left
    assert "get_budget" not in rt.table.calls  # the write checks the override itself
    assert rt.table.budget[(ANN.key, "2026-11-30")][0] == 2


def test_a_session_changed_by_another_container_costs_one_more_try() -> None:
    rt = budgeted(user_daily_turns=5)
    other = make_runtime(settings=rt.settings, table=rt.table, store=rt.store)
    run_turn(rt, ANN, "s1", "one")
    run_turn(other, ANN, "s1", "two, elsewhere")  # first seen there: a new-session guess
    rt.table.calls.clear()
    assert run_turn(rt, ANN, "s1", "three").turn == 3
    assert rt.table.calls.count("lease_and_admit") == 2
    assert rt.table.budget[(ANN.key, "2026-11-30")][0] == 3


def test_an_override_set_since_the_last_turn_applies_to_the_next_one() -> None:
    from agent_harness.ports import Budget

    rt = budgeted(user_daily_turns=5)
    run_turn(rt, ANN, "s1", "one")
    rt.table.set_budget(ANN, Budget(turns=1))  # by an operator, through another container
    with pytest.raises(BudgetExhaustedError, match="turns"):
        run_turn(rt, ANN, "s1", "two")
    rt.table.set_budget(ANN, None)
    assert run_turn(rt, ANN, "s1", "two, again").status == "completed"


def test_results_for_a_session_this_container_never_saw_are_read_first() -> None:
    from tests.fakes import ORDER_TOOL
    from tests.unit.test_client_tools import calls
    from tests.unit.test_routes import call

    model = ScriptedModel(calls(("lookup_order", {"order_id": 42})), "Order 42 has shipped.")
    settings = Settings(auth_mode="dev", user_daily_tokens=10_000)
    rt = make_runtime(settings=settings, agent=model)
    url = "/v1/sessions/s1/messages"
    _, paused, _ = call(rt, "POST", url, {"message": "Where is 42?", "tools": [ORDER_TOOL]})
    assert paused["status"] == "requires_action"
    rt.sessions_seen.clear()  # as a new container would
    rt.table.calls.clear()
    results = {"tool_results": [{"tool_call_id": "call_1", "content": "shipped"}]}
    assert call(rt, "POST", url, results)[1]["status"] == "completed"
    assert rt.table.calls[:2] == ["get_session", "lease_and_admit"]


def test_over_http_a_spent_budget_is_429_with_retry_after() -> None:
    from tests.unit.test_routes import call

    rt = make_runtime(settings=Settings(auth_mode="dev", user_daily_turns=1))
    assert call(rt, "POST", "/v1/sessions/s1/messages", {"message": "one"})[0] == 200
    status, body, headers = call(rt, "POST", "/v1/sessions/s1/messages", {"message": "two"})
    assert status == 429 and body["error"]["code"] == "budget_exhausted"
    assert headers["Retry-After"] == str(TO_MIDNIGHT + 1)
    assert headers["x-should-retry"] == "false"  # spent for the day: no SDK retries
    assert call(rt, "GET", "/v1/sessions/s1/messages")[1]["turns"][-1]["turn"] == 1


def test_a_paused_turn_and_its_resume_count_as_one_turn() -> None:
    from tests.fakes import ORDER_TOOL
    from tests.unit.test_client_tools import calls
    from tests.unit.test_routes import call

    model = ScriptedModel(calls(("lookup_order", {"order_id": 42})), "Order 42 has shipped.")
    settings = Settings(auth_mode="dev", user_daily_turns=1, user_daily_tokens=10_000)
    rt = make_runtime(settings=settings, agent=model)
    url = "/v1/sessions/s1/messages"
    status, paused, _ = call(rt, "POST", url, {"message": "Where is 42?", "tools": [ORDER_TOOL]})
    assert status == 200 and paused["status"] == "requires_action"
    results = {"tool_results": [{"tool_call_id": "call_1", "content": "shipped"}]}
    status, done, _ = call(rt, "POST", url, results)
    assert status == 200 and done["status"] == "completed", done
    admitted, turn_tokens, reserved = rt.table.budget[("alice", "2026-11-30")]
    assert admitted == 1 and reserved == turn_tokens == 30  # two calls, estimates given back


# -- an operator's per-user override -------------------------------------------------------
def admin_call(rt, method: str, path: str, payload: object | None = None, *, admin: bool = True):
    import json

    from agent_harness.api.routes import build_app
    from local_stack.lambdas import context_for
    from tests.unit.test_routes import http_event

    headers = {"content-type": "application/json", "x-user-id": "ops"}
    if admin:
        headers["x-admin"] = "true"
    body = json.dumps(payload).encode() if payload is not None else b""
    response = build_app(rt).resolve(
        http_event(method, path, headers=headers, body=body), context_for("AgentCallFunction")
    )
    return response["statusCode"], json.loads(response["body"])


def test_only_an_operator_may_read_or_set_a_users_budget() -> None:
    rt = make_runtime(settings=Settings(auth_mode="dev", user_daily_turns=3))
    url = "/v1/admin/users/ann/budget"
    for method, payload in (("GET", None), ("PUT", {"turns": 9}), ("DELETE", None)):
        status, body = admin_call(rt, method, url, payload, admin=False)
        assert status == 403 and body["error"]["code"] == "forbidden"
    assert rt.table.overrides == {}
    status, body = admin_call(rt, "GET", url)
    # a turn limit caps the memory model too, by default
    memory = DEFAULT_MEMORY_TOKENS
    assert status == 200 and body["effective"] == {"tokens": 0, "turns": 3, "memory_tokens": memory}


def test_an_override_changes_one_users_limits_and_its_removal_restores_them() -> None:
    rt = make_runtime(settings=Settings(auth_mode="dev", user_daily_turns=3))
    status, body = admin_call(rt, "PUT", "/v1/admin/users/ann/budget", {"turns": 1})
    assert status == 200 and body["effective"]["turns"] == 1 and body["override"]["turns"] == 1
    run_turn(rt, ANN, "s1", "one")
    with pytest.raises(BudgetExhaustedError):
        run_turn(rt, ANN, "s1", "two")
    run_turn(rt, BOB, "s1", "bob keeps the stack's three")
    run_turn(rt, BOB, "s1", "two")
    admin_call(rt, "PUT", "/v1/admin/users/ann/budget", {"turns": 0})  # unlimited for ann
    for n in range(4):
        run_turn(rt, ANN, "s1", f"more {n}")
    status, body = admin_call(rt, "DELETE", "/v1/admin/users/ann/budget")
    assert status == 200 and body["override"] is None and body["effective"]["turns"] == 3
    with pytest.raises(BudgetExhaustedError):
        run_turn(rt, ANN, "s1", "back to the stack's limit")


def test_a_bad_override_is_422_and_writes_nothing() -> None:
    rt = make_runtime(settings=Settings(auth_mode="dev", user_daily_turns=3))
    for bad in ({"turns": -1}, {"turns": "many"}, {"limit": 3}):
        status, body = admin_call(rt, "PUT", "/v1/admin/users/ann/budget", bad)
        assert status == 422, body
    assert rt.table.overrides == {}


def test_a_paused_turn_closed_by_a_new_message_and_that_message_count_two_turns() -> None:
    from tests.fakes import ORDER_TOOL
    from tests.unit.test_client_tools import calls
    from tests.unit.test_routes import call

    model = ScriptedModel(
        calls(("lookup_order", {"order_id": 42})), "Closed without the result.", "Hello."
    )
    settings = Settings(
        auth_mode="dev",
        user_daily_turns=10,
        user_daily_tokens=10_000,
        tool_result_timeout_seconds=60,
    )
    rt = make_runtime(settings=settings, agent=model)
    url = "/v1/sessions/s1/messages"
    status, paused, _ = call(rt, "POST", url, {"message": "Where is 42?", "tools": [ORDER_TOOL]})
    assert status == 200 and paused["status"] == "requires_action"
    rt.clock.advance(seconds=120)  # the caller never sent the result
    status, done, _ = call(rt, "POST", url, {"message": "Never mind. Hi!"})
    assert status == 200 and done["status"] == "completed", done
    admitted, turn_tokens, reserved = rt.table.budget[("alice", "2026-11-30")]
    assert admitted == 2 and reserved == turn_tokens  # every estimate given back


def test_a_lease_write_that_keeps_finding_the_session_changed_gives_up_admitting_nothing() -> None:
    from agent_harness.agent.lease import ADMIT_TRIES
    from agent_harness.errors import StoreError
    from agent_harness.ports import LeaseAdmission, SessionState

    model = ScriptedModel("a", "b")
    rt = budgeted(model, user_daily_turns=5)
    run_turn(rt, ANN, "s1", "one")
    tries: list[SessionState] = []

    def racing(*args, **kwargs):  # another container commits between every two tries
        tries.append(kwargs["expected"])
        return LeaseAdmission(taken=False, session_changed=True, session=SessionState(len(tries)))

    rt.table.lease_and_admit = racing
    with pytest.raises(StoreError, match="could not be taken"):
        run_turn(rt, ANN, "s1", "two")
    assert len(tries) == ADMIT_TRIES  # bounded
    assert [t.turn for t in tries[1:]] == list(range(1, ADMIT_TRIES))  # each try learns
    assert len(model.requests) == 1  # the refused turn called no model
