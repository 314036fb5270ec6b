from __future__ import annotations

import json

import pytest

from agent_harness import markup
from agent_harness.agent.turn import run_turn
from agent_harness.errors import (
    ModelOutputError,
    PayloadTooLargeError,
    SessionBusyError,
    ValidationFailedError,
)
from agent_harness.ids import User
from agent_harness.memory.jobs.flush import run_post_turn_job
from agent_harness.models.base import Message
from agent_harness.settings import Settings
from tests.fakes import ScriptedModel, failing, make_runtime, tool_call

ALICE = User.from_id("alice")


def test_a_turn_returns_the_reply_and_writes_log_context_counter_and_job() -> None:
    model = ScriptedModel("Hello Alice!")
    rt = make_runtime(agent=model)

    result = run_turn(rt, ALICE, "s1", "Hi there")

    assert (result.turn, result.reply, result.flush, result.compacted) == (
        1,
        "Hello Alice!",
        "queued",
        False,
    )
    assert (result.usage.input_tokens, result.usage.output_tokens) == (10, 5)
    record = json.loads(rt.store.text(ALICE, "sessions/s1/turns/00000001.json"))
    assert [m["role"] for m in record["messages"]] == ["user", "assistant"]
    assert record["messages"][0]["content"] == "Hi there"
    context = json.loads(rt.store.text(ALICE, "sessions/s1/context.json"))
    assert [m["content"] for m in context["messages"]] == ["Hi there", "Hello Alice!"]
    assert rt.table.get_session(ALICE, "s1").turn == 1
    assert rt.table.sessions[(ALICE.key, "s1")].lease_owner is None
    assert [(j.session_id, j.turn) for j in rt.queue.post_turn] == [("s1", 1)]


def test_turns_count_up_and_the_context_carries_the_conversation() -> None:
    model = ScriptedModel("one", "two")
    rt = make_runtime(agent=model)
    run_turn(rt, ALICE, "s1", "first")
    second = run_turn(rt, ALICE, "s1", "second")
    assert second.turn == 2
    sent = [m.content for m in model.requests[1].messages if m.role != "system"]
    assert sent == ["first", "one", "second"]


def test_memory_enters_as_a_reference_message_not_the_system_prompt() -> None:
    model = ScriptedModel("ok")
    rt = make_runtime(agent=model)
    rt.store.put(
        ALICE, "MEMORY.md", "# Memory\n- User said: I prefer window seats.\n", create_only=True
    )

    result = run_turn(rt, ALICE, "s1", "Which seat?")

    system, reference, question = model.requests[0].messages
    assert system.role == "system" and "window seats" not in system.content
    assert reference.role == "user" and "<harness_context" in reference.content
    assert (
        'source="MEMORY.md"' in reference.content and 'kind="reference-data"' in reference.content
    )
    assert "I prefer window seats." in markup.extract(reference.content, markup.MEMORY)
    assert question.content == "Which seat?"
    assert result.memory_tokens > 0
    record = json.loads(rt.store.text(ALICE, "sessions/s1/turns/00000001.json"))
    assert record["memory"]["tokens"] == result.memory_tokens
    assert "<harness_context" not in json.dumps(record["messages"])  # injected, not logged


def test_an_oversized_memory_is_capped_with_a_notice_pointing_to_search() -> None:
    model = ScriptedModel("ok")
    rt = make_runtime(agent=model, settings=Settings(consolidation_max_tokens=200))
    big = "\n".join(f"- fact {i}: the user mentioned detail number {i}" for i in range(500))
    rt.store.put(ALICE, "MEMORY.md", big, create_only=True)

    result = run_turn(rt, ALICE, "s1", "hi")

    reference = model.requests[0].messages[1].content
    assert 150 < result.memory_tokens <= 200
    assert "memory_search" in reference
    assert "- fact 0:" in reference and "- fact 499:" in reference


def test_a_model_failure_writes_nothing_and_releases_the_lease() -> None:
    rt = make_runtime(agent=ScriptedModel(failing(), "recovered"))
    with pytest.raises(Exception, match="provider down"):
        run_turn(rt, ALICE, "s1", "hello")
    assert rt.store.objects == {}
    assert rt.queue.post_turn == []
    assert rt.table.get_session(ALICE, "s1").turn == 0
    assert run_turn(rt, ALICE, "s1", "hello").turn == 1  # the lease was released


def test_an_empty_reply_is_a_model_error_and_writes_nothing() -> None:
    rt = make_runtime(agent=ScriptedModel("   "))
    with pytest.raises(ModelOutputError):
        run_turn(rt, ALICE, "s1", "hello")
    assert rt.store.objects == {}


def test_a_held_session_is_busy_and_nothing_is_written() -> None:
    rt = make_runtime(agent=ScriptedModel("never used"))
    rt.table.acquire_session_lease(ALICE, "s1", "other-call", 1_000 * 1_796_029_200, 60_000)
    rt.clock.current = rt.clock.current.fromtimestamp(1_796_029_210, tz=rt.clock.current.tzinfo)

    with pytest.raises(SessionBusyError) as caught:
        run_turn(rt, ALICE, "s1", "hello")

    # held 10 s, longer than a typical turn: retry soon, not when the lease's 50 s run out
    assert caught.value.retry_after == 1
    assert caught.value.headers() == {"Retry-After": "1", "retry-after-ms": "500"}
    assert rt.store.objects == {} and rt.queue.post_turn == []


def test_a_crashed_holders_lease_expires() -> None:
    rt = make_runtime(agent=ScriptedModel("ok"))
    rt.table.acquire_session_lease(ALICE, "s1", "crashed", 0, 60_000)  # expired long ago
    assert run_turn(rt, ALICE, "s1", "hello").turn == 1


def test_an_uncommitted_turn_object_is_kept_and_its_number_skipped() -> None:
    rt = make_runtime(agent=ScriptedModel("ok"))
    rt.store.put(ALICE, "sessions/s1/turns/00000001.json", '{"orphan": true}', create_only=True)
    assert run_turn(rt, ALICE, "s1", "hello").turn == 2
    assert rt.store.text(ALICE, "sessions/s1/turns/00000001.json") == '{"orphan": true}'


def test_a_failed_queue_send_still_returns_the_saved_turn() -> None:
    rt = make_runtime(agent=ScriptedModel("ok"))
    rt.queue.fail = True
    result = run_turn(rt, ALICE, "s1", "hello")
    assert result.flush == "skipped"
    assert rt.store.text(ALICE, "sessions/s1/turns/00000001.json")


@pytest.mark.parametrize(
    ("trigger", "expected"),
    [
        ("always", "queued"),
        ("never", "skipped"),
        ("on_compact", "skipped"),
        ("throttled:10m", "queued"),
    ],
)
def test_the_flush_field_reports_the_trigger(trigger: str, expected: str) -> None:
    rt = make_runtime(agent=ScriptedModel("ok"), settings=Settings(flush_trigger=trigger))
    assert run_turn(rt, ALICE, "s1", "hello").flush == expected
    assert len(rt.queue.post_turn) == 1  # the job is queued either way


def test_throttled_flush_is_reported_within_the_gap() -> None:
    rt = make_runtime(
        agent=ScriptedModel("ok", "ok again"),
        settings=Settings(flush_trigger="throttled:10m"),
    )
    run_turn(rt, ALICE, "s1", "hello")
    flush_job = rt.queue.post_turn[0]
    assert run_post_turn_job(rt, flush_job).status == "flushed"  # claims the gate
    rt.clock.advance(seconds=60)
    assert run_turn(rt, ALICE, "s1", "again").flush == "throttled"


@pytest.mark.parametrize(
    ("session", "text", "error"),
    [
        ("s1", "   ", ValidationFailedError),
        ("../s", "hi", ValidationFailedError),
        ("s1", "x" * 100_001, PayloadTooLargeError),
    ],
)
def test_bad_input_is_rejected_before_anything_happens(
    session: str, text: str, error: type
) -> None:
    rt = make_runtime(agent=ScriptedModel())
    with pytest.raises(error):
        run_turn(rt, ALICE, session, text)
    assert rt.table.calls == [] and rt.store.objects == {}


def test_a_tool_call_on_the_last_allowed_call_is_not_executed() -> None:
    model = ScriptedModel(
        Message(role="assistant", content="done", tool_calls=tool_call("x").tool_calls)
    )
    rt = make_runtime(agent=model, settings=Settings(max_model_calls=1))
    assert run_turn(rt, ALICE, "s1", "hello").reply == "done"


def test_an_agents_md_longer_than_a_message_is_cut_as_it_is_read() -> None:
    model = ScriptedModel("Arr.")
    rt = make_runtime(settings=Settings(max_message_chars=1000), agent=model)
    rt.store.put(ALICE, "AGENTS.md", "You are a pirate. " + "x" * 5000, create_only=True)

    run_turn(rt, ALICE, "s1", "Hi")

    system = model.requests[0].messages[0].content
    assert "You are a pirate." in system and "[AGENTS.md cut at 1,000 characters]" in system
    assert "x" * 1001 not in system
