"""The memory tools inside a turn (the reference's tools restated for our API), the disable switches
and AGENTS.md as the system prompt."""

from __future__ import annotations

import json

import pytest

from agent_harness import markup
from agent_harness.agent.tools import MemoryTools
from agent_harness.agent.turn import run_turn
from agent_harness.ids import User
from agent_harness.models.base import ChatRequest, ToolCall
from agent_harness.settings import Settings
from tests.fakes import ScriptedModel, failing, make_runtime, tool_call

ALICE = User.from_id("alice")


def call(rt, name: str, **arguments) -> str:
    tools = MemoryTools(rt, ALICE).registry()
    return tools.call(ToolCall(id="c", name=name, arguments=json.dumps(arguments)))


# -- memory_get: N|text rows of a line range ---------------------------------------------
@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        (2, 3, "2|b\n3|c"),
        (5, 9, "Error: startLine 5 exceeds file length 4"),  # the trailing newline counts
        (3, 2, ""),
        (0, 1, "1|a"),
        (None, None, "1|a\n2|b\n3|c\n4|"),
        (3, 99, "3|c\n4|"),
    ],
)
def test_memory_get_line_ranges(start, end, expected) -> None:
    rt = make_runtime()
    rt.store.put(ALICE, "MEMORY.md", "a\nb\nc\n")
    arguments = {"path": "MEMORY.md"}
    if start is not None:
        arguments["startLine"] = start
    if end is not None:
        arguments["endLine"] = end
    assert call(rt, "memory_get", **arguments) == expected


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("../x", "Error: path '../x' has an invalid segment '..'"),
        ("/etc/passwd", "Error: path '/etc/passwd' must be relative to the workspace"),
        ("missing.md", "Error: file not found: missing.md"),
        ("blank.md", "Error: file not found: blank.md"),
        ("users/bob/MEMORY.md", "Error: file not found: users/bob/MEMORY.md"),
    ],
)
def test_memory_get_stays_in_the_callers_workspace(path: str, expected: str) -> None:
    rt = make_runtime()
    rt.store.put(ALICE, "blank.md", "  \n\n")
    rt.store.put(User.from_id("bob"), "MEMORY.md", "bob's secret")
    assert call(rt, "memory_get", path=path) == expected


def test_memory_get_bounds_its_output() -> None:
    rt = make_runtime()
    rt.store.put(ALICE, "memory/2026-11-30.md", "\n".join(f"line {i}" for i in range(1000)))
    rows = call(rt, "memory_get", path="memory/2026-11-30.md").splitlines()
    assert len(rows) == 401 and rows[-1].startswith("[truncated at line 400; ask for startLine=401")


# -- memory_save: staged in the turn, written with it --------------------------------------
def test_memory_save_persists_to_memory_md_and_the_ledger_with_the_turn() -> None:
    model = ScriptedModel(
        tool_call("memory_save", json.dumps({"content": "- a\n- b"})),
        tool_call("memory_save", json.dumps({"content": "plain note"}), call_id="c2"),
        "Saved.",
    )
    rt = make_runtime(agent=model)
    rt.store.put(ALICE, "MEMORY.md", "# Memory\n- old")

    run_turn(rt, ALICE, "s1", "remember a, b and a note")

    results = [m.content for m in model.requests[2].messages if m.role == "tool"]
    assert results == ["Saved 2 memories to MEMORY.md", "Saved 1 memory to MEMORY.md"]
    saved = "- [save:agent] a\n- [save:agent] b\n\n- [save:agent] plain note\n"
    assert rt.store.text(ALICE, "MEMORY.md") == "# Memory\n- old\n\n" + saved
    ledger = rt.store.text(ALICE, "memory/2026-11-30.md")
    assert ledger.count("## Memory Save — 2026-11-30T09:00:00Z") == 2
    assert (
        "> source: session=s1 turns=1 via=memory_save\n- [save:agent] a\n- [save:agent] b\n"
        in ledger
    )


def test_a_blank_save_is_an_error_result() -> None:
    assert call(make_runtime(), "memory_save", content="  ") == "Error: content is required"


def test_a_failed_turn_saves_nothing() -> None:
    model = ScriptedModel(tool_call("memory_save", json.dumps({"content": "- a"})), failing())
    rt = make_runtime(agent=model)
    with pytest.raises(Exception, match="provider down"):
        run_turn(rt, ALICE, "s1", "remember a")
    assert rt.store.objects == {}


# -- the registry never raises ------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("memory_search", "not json", "Error: the arguments of memory_search are not valid JSON"),
        ("memory_search", "[1]", "Error: the arguments of memory_search must be a JSON object"),
        ("memory_search", '{"query": "x", "matchMode": ""}', "Error: invalid arguments"),
        ("memory_search", '{"query": "x", "extra": 1}', "Error: invalid arguments"),
        ("memory_search", '{"query": "x", "limit": 0}', "Error: invalid arguments"),
        ("memory_get", "{}", "Error: invalid arguments for memory_get: path: Field required"),
        ("shell", "{}", "Error: unknown tool shell"),
    ],
)
def test_bad_tool_calls_come_back_as_error_results(
    name: str, arguments: str, expected: str
) -> None:
    tools = MemoryTools(make_runtime(), ALICE).registry()
    assert tools.call(ToolCall(id="c", name=name, arguments=arguments)).startswith(expected)


def test_a_blank_search_says_so() -> None:
    rt = make_runtime()
    rt.store.put(ALICE, "MEMORY.md", "- prefers aisle seats\n")
    assert call(rt, "memory_search", query="   ") == "No query provided"
    assert call(rt, "memory_search", query=None) == "No query provided"
    # the same memory, a real query: the line is there to be found
    assert call(rt, "memory_search", query="aisle") == (
        "Found 1 match for: aisle\nSource: MEMORY.md#1: - prefers aisle seats"
    )


def test_a_storage_failure_in_a_tool_is_a_result_not_a_crash() -> None:
    rt = make_runtime()
    rt.store.list = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("boom"))
    assert call(rt, "memory_search", query="x") == "Error: memory_search failed unexpectedly"


# -- the default match mode, inside a turn ----------------------------------------------------
DECISION = "部署决定：使用蓝鲸方案"
#: both words are in DECISION, but apart: "all", "any" and "ranked" find it, "phrase" not
APART = "部署 蓝鲸"
#: a phrase DECISION does contain
PHRASE = "蓝鲸方案"


@pytest.mark.parametrize(
    ("tool", "nothing"),
    [
        ("memory_search", "No matching memories found for: "),
        ("thread_search", "No past messages found for: "),
    ],
)
def test_a_search_tool_called_without_match_mode_ranks_when_no_line_holds_the_phrase(
    tool: str, nothing: str
) -> None:
    from agent_harness.memory.jobs.flush import run_post_turn_job

    model = ScriptedModel(
        "noted",  # the turn that says DECISION
        tool_call(tool, json.dumps({"query": APART}), call_id="default"),
        tool_call(tool, json.dumps({"query": APART, "matchMode": None}), call_id="null"),
        tool_call(tool, json.dumps({"query": APART, "matchMode": "all"}), call_id="all"),
        tool_call(tool, json.dumps({"query": PHRASE}), call_id="phrase"),
        tool_call(tool, json.dumps({"query": APART, "matchMode": "phrase"}), call_id="literal"),
        "done",
    )
    rt = make_runtime(agent=model)
    rt.store.put(ALICE, "MEMORY.md", f"- {DECISION}\n")
    run_turn(rt, ALICE, "s1", DECISION)
    while rt.queue.post_turn:  # index the turn, as the FIFO consumer would
        run_post_turn_job(rt, rt.queue.post_turn.pop(0))

    run_turn(rt, ALICE, "s2", "What did we decide about the deployment?")

    results = {m.tool_call_id: m.content for m in model.requests[-1].messages if m.role == "tool"}
    # no line holds the phrase: the ranking answers, and says so
    header, *ranked = results["default"].splitlines()
    assert header.endswith(
        f" for: {APART} (ranked: no line holds the phrase)".replace(
            "line", "message" if tool == "thread_search" else "line"
        )
    )
    assert ranked and DECISION in ranked[0]
    assert results["null"] == results["default"]
    assert results["literal"] == nothing + APART  # an explicit phrase stays literal
    header, *found = results["all"].splitlines()
    assert header.startswith("Found ") and header.endswith(f" for: {APART}")
    assert found and all(DECISION in row for row in found)
    # the default does search: the phrase the line contains is found, the same lines
    header, *phrase = results["phrase"].splitlines()
    assert header.endswith(f" for: {PHRASE}") and phrase == found


# -- the offline model uses the tool --------------------------------------------------------
def test_the_offline_agent_searches_memory_for_questions_it_cannot_answer() -> None:
    rt = make_runtime()  # offline agent
    rt.store.put(
        ALICE, "memory/2026-11-01.md", "## Flush — x\n- User said: My dentist is Dr. Silva."
    )
    result = run_turn(rt, ALICE, "s1", "Who is my dentist?")
    assert result.reply == (
        "[offline model] From memory_search: - User said: My dentist is Dr. Silva. "
        "(memory/2026-11-01.md#2)"
    )
    record = json.loads(rt.store.text(ALICE, "sessions/s1/turns/00000001.json"))
    assert [m["role"] for m in record["messages"]] == ["user", "assistant", "tool", "assistant"]


# -- switches and AGENTS.md -------------------------------------------------------------------
def test_tools_are_offered_with_their_schemas() -> None:
    model = ScriptedModel("ok")
    run_turn(make_runtime(agent=model), ALICE, "s1", "hi")
    offered = {t.name: t.parameters for t in model.requests[0].tools}
    assert sorted(offered) == [
        "memory_correct",
        "memory_get",
        "memory_save",
        "memory_search",
        "thread_search",
    ]
    assert offered["memory_search"]["properties"]["matchMode"]["enum"] == [
        "phrase",
        "all",
        "any",
        "ranked",
    ]
    system = model.requests[0].messages[0].content
    assert "memory_search" in system and "memory_save" in system and "automatically" in system


def first_request(settings: Settings, memory: str = "- prefers tea") -> ChatRequest:
    model = ScriptedModel("ok")
    rt = make_runtime(agent=model, settings=settings)
    rt.store.put(ALICE, "MEMORY.md", memory)
    result = run_turn(rt, ALICE, "s1", "hi")
    return model.requests[0], result, rt


def test_disabling_tools_keeps_memory_injection_and_hooks() -> None:
    request, result, rt = first_request(Settings(disable_memory_tools=True))
    assert request.tools == []
    system = request.messages[0].content
    assert "memory_search" not in system and "memory_save" not in system
    assert "automatically" in system and "<harness_context" in request.messages[1].content
    assert result.flush == "queued" and len(rt.queue.post_turn) == 1


def test_disabling_hooks_skips_the_flush_but_still_indexes_the_turn() -> None:
    request, result, rt = first_request(Settings(disable_memory_hooks=True))
    assert result.flush == "skipped" and len(rt.queue.post_turn) == 1  # for thread search
    assert "automatically" not in request.messages[0].content
    assert request.tools and "<harness_context" in request.messages[1].content


def test_disabling_both_drops_memory_entirely() -> None:
    request, result, _ = first_request(
        Settings(disable_memory_tools=True, disable_memory_hooks=True)
    )
    assert [m.role for m in request.messages] == ["system", "user"]
    assert "<harness_context" not in json.dumps([m.content for m in request.messages])
    assert "memory" not in request.messages[0].content.lower()
    assert result.memory_tokens == 0


def test_agents_md_is_the_system_prompt_kept_for_the_session() -> None:
    model = ScriptedModel("one", "two", "three")
    rt = make_runtime(agent=model)
    rt.store.put(ALICE, "AGENTS.md", "You are Ada, a travel agent. Be terse.")
    rt.store.put(ALICE, "MEMORY.md", "- prefers aisle seats")

    run_turn(rt, ALICE, "s1", "hi")
    rt.store.put(ALICE, "AGENTS.md", "You are Bob, a chef.")
    run_turn(rt, ALICE, "s1", "and now?")
    run_turn(rt, ALICE, "s2", "new session")

    systems = [r.messages[0].content for r in model.requests]
    assert systems[0].startswith("You are Ada, a travel agent. Be terse.")
    assert systems[1].startswith("You are Ada")  # the session keeps its persona
    assert systems[2].startswith("You are Bob, a chef.")  # a new session reads the new one
    assert "prefers aisle seats" not in systems[0]
    assert "prefers aisle seats" in markup.extract(
        model.requests[0].messages[1].content, markup.MEMORY
    )


def test_without_agents_md_a_default_persona_is_used() -> None:
    model = ScriptedModel("ok")
    run_turn(make_runtime(agent=model), ALICE, "s1", "hi")
    assert model.requests[0].messages[0].content.startswith("You are a helpful assistant")


def test_a_context_left_by_a_crashed_first_call_is_replaced() -> None:
    model = ScriptedModel("ok")
    rt = make_runtime(agent=model)
    rt.store.put(ALICE, "sessions/s1/context.json", '{"v": 1, "session_id": "s1", "messages": []}')
    assert run_turn(rt, ALICE, "s1", "hi").turn == 1
    context = json.loads(rt.store.text(ALICE, "sessions/s1/context.json"))
    assert [m["content"] for m in context["messages"]] == ["hi", "ok"]
