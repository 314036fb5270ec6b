"""Usage per user, day and role (agent_harness.usage): what a turn's commit counts, what
flush and consolidation count, and the report GET /v1/usage and the CLI return."""

from __future__ import annotations

import pytest

from agent_harness.agent.turn import run_turn
from agent_harness.errors import StoreError, ValidationFailedError
from agent_harness.ids import User
from agent_harness.memory.jobs.consolidate import consolidate
from agent_harness.memory.jobs.flush import run_post_turn_job
from agent_harness.memory.jobs.schedule import forced_job
from agent_harness.models.base import Usage
from agent_harness.usage import record_spend, top_report, usage_report
from tests.fakes import make_runtime

ANN, BOB = User.from_id("ann"), User.from_id("bob")


def drain(rt) -> None:
    while rt.queue.post_turn:
        run_post_turn_job(rt, rt.queue.post_turn.pop(0))


def role(report, name: str) -> dict:
    return report.view()["totals"]["by_role"][name]


def test_a_turn_counts_its_agent_tokens_and_itself_in_its_commit() -> None:
    rt = make_runtime()
    result = run_turn(rt, ANN, "s1", "Remember that I use vim.")
    report = usage_report(rt, ANN, 1)
    agent = role(report, "agent")
    assert agent["input_tokens"] == result.usage.input_tokens > 0
    assert agent["output_tokens"] == result.usage.output_tokens
    assert agent["model_calls"] == 1 and report.view()["totals"]["turns"] == 1
    assert rt.table.calls.count("commit_turn") == 1 and "add_usage" not in rt.table.calls


def test_flush_and_consolidation_count_the_memory_role() -> None:
    rt = make_runtime()
    run_turn(rt, ANN, "s1", "Remember that I use vim.")
    drain(rt)
    flushed = role(usage_report(rt, ANN, 1), "memory")
    assert flushed["model_calls"] == 1 and flushed["input_tokens"] > 0
    consolidate(rt, forced_job(rt, ANN))
    after = role(usage_report(rt, ANN, 1), "memory")
    assert after["model_calls"] == 2 and after["input_tokens"] > flushed["input_tokens"]
    assert role(usage_report(rt, BOB, 1), "memory")["model_calls"] == 0


def test_the_report_lists_every_day_of_the_window_in_the_users_zone() -> None:
    rt = make_runtime()
    run_turn(rt, ANN, "s1", "hello")
    rt.clock.advance(days=2)
    run_turn(rt, ANN, "s1", "hello again")
    view = usage_report(rt, ANN, 5).view()
    assert [d["turns"] for d in view["days"]] == [0, 0, 1, 0, 1]
    assert view["last_day"] == "2026-12-02" and view["totals"]["turns"] == 2
    assert view["totals"]["tokens"] == sum(d["tokens"] for d in view["days"])


@pytest.mark.parametrize("days", [0, 91])
def test_a_window_outside_1_to_90_days_is_refused(days: int) -> None:
    with pytest.raises(ValidationFailedError):
        usage_report(make_runtime(), ANN, days)


def test_a_counter_that_cannot_be_written_never_fails_the_job() -> None:
    rt = make_runtime()

    def broken(*args: object) -> None:
        raise StoreError("table down")

    rt.table.add_usage = broken
    record_spend(rt, ANN, "memory", Usage(input_tokens=5, output_tokens=1))  # no raise


def test_top_lists_the_heaviest_users_of_a_day_by_tokens() -> None:
    rt = make_runtime()
    run_turn(rt, ANN, "s1", "short")
    run_turn(rt, BOB, "s1", "a much longer message " * 20)
    report = top_report(rt, None, 10)
    assert [row["user"] for row in report["users"]] == ["bob", "ann"]
    assert [row["user"] for row in top_report(rt, None, 1)["users"]] == ["bob"]
    assert top_report(rt, "2026-01-01", 10)["users"] == []
    with pytest.raises(ValidationFailedError):
        top_report(rt, None, 0)


# -- the memory budget ---------------------------------------------------------------------
def budgeted(tokens: int):
    from agent_harness.settings import Settings

    return make_runtime(
        settings=Settings(consolidation_min_gap_seconds=0, user_daily_memory_tokens=tokens)
    )


def test_a_flush_over_the_memory_budget_leaves_its_turns_for_the_next_day() -> None:
    from agent_harness.memory.jobs.flush import sweep_flush_tails

    rt = budgeted(1)  # the first flush spends it
    run_turn(rt, ANN, "s1", "Remember that I use vim.")
    drain(rt)
    run_turn(rt, ANN, "s1", "Remember that my cat is called Miso.")
    job = rt.queue.post_turn.pop(0)
    assert run_post_turn_job(rt, job).status == "over_budget"
    assert rt.table.get_session(ANN, "s1").flush_cursor == 1  # the second turn waits
    ledger = rt.store.text(ANN, "memory/2026-11-30.md") or ""
    assert "vim" in ledger and "Miso" not in ledger
    assert sweep_flush_tails(rt) == 0  # not before the budget renews

    rt.clock.advance(hours=15)  # past midnight (UTC): a new day's budget
    assert sweep_flush_tails(rt) == 1
    drain(rt)
    assert rt.table.get_session(ANN, "s1").flush_cursor == 2
    assert "Miso" in (rt.store.text(ANN, "memory/2026-11-30.md") or "")


def test_a_consolidation_over_the_memory_budget_waits_with_its_due_mark() -> None:
    rt = budgeted(1)
    run_turn(rt, ANN, "s1", "Remember that I use vim.")
    drain(rt)  # the flush spends the day's budget
    outcome = consolidate(rt, forced_job(rt, ANN))
    assert outcome.status == "over_budget" and outcome.model_calls == 0
    assert rt.store.text(ANN, "MEMORY.md") is None
    assert rt.table.get_user(ANN).is_due
    rt.clock.advance(hours=15)
    assert consolidate(rt, forced_job(rt, ANN)).status == "consolidated"


def test_without_a_memory_budget_no_usage_is_read_by_jobs() -> None:
    rt = make_runtime()
    run_turn(rt, ANN, "s1", "Remember that I use vim.")
    drain(rt)
    assert "usage_days" not in rt.table.calls
