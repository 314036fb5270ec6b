"""Every model call is counted in the user's day when its request ends, however it ends:
committed, paused, failed or refused mid-turn (agent_harness.meter, usage.count_unfinished),
and a token budget spent during a turn stops it before its next call."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from agent_harness.agent.client_tools import ToolResult
from agent_harness.agent.turn import run_turn
from agent_harness.errors import BudgetExhaustedError, ModelTimeoutError, StoreError
from agent_harness.ids import User
from agent_harness.settings import Settings
from agent_harness.usage import usage_report
from tests.fakes import ORDER_TOOL, ScriptedModel, failing, make_runtime, tool_call

ANN = User.from_id("ann")
DAY = "2026-11-30"
#: ScriptedModel answers every call with 10 input and 5 output tokens
CALL_TOKENS = 15
ORDER = SimpleNamespace(**ORDER_TOOL)


def agent_spend(rt) -> tuple[int, int]:
    """(model calls, tokens) of the agent role today."""
    agent = usage_report(rt, ANN, 1).view()["totals"]["by_role"]["agent"]
    return agent["model_calls"], agent["input_tokens"] + agent["output_tokens"]


def runtime(agent: ScriptedModel, **limits: int):
    return make_runtime(settings=Settings(consolidation_min_gap_seconds=0, **limits), agent=agent)


@pytest.mark.parametrize("error", [failing("provider down"), ModelTimeoutError("deadline")])
def test_a_turn_that_fails_after_a_model_call_counts_the_calls_that_returned(error) -> None:
    agent = ScriptedModel(tool_call("memory_search", '{"query": "tea"}'), error)
    rt = runtime(agent)
    with pytest.raises(type(error)):
        run_turn(rt, ANN, "s1", "what tea do I like?")
    assert agent_spend(rt) == (1, CALL_TOKENS)
    assert not any("/turns/" in key for key in rt.store.objects)  # nothing half-written


def test_a_failed_turn_that_called_the_model_keeps_its_turn_under_a_turn_budget() -> None:
    agent = ScriptedModel(tool_call("memory_search", '{"query": "x"}'), failing(), "never")
    rt = runtime(agent, user_daily_turns=1)
    with pytest.raises(Exception, match="provider down"):
        run_turn(rt, ANN, "s1", "one")
    # failing after the model worked is no way around the turn budget
    with pytest.raises(BudgetExhaustedError):
        run_turn(rt, ANN, "s1", "two")
    assert agent_spend(rt) == (1, CALL_TOKENS)


def test_a_turn_whose_commit_fails_still_counts_its_calls() -> None:
    rt = runtime(ScriptedModel("an answer"))
    rt.store.fail_puts = lambda key: "/turns/" in key  # type: ignore[attr-defined]
    with pytest.raises(StoreError):
        run_turn(rt, ANN, "s1", "hello")
    assert agent_spend(rt) == (1, CALL_TOKENS)


def test_a_pause_counts_its_spend_in_its_own_write_and_the_resume_only_its_own() -> None:
    agent = ScriptedModel(tool_call("lookup_order", '{"order_id": 42}'), "Shipped.")
    rt = runtime(agent, user_daily_tokens=100_000)
    paused = run_turn(rt, ANN, "s1", "where is order 42?", tools=[ORDER])
    assert paused.status == "requires_action"
    assert agent_spend(rt) == (1, CALL_TOKENS)  # counted before any resume
    done = run_turn(rt, ANN, "s1", tool_results=[ToolResult("call_1", "DHL")])
    assert done.status == "completed"
    assert agent_spend(rt) == (2, 2 * CALL_TOKENS)  # never twice
    assert usage_report(rt, ANN, 1).view()["totals"]["turns"] == 1
    # the day's reservation is exactly the real tokens: every estimate was given back
    assert rt.table.budget[(ANN.key, DAY)][1:] == [2 * CALL_TOKENS, 2 * CALL_TOKENS]


def test_an_abandoned_pause_was_counted_all_the_same() -> None:
    agent = ScriptedModel(tool_call("lookup_order", '{"order_id": 1}'))
    rt = runtime(agent)
    run_turn(rt, ANN, "s1", "look it up", tools=[ORDER])
    assert agent_spend(rt) == (1, CALL_TOKENS)


def test_a_token_budget_spent_during_a_turn_stops_it_before_its_next_call() -> None:
    steps = [tool_call("memory_search", '{"query": "q"}', f"c{n}") for n in range(8)]
    agent = ScriptedModel(*steps, "done")
    rt = runtime(agent, user_daily_tokens=40)  # under the limit when admitted
    with pytest.raises(BudgetExhaustedError, match="during this turn") as stopped:
        run_turn(rt, ANN, "s1", "search a lot")
    assert stopped.value.status == 429
    calls, tokens = agent_spend(rt)
    # the turn went over by at most one call's worth, and every call is counted
    assert calls == len(agent.requests) == 3 and tokens == 3 * CALL_TOKENS
    assert tokens - 40 < CALL_TOKENS
    with pytest.raises(BudgetExhaustedError, match="spent"):
        run_turn(rt, ANN, "s2", "and the next turn is refused")


def test_without_a_token_limit_a_long_tool_loop_reads_no_usage() -> None:
    steps = [tool_call("memory_search", '{"query": "q"}', f"c{n}") for n in range(3)]
    rt = runtime(ScriptedModel(*steps, "done"), user_daily_turns=10)
    run_turn(rt, ANN, "s1", "search")
    assert "usage_days" not in rt.table.calls
    assert agent_spend(rt) == (4, 4 * CALL_TOKENS)
