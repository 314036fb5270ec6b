from __future__ import annotations

import pytest

from agent_harness.errors import ModelOutputError, StoreError
from agent_harness.ids import User
from agent_harness.jobs import PostTurnJob
from agent_harness.memory.flush import run_post_turn_job as flush_turns
from agent_harness.models.base import Message
from agent_harness.records import TurnRecord
from agent_harness.settings import Settings
from tests.fakes import ScriptedModel, failing, make_runtime

ALICE = User.from_id("alice")


def add_turn(rt, session: str, n: int, text: str, at: str = "2026-11-30T09:00:00Z") -> None:
    record = TurnRecord(
        session_id=session,
        turn=n,
        created_at=at,
        messages=[Message(role="user", content=text), Message(role="assistant", content="ok")],
    )
    rt.store.put(ALICE, f"sessions/{session}/turns/{n:08d}.json", record.model_dump_json())
    owner = f"o{n}"
    rt.table.acquire_session_lease(ALICE, session, owner, 0, 1)
    rt.table.commit_turn(ALICE, session, owner, n, at)


def job(session: str, turn: int, reason: str = "turn") -> PostTurnJob:
    return PostTurnJob(
        user_id="alice",
        session_id=session,
        turn=turn,
        reason=reason,
        queued_at="2026-11-30T09:00:00Z",
    )


def ledger(rt, day: str = "2026-11-30") -> str:
    return rt.store.text(ALICE, f"memory/{day}.md") or ""


def test_facts_land_in_the_days_ledger_with_time_and_source() -> None:
    rt = make_runtime()  # offline memory model
    add_turn(rt, "s1", 1, "Remember that I prefer window seats.")

    outcome = flush_turns(rt, job("s1", 1))

    assert (outcome.status, outcome.facts, outcome.days) == ("flushed", 1, ["2026-11-30"])
    assert ledger(rt) == (
        "\n## Flush — 2026-11-30T09:00:00Z\n"
        "> source: session=s1 turns=1\n"
        "- User said: I prefer window seats.\n"
    )
    assert rt.table.get_session(ALICE, "s1").flush_cursor == 1
    assert rt.table.get_user(ALICE).is_due


def test_each_turn_is_extracted_once() -> None:
    memory = ScriptedModel("- fact one", "- fact two")
    rt = make_runtime(memory=memory)
    add_turn(rt, "s1", 1, "first")
    flush_turns(rt, job("s1", 1))
    add_turn(rt, "s1", 2, "second")
    flush_turns(rt, job("s1", 2))

    assert len(memory.requests) == 2
    second_prompt = memory.requests[1].messages[1].content
    assert "second" in second_prompt and "[user]: first" not in second_prompt
    assert "- fact one" in second_prompt  # today's ledger is shown so facts are not repeated


def test_a_redelivered_job_writes_nothing_twice() -> None:
    memory = ScriptedModel("- a fact")
    rt = make_runtime(memory=memory)
    add_turn(rt, "s1", 1, "hello")
    flush_turns(rt, job("s1", 1))
    before = ledger(rt)

    assert flush_turns(rt, job("s1", 1)).status == "nothing_new"
    assert ledger(rt) == before and len(memory.requests) == 1


def test_a_crash_between_append_and_cursor_does_not_duplicate_facts() -> None:
    memory = ScriptedModel("- a fact", "- the same fact again")
    rt = make_runtime(memory=memory)
    add_turn(rt, "s1", 1, "hello")
    rt.table.advance_flush_cursor = lambda *a, **k: (_ for _ in ()).throw(StoreError("crash"))
    with pytest.raises(StoreError):
        flush_turns(rt, job("s1", 1))
    appended = ledger(rt)
    assert "- a fact" in appended

    del rt.table.advance_flush_cursor  # the retry runs on a healthy table
    assert flush_turns(rt, job("s1", 1)).facts == 0
    assert ledger(rt) == appended
    assert len(memory.requests) == 1  # the covered turn was not even re-extracted
    assert rt.table.get_session(ALICE, "s1").flush_cursor == 1


def test_a_later_job_covers_turns_whose_own_job_was_lost() -> None:
    memory = ScriptedModel("- from turns one and two")
    rt = make_runtime(memory=memory)
    add_turn(rt, "s1", 1, "one")
    add_turn(rt, "s1", 2, "two")

    outcome = flush_turns(rt, job("s1", 2))

    assert outcome.turns == [1, 2]
    assert "> source: session=s1 turns=1-2" in ledger(rt)
    assert flush_turns(rt, job("s1", 1)).status == "nothing_new"


def test_no_reply_writes_nothing_but_advances_the_cursor() -> None:
    rt = make_runtime(memory=ScriptedModel("NO_REPLY"))
    add_turn(rt, "s1", 1, "hello")
    outcome = flush_turns(rt, job("s1", 1))
    assert outcome.facts == 0 and ledger(rt) == ""
    assert rt.table.get_session(ALICE, "s1").flush_cursor == 1
    assert not rt.table.get_user(ALICE).is_due


@pytest.mark.parametrize("bad", [failing(), ModelOutputError("garbage")])
def test_a_failed_or_malformed_answer_changes_nothing(bad: Exception) -> None:
    rt = make_runtime(memory=ScriptedModel(bad))
    add_turn(rt, "s1", 1, "hello")
    with pytest.raises(type(bad)):
        flush_turns(rt, job("s1", 1))
    assert ledger(rt) == ""
    assert rt.table.get_session(ALICE, "s1").flush_cursor == 0


def test_a_chatty_answer_without_bullets_is_rejected() -> None:
    rt = make_runtime(memory=ScriptedModel("I think the user is happy."))
    add_turn(rt, "s1", 1, "hello")
    with pytest.raises(ModelOutputError):
        flush_turns(rt, job("s1", 1))
    assert ledger(rt) == ""


def test_turns_go_to_the_ledger_of_their_own_day() -> None:
    memory = ScriptedModel("- on the 29th", "- on the 30th")
    rt = make_runtime(memory=memory)
    add_turn(rt, "s1", 1, "late night", at="2026-11-29T23:50:00Z")
    add_turn(rt, "s1", 2, "morning", at="2026-11-30T08:00:00Z")

    outcome = flush_turns(rt, job("s1", 2))

    assert outcome.days == ["2026-11-29", "2026-11-30"]
    assert "turns=1\n- on the 29th" in ledger(rt, "2026-11-29")
    assert "turns=2\n- on the 30th" in ledger(rt, "2026-11-30")


def test_the_ledger_day_follows_the_configured_zone() -> None:
    rt = make_runtime(memory=ScriptedModel("- a"), settings=Settings(timezone="Asia/Tokyo"))
    add_turn(rt, "s1", 1, "hi", at="2026-11-30T20:00:00Z")  # 05:00 on Dec 1st in Tokyo
    flush_turns(rt, job("s1", 1))
    assert "## Flush — 2026-11-30T18:00:00+09:00" in ledger(rt, "2026-12-01")


def test_never_and_throttled_triggers_skip_the_model_but_not_the_turns() -> None:
    memory = ScriptedModel("- everything so far")
    rt = make_runtime(memory=memory, settings=Settings(flush_trigger="never"))
    add_turn(rt, "s1", 1, "one")
    assert flush_turns(rt, job("s1", 1)).status == "skipped"
    assert memory.requests == []
    # a compaction flush ignores the trigger and covers the skipped turn too
    add_turn(rt, "s1", 2, "two")
    outcome = flush_turns(rt, job("s1", 2, reason="compaction"))
    assert outcome.turns == [1, 2]


def test_throttled_flush_runs_once_per_gap() -> None:
    memory = ScriptedModel("- a", "- b")
    settings = Settings(flush_trigger="throttled", flush_min_gap_seconds=300)
    rt = make_runtime(memory=memory, settings=settings)
    add_turn(rt, "s1", 1, "one")
    assert flush_turns(rt, job("s1", 1)).status == "flushed"
    add_turn(rt, "s1", 2, "two")
    assert flush_turns(rt, job("s1", 2)).status == "throttled"
    rt.clock.advance(seconds=301)
    add_turn(rt, "s1", 3, "three")
    assert flush_turns(rt, job("s1", 3)).turns == [2, 3]


def test_flush_of_an_unknown_session_does_nothing() -> None:
    rt = make_runtime(memory=ScriptedModel())
    assert flush_turns(rt, job("ghost", 1)).status == "no_session"


def test_concurrent_appends_to_one_ledger_are_never_lost() -> None:
    """Invariant 4: the CAS append loop under 16 simultaneous writers. (On a store whose
    conditional put is atomic, as S3's is; moto's in-process If-Match is not.)"""
    import threading

    rt = make_runtime()
    rt.store.append_attempts = 64
    rt.store.latency = 0.002  # a network round trip: reads and writes really interleave
    barrier = threading.Barrier(16)

    def writer(n: int) -> None:
        barrier.wait()
        rt.store.append(ALICE, "memory/2026-11-30.md", lambda existing: f"- fact {n}\n")

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(ledger(rt).splitlines()) == sorted(f"- fact {n}" for n in range(16))


def test_a_turn_object_that_is_not_a_turn_is_skipped_not_fatal() -> None:
    rt = make_runtime(memory=ScriptedModel("- from turn two"))
    add_turn(rt, "s1", 1, "first")
    rt.store.put(ALICE, "sessions/s1/turns/00000001.json", "{ edited by hand")
    add_turn(rt, "s1", 2, "second")
    outcome = flush_turns(rt, job("s1", 2))
    assert outcome.turns == [2] and "- from turn two" in ledger(rt)
    assert rt.table.get_session(ALICE, "s1").flush_cursor == 2


def test_a_failed_throttled_flush_is_retried_not_throttled() -> None:
    settings = Settings(flush_trigger="throttled", flush_min_gap_seconds=300)
    rt = make_runtime(memory=ScriptedModel(failing(), "- recovered"), settings=settings)
    add_turn(rt, "s1", 1, "one")
    with pytest.raises(type(failing())):
        flush_turns(rt, job("s1", 1))
    assert flush_turns(rt, job("s1", 1)).status == "flushed"  # the redelivery
    assert "- recovered" in ledger(rt)
