"""Imports and memory saves under the daily budgets (agent_harness.import_budget): each
door that writes memory without a turn is refused with 429 once the day's turns or tokens
are spent, writes nothing then, counts imported turns under their own cap, and a budget
on anything caps the memory model too."""

from __future__ import annotations

import pytest

from agent_harness.agent.importer import ImportedMessage, import_history
from agent_harness.agent.turn import run_turn
from agent_harness.errors import BudgetExhaustedError, ModelError, PayloadTooLargeError
from agent_harness.ids import User
from agent_harness.memory.jobs.flush import run_post_turn_job
from agent_harness.settings import Settings
from agent_harness.usage import DEFAULT_MEMORY_TOKENS, stack_budget, usage_report
from tests.fakes import ScriptedModel, failing, make_runtime
from tests.unit import test_mcp_server as mcp
from tests.unit.test_routes import call

ANN = User.from_id("ann")
ALICE = User.from_id("alice")
DAY = "2026-11-30"


def history(turns: int) -> list[ImportedMessage]:
    out = []
    for n in range(turns):
        out.append(ImportedMessage(role="user", content=f"I like tea number {n}"))
        out.append(ImportedMessage(role="assistant", content="Noted."))
    return out


def spent_turns(**settings: object):
    """A stack with a one-turn day whose turn ``alice`` has already taken."""
    rt = make_runtime(settings=Settings(auth_mode="dev", user_daily_turns=1, **settings))
    assert call(rt, "POST", "/v1/sessions/s1/messages", {"message": "one"})[0] == 200
    return rt


def written(rt) -> set[str]:
    return set(rt.store.objects)


def test_an_http_import_after_the_turn_budget_is_spent_is_429_and_writes_nothing() -> None:
    rt = spent_turns()
    before, jobs = written(rt), list(rt.queue.post_turn)
    body = {"messages": [{"role": "user", "content": "Remember I like green tea"}]}
    status, answer, headers = call(rt, "POST", "/v1/sessions/s2/import", body)
    assert status == 429 and answer["error"]["code"] == "budget_exhausted"
    assert int(headers["Retry-After"]) > 0
    assert written(rt) == before and rt.queue.post_turn == jobs
    assert rt.table.get_session(ALICE, "s2") is None


def test_a_memory_save_after_the_turn_budget_is_spent_is_429_and_writes_nothing() -> None:
    rt = spent_turns()
    before = written(rt)
    status, answer, _ = call(rt, "POST", "/v1/memory/save", {"content": "I like green tea"})
    assert status == 429 and answer["error"]["code"] == "budget_exhausted"
    assert written(rt) == before


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_each_record_conversation_after_the_budget_is_spent_is_refused(era: str) -> None:
    rt = spent_turns()
    before = written(rt)
    arguments = {"session_id": "s2", "messages": mcp.conversation("I like green tea", "Noted.")}
    result = mcp.call(rt, "record_conversation", arguments, era=era)
    assert result["isError"] is True and "budget" in mcp.text(result)
    assert written(rt) == before


def test_a_chat_history_is_an_import_under_the_imported_turns_cap() -> None:
    settings = Settings(user_daily_turns=100, user_daily_imported_turns=3)
    rt = make_runtime(settings=settings, agent=ScriptedModel("hi", "hi"))
    run_turn(rt, ANN, "s1", "new", history=history(2))
    before = written(rt)
    with pytest.raises(BudgetExhaustedError, match="imported turns"):
        run_turn(rt, ANN, "s2", "another", history=history(2))  # 2 + 2 > 3
    assert written(rt) == before
    with pytest.raises(PayloadTooLargeError, match="at most 3"):  # can never fit
        import_history(rt, ANN, "s3", history(4))
    assert usage_report(rt, ANN, 1).view()["days"][0]["imported_turns"] == 2


def test_a_turn_that_fails_gives_its_historys_imported_turns_back() -> None:
    settings = Settings(user_daily_turns=100, user_daily_imported_turns=2)
    rt = make_runtime(settings=settings, agent=ScriptedModel(failing(), "fine"))
    with pytest.raises(ModelError):
        run_turn(rt, ANN, "s1", "new", history=history(2))
    run_turn(rt, ANN, "s1", "again", history=history(2))  # the 2 turns were given back
    assert rt.table.imported[(ANN.key, DAY)] == 2


def test_imports_count_as_imported_turns_not_as_turns() -> None:
    rt = make_runtime(settings=Settings(user_daily_turns=1))
    import_history(rt, ANN, "s1", history(3))
    day = usage_report(rt, ANN, 1).view()["days"][0]
    assert day["imported_turns"] == 3 and day["turns"] == 0


def test_any_budget_caps_the_memory_model_unless_the_operator_says_otherwise() -> None:
    assert stack_budget(make_runtime()).memory_tokens == 0  # no budgets: unlimited
    turns_only = make_runtime(settings=Settings(user_daily_turns=5))
    assert stack_budget(turns_only).memory_tokens == DEFAULT_MEMORY_TOKENS
    said_so = make_runtime(settings=Settings(user_daily_turns=5, user_daily_memory_tokens=0))
    assert stack_budget(said_so).memory_tokens == 0


def test_an_imports_flush_waits_once_the_memory_budget_is_spent() -> None:
    memory = ScriptedModel(*(["- [user] The user likes tea."] * 4))
    rt = make_runtime(
        settings=Settings(user_daily_tokens=10**9, user_daily_memory_tokens=40), memory=memory
    )
    import_history(rt, ANN, "s1", history(2))
    # the imported assistant only acknowledges ("Noted."): one call, 15 tokens, under 40
    run_post_turn_job(rt, rt.queue.post_turn.pop(0))
    assert len(memory.requests) == 1
    import_history(rt, ANN, "s2", history(2))
    rt.table.add_usage(ANN, _memory_spend(25))  # now over
    outcome = run_post_turn_job(rt, rt.queue.post_turn.pop(0))
    assert outcome.status == "over_budget" and len(memory.requests) == 1


def _memory_spend(tokens: int):
    from agent_harness.ports import UsageDelta

    return UsageDelta(DAY, tokens={"memory": (tokens, 0)}, model_calls={"memory": 1})
