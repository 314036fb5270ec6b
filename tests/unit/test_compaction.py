"""Compaction, overflow recovery, tool-result eviction (the reference's behaviour restated
for our API) and the bounded wait on a busy session."""

from __future__ import annotations

import hashlib
import json

import pytest

from agent_harness import markup
from agent_harness.agent.compaction import (
    compact,
    keep_tokens,
    safe_cutoff,
    shorten_old_arguments,
    trigger_tokens,
)
from agent_harness.agent.eviction import Evictor
from agent_harness.agent.tools import Tool, ToolRegistry
from agent_harness.agent.turn import run_turn
from agent_harness.errors import (
    ContextOverflowError,
    ModelError,
    SessionBusyError,
)
from agent_harness.ids import User
from agent_harness.models.base import Message, ToolCall
from agent_harness.records import WorkingContext
from agent_harness.settings import Settings
from tests.fakes import ScriptedModel, make_runtime, tool_call

ALICE = User.from_id("alice")


def user(text: str) -> Message:
    return Message(role="user", content=text)


def assistant(text: str, *calls: str) -> Message:
    return Message(
        role="assistant",
        content=text,
        tool_calls=[ToolCall(id=c, name="search", arguments="{}") for c in calls],
    )


def result(call_id: str) -> Message:
    return Message(role="tool", tool_call_id=call_id, name="search", content=f"result {call_id}")


SMALL = Settings(
    compaction_trigger_messages=3, compaction_keep_messages=2, compaction_keep_tokens=0
)


# -- the settings' dynamic values (worked values) ---------------------------------------------
@pytest.mark.parametrize(
    ("window", "trigger", "keep"),
    [(128_000, 108_000, 8000), (32_000, 12_000, 3000), (16_000, 8000, 2000), (0, 160_000, 0)],
)
def test_dynamic_trigger_and_keep(window: int, trigger: int, keep: int) -> None:
    settings = Settings(model_context_window=window)
    assert (trigger_tokens(settings), keep_tokens(settings)) == (trigger, keep)


def test_a_summary_prompt_without_its_placeholder_is_refused_at_configuration() -> None:
    with pytest.raises(ValueError, match=r"\{messages\}"):
        Settings(compaction_summary_prompt="Summarise please")


# -- safe cutoff ----------------------------------------------------------------------------
def test_the_cut_never_separates_a_tool_call_from_its_results() -> None:
    messages = [user("u"), assistant("", "x"), result("x"), user("u2")]
    assert safe_cutoff(messages, 2) == 1  # moves before the assistant


def test_parallel_tool_calls_stay_together() -> None:
    messages = [
        user("u"),
        assistant("", "a", "b", "c"),
        result("a"),
        result("b"),
        result("c"),
        user("u2"),
    ]
    for cut in (2, 3, 4):
        assert safe_cutoff(messages, cut) == 1


def test_results_without_ids_or_without_their_assistant_move_the_cut_forward() -> None:
    orphan = [
        user("u"),
        Message(role="tool", content="r"),
        Message(role="tool", content="r"),
        user("u2"),
    ]
    assert safe_cutoff(orphan, 1) == 3  # results without their assistant move the cut forward
    unowned = [user("u"), result("z"), user("u2")]
    assert safe_cutoff(unowned, 1) == 2  # a result that no assistant owns
    assert safe_cutoff(unowned, 0) == 0 and safe_cutoff(unowned, 3) == 3


# -- compaction -----------------------------------------------------------------------------
def test_compaction_summarises_the_prefix_and_keeps_the_tail() -> None:
    model = ScriptedModel("ROUND_1")
    rt = make_runtime(settings=SMALL)
    rt.models._overrides["compaction"] = model
    context = WorkingContext(session_id="s", messages=[user("M1"), assistant("A1"), user("M2")])

    assert compact(rt, context, [user("NEW")])

    assert context.summary == "ROUND_1"
    assert [m.content for m in context.messages] == ["M2"]  # the new message stays pending
    prompt = model.requests[0].messages[0].content
    assert model.requests[0].purpose == "compact"
    said, answered = '<message role="user">\nM1\n', '<message role="assistant">\nA1\n'
    assert said in prompt and answered in prompt and "M2" not in prompt


def test_summaries_chain_into_the_next_one() -> None:
    model = ScriptedModel("ROUND_1", "ROUND_2")
    rt = make_runtime(settings=SMALL)
    rt.models._overrides["compaction"] = model
    context = WorkingContext(session_id="s", messages=[user("M1"), user("M2")])
    compact(rt, context, [user("M3")])
    context.messages += [user("M3"), user("M4")]
    compact(rt, context, [user("M5")])

    second = model.requests[1].messages[0].content
    assert markup.extract(second, "previous_summary") == "ROUND_1"
    assert context.summary == "ROUND_2"


def test_below_the_trigger_or_with_nothing_to_cut_there_is_no_compaction() -> None:
    rt = make_runtime(settings=SMALL)
    rt.models._overrides["compaction"] = ScriptedModel()  # must not be called
    assert not compact(rt, WorkingContext(session_id="s", messages=[user("a")]), [user("b")])
    # a tool exchange that is the whole context cannot be cut
    tail = [assistant("", "x"), result("x")]
    assert not compact(rt, WorkingContext(session_id="s", messages=tail), [user("b")])


def test_the_token_trigger_and_token_keep_budget() -> None:
    settings = Settings(
        compaction_trigger_messages=0, compaction_trigger_tokens=300, compaction_keep_tokens=120
    )
    rt = make_runtime(settings=settings)
    rt.models._overrides["compaction"] = ScriptedModel("S")
    words = " ".join(["word"] * 40)  # ~40 tokens a message
    context = WorkingContext(session_id="s", messages=[user(f"{n} {words}") for n in range(8)])
    assert not compact(
        rt, WorkingContext(session_id="s", messages=context.messages[:2]), [user("x")]
    )
    assert compact(rt, context, [user("new")])
    assert 1 <= len(context.messages) <= 3  # what fits in ~120 tokens with the new message


def test_a_token_budget_never_keeps_as_many_messages_as_trigger_a_compaction() -> None:
    # a known window gives a large token budget; short messages would all fit in it, and
    # a tail of 50+ messages would then compact again on every turn
    settings = Settings(
        compaction_trigger_messages=10, compaction_keep_messages=4, compaction_keep_tokens=8000
    )
    rt = make_runtime(settings=settings)
    rt.models._overrides["compaction"] = ScriptedModel("S1", "S2")
    context = WorkingContext(session_id="s", messages=[user(f"m{n}") for n in range(10)])
    assert compact(rt, context, [user("new")])
    assert len(context.messages) == 3  # with the new message: keep_messages, though more fit
    assert not compact(rt, context, [user("next")])  # well below the trigger again


def test_a_failed_summary_skips_compaction_but_a_forced_one_raises() -> None:
    rt = make_runtime(settings=SMALL)
    rt.models._overrides["compaction"] = ScriptedModel(ModelError("down"), ModelError("down"))
    context = WorkingContext(session_id="s", messages=[user("M1"), user("M2"), user("M3")])
    assert not compact(rt, context, [user("NEW")])
    assert len(context.messages) == 3 and context.summary is None
    with pytest.raises(ModelError):
        compact(rt, context, [user("NEW")], force=True)


def test_a_runaway_summary_is_capped() -> None:
    rt = make_runtime(settings=SMALL)
    rt.models._overrides["compaction"] = ScriptedModel("- point\n" * 20_000)
    context = WorkingContext(session_id="s", messages=[user("M1"), user("M2"), user("M3")])
    compact(rt, context, [user("NEW")])
    assert rt.counter.count(context.summary) <= 4000


def test_old_tool_arguments_are_shortened_but_stay_json() -> None:
    long_call = Message(
        role="assistant",
        tool_calls=[
            ToolCall(id="c", name="write", arguments=json.dumps({"text": "x" * 5000, "n": 1}))
        ],
    )
    context = WorkingContext(
        session_id="s", messages=[long_call, *[user(str(n)) for n in range(20)]]
    )
    shorten_old_arguments(context, Settings())
    arguments = json.loads(context.messages[0].tool_calls[0].arguments)
    assert arguments == {"text": "x" * 20 + "...(argument truncated)", "n": 1}
    recent = WorkingContext(session_id="s", messages=[long_call, user("x")])
    shorten_old_arguments(recent, Settings())
    assert recent.messages[0] == long_call  # within the kept messages: untouched


def test_a_turn_reports_compaction_and_queues_a_compaction_flush() -> None:
    agent = ScriptedModel(*[f"reply {n}" for n in range(30)])
    settings = Settings(compaction_trigger_messages=10, compaction_keep_messages=4)
    rt = make_runtime(agent=agent, settings=settings)  # offline compaction model
    results = [run_turn(rt, ALICE, "s1", f"message {n}") for n in range(8)]
    flags = [r.compacted for r in results]
    assert flags.count(True) >= 1 and not flags[0]
    n = flags.index(True)
    assert rt.queue.post_turn[n].reason == "compaction"
    # the summary call's tokens are reported for the compaction role (estimated: offline)
    assert results[n].compaction_usage.input_tokens > 0
    assert results[0].compaction_usage.input_tokens == 0
    assert results[n].usage.input_tokens == 10  # the scripted agent's own count
    context = json.loads(rt.store.text(ALICE, "sessions/s1/context.json"))
    assert context["summary"].startswith("## SUMMARY (offline, extractive)")
    sizes = [len(r.messages) for r in agent.requests]
    assert max(sizes) <= 10 + 3
    assert len(rt.store.list(ALICE, "sessions/s1/turns")) == 8  # the log keeps every turn


def test_a_compaction_picks_up_an_edited_agents_md() -> None:
    agent = ScriptedModel(*["ok"] * 10)
    rt = make_runtime(
        agent=agent, settings=Settings(compaction_trigger_messages=4, compaction_keep_messages=2)
    )
    rt.store.put(ALICE, "AGENTS.md", "You are Ada.")
    run_turn(rt, ALICE, "s1", "one")
    rt.store.put(ALICE, "AGENTS.md", "You are Bea.")
    run_turn(rt, ALICE, "s1", "two")  # 2 messages + new: no compaction yet
    run_turn(rt, ALICE, "s1", "three")  # 4 + new: compaction
    systems = [r.messages[0].content.split("\n")[0] for r in agent.requests]
    assert systems == ["You are Ada.", "You are Ada.", "You are Bea."]


# -- overflow recovery -------------------------------------------------------------------------
def long_session(rt, turns: int) -> None:
    for n in range(turns):
        run_turn(rt, ALICE, "s1", f"message {n}")


def test_an_overflow_compacts_and_retries_once() -> None:
    settings = Settings(compaction_enabled=False, compaction_keep_messages=4)
    agent = ScriptedModel(*["ok"] * 12, ContextOverflowError("too long"), "recovered")
    rt = make_runtime(agent=agent, settings=settings)
    long_session(rt, 12)

    result = run_turn(rt, ALICE, "s1", "the overflowing message")

    assert result.reply == "recovered" and result.compacted
    retry = agent.requests[-1].messages
    assert any("<conversation_summary" in m.content for m in retry)
    assert [m.content for m in retry].count("the overflowing message") == 1
    record = json.loads(rt.store.text(ALICE, "sessions/s1/turns/00000013.json"))
    assert [m["content"] for m in record["messages"]].count("the overflowing message") == 1


def test_a_second_overflow_is_a_clear_502() -> None:
    settings = Settings(compaction_enabled=False, compaction_keep_messages=4)
    agent = ScriptedModel(
        *["ok"] * 12, ContextOverflowError("too long"), ContextOverflowError("still")
    )
    rt = make_runtime(agent=agent, settings=settings)
    long_session(rt, 12)
    with pytest.raises(ContextOverflowError) as caught:
        run_turn(rt, ALICE, "s1", "again")
    assert caught.value.status == 502
    assert rt.table.get_session(ALICE, "s1").turn == 12  # nothing written for the failed turn


def test_an_overflow_with_too_few_messages_to_compact_is_a_502() -> None:
    agent = ScriptedModel("ok", ContextOverflowError("one huge message"))
    rt = make_runtime(agent=agent, settings=Settings(compaction_keep_messages=20))
    run_turn(rt, ALICE, "s1", "hello")
    with pytest.raises(ContextOverflowError, match="too short to compact"):
        run_turn(rt, ALICE, "s1", "x" * 1000)  # fewer messages than keep_messages


def test_saves_of_the_overflowing_attempt_are_not_applied_twice() -> None:
    settings = Settings(compaction_enabled=False, compaction_keep_messages=2)
    agent = ScriptedModel(
        "ok",
        "ok",
        "ok",
        tool_call("memory_save", '{"content": "- fact"}'),
        ContextOverflowError("too long"),
        tool_call("memory_save", '{"content": "- fact"}'),
        "saved",
    )
    rt = make_runtime(agent=agent, settings=settings)
    long_session(rt, 3)
    run_turn(rt, ALICE, "s1", "remember the fact")
    assert rt.store.text(ALICE, "MEMORY.md").count("- [save:agent] fact") == 1


# -- eviction ---------------------------------------------------------------------------------
def big_tool_registry(rt, output: str, name: str = "fetch_page") -> ToolRegistry:
    return ToolRegistry(
        [Tool(name, "", {"type": "object"}, lambda arguments: output)],
        after=Evictor(rt, ALICE, "s1"),
    )


@pytest.mark.parametrize(("size", "evicted"), [(80_000, False), (80_001, True)])
def test_results_over_the_limit_are_evicted(size: int, evicted: bool) -> None:
    rt = make_runtime()
    output = ("0123456789" * 8001)[:size]
    text = big_tool_registry(rt, output).call(ToolCall(id="call:1", name="fetch_page"))
    assert (text != output) is evicted
    if evicted:
        digest = hashlib.sha256(output.encode()).hexdigest()[:16]
        path = f"tool-results/s1/call_1-{digest}.txt"
        assert rt.store.text(ALICE, path) == output
        assert f"`{path}`" in text and "80,001 characters" in text
        assert output[:2000] in text and output[-2000:] in text
        assert len(text) < 5000


def test_eviction_is_idempotent_after_a_crash() -> None:
    rt = make_runtime()
    output = "y" * 90_000
    tools = big_tool_registry(rt, output)
    first = tools.call(ToolCall(id="c1", name="fetch_page"))
    second = tools.call(ToolCall(id="c1", name="fetch_page"))  # the retry: same key, same content
    assert first == second and "Tool output was too large" in second
    assert len(rt.store.list(ALICE, "tool-results/s1")) == 1


def test_same_call_id_with_new_content_keeps_both_files() -> None:
    rt = make_runtime()
    big_tool_registry(rt, "a" * 90_000).call(ToolCall(id="c1", name="fetch_page"))
    big_tool_registry(rt, "b" * 90_000).call(ToolCall(id="c1", name="fetch_page"))
    assert len(rt.store.list(ALICE, "tool-results/s1")) == 2  # one file per content


def test_search_and_read_tools_are_never_evicted() -> None:
    rt = make_runtime()
    for name in ("memory_search", "memory_get", "thread_search"):
        output = "z" * 100_000
        assert big_tool_registry(rt, output, name).call(ToolCall(id="c", name=name)) == output


def test_a_failed_eviction_write_keeps_the_result_inline() -> None:
    rt = make_runtime()
    rt.store.fail_puts = lambda path: True
    output = "w" * 90_000
    assert big_tool_registry(rt, output).call(ToolCall(id="c", name="fetch_page")) == output


def test_the_turn_evicts_oversized_results_of_its_tools_except_search_and_read() -> None:
    agent = ScriptedModel(
        tool_call("memory_save", '{"content": "- a fact"}', call_id="save"),
        tool_call("memory_search", '{"query": "nothing here at all"}', call_id="search"),
        "done",
    )
    rt = make_runtime(agent=agent, settings=Settings(eviction_max_chars=10))
    run_turn(rt, ALICE, "s1", "go")
    results = {m.tool_call_id: m.content for m in agent.requests[2].messages if m.role == "tool"}
    assert results["save"].startswith("Tool output was too large (27 characters)")
    assert results["search"] == "No matching memories found for: nothing here at all"
    digest = hashlib.sha256(b"Saved 1 memory to MEMORY.md").hexdigest()[:16]
    assert [o.path for o in rt.store.list(ALICE, "tool-results/s1")] == [
        f"tool-results/s1/save-{digest}.txt"
    ]


# -- the session gate's bounded wait ---------------------------------------------------------
def test_a_busy_session_is_waited_for_up_to_the_bound() -> None:
    rt = make_runtime(agent=ScriptedModel("ok"), settings=Settings(session_wait_seconds=2))
    rt.table.acquire_session_lease(ALICE, "s1", "other", 1_796_029_200_000, 1_000)  # 1 s left
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        rt.clock.advance(seconds=seconds)

    rt.sleep = sleep
    assert run_turn(rt, ALICE, "s1", "hi").turn == 1
    assert 1.0 <= sum(waits) <= 1.5


def test_after_the_bound_a_busy_session_is_still_409() -> None:
    rt = make_runtime(agent=ScriptedModel(), settings=Settings(session_wait_seconds=0.5))
    rt.table.acquire_session_lease(ALICE, "s1", "other", 1_796_029_200_000, 60_000)
    rt.sleep = lambda seconds: rt.clock.advance(seconds=seconds)
    with pytest.raises(SessionBusyError):
        run_turn(rt, ALICE, "s1", "hi")


# -- more of the compaction rules -------------------------------------------------------------
def test_triggers_are_inclusive() -> None:
    rt = make_runtime(settings=SMALL)
    rt.models._overrides["compaction"] = ScriptedModel("S")
    exactly = WorkingContext(session_id="s", messages=[user("M1"), user("M2")])
    assert compact(rt, exactly, [user("M3")])  # 2 + 1 = 3 = trigger


def test_the_summarizer_sees_tool_calls_without_arguments() -> None:
    model = ScriptedModel("S")
    rt = make_runtime(settings=SMALL)
    rt.models._overrides["compaction"] = model
    secret = Message(
        role="assistant",
        tool_calls=[ToolCall(id="x", name="search", arguments='{"q": "secret-argument"}')],
    )
    context = WorkingContext(session_id="s", messages=[user("M1"), secret, result("x"), user("M2")])
    compact(rt, context, [user("M3")])
    prompt = model.requests[0].messages[0].content
    assert "[tool_call: search]" in prompt and "secret-argument" not in prompt


def test_a_blank_summary_is_marked_unavailable() -> None:
    rt = make_runtime(settings=SMALL)
    rt.models._overrides["compaction"] = ScriptedModel("   ")
    context = WorkingContext(session_id="s", messages=[user("M1"), user("M2"), user("M3")])
    compact(rt, context, [user("NEW")])
    assert context.summary == "(Summary unavailable)"


def test_a_budget_smaller_than_the_newest_message_keeps_only_it() -> None:
    settings = Settings(compaction_trigger_messages=2, compaction_keep_tokens=5)
    rt = make_runtime(settings=settings)
    rt.models._overrides["compaction"] = ScriptedModel("S")
    context = WorkingContext(
        session_id="s", messages=[user("a b c d e f g h"), user("i j k l m n o p")]
    )
    assert compact(rt, context, [user("the newest message, over the budget alone")])
    assert context.messages == []  # everything before the pending message was summarised


def test_without_flush_before_compact_the_job_stays_a_normal_turn() -> None:
    settings = Settings(
        compaction_trigger_messages=4, compaction_keep_messages=2, compaction_flush_before=False
    )
    rt = make_runtime(agent=ScriptedModel(*["ok"] * 5), settings=settings)
    results = [run_turn(rt, ALICE, "s1", f"m{n}") for n in range(4)]
    assert any(r.compacted for r in results)
    assert {job.reason for job in rt.queue.post_turn} == {"turn"}


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("openai:gpt-4.1-mini", 1_047_576),
        ("openai:gpt-4o-2024-08-06", 128_000),
        ("anthropic:claude-sonnet-4-5", 200_000),
        ("bedrock:us.anthropic.claude-3-5-haiku-20241022-v1:0", 200_000),
        ("bedrock:amazon.nova-lite-v1:0", 300_000),
        ("openai:meta-llama/Llama-3.1-8B-Instruct", 128_000),
        ("ollama:llama3.1", 0),  # the server's num_ctx decides: set the override
        ("openai:some-private-model", 0),
    ],
)
def test_the_agent_models_window_comes_from_the_table(model: str, window: int) -> None:
    from agent_harness.models.windows import context_window

    assert context_window(Settings(agent_model=model)) == window


def test_the_window_override_wins_and_drives_the_dynamic_thresholds() -> None:
    from agent_harness.agent.compaction import keep_tokens, trigger_tokens

    table = Settings(agent_model="openai:gpt-4o")
    assert trigger_tokens(table) == 128_000 - 20_000
    assert keep_tokens(table) == 8_000
    small = Settings(
        agent_model="ollama:llama3.1", model_context_window=8_192, compaction_reserve_tokens=2_000
    )
    assert trigger_tokens(small) == 6_192
    assert keep_tokens(small) == 2_000
