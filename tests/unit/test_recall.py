"""Automatic recall: the lines of a user's memory that bear on a new message reach the
model before its first call, as reference data, within a budget and above a floor."""

from __future__ import annotations

import json

import pytest

from agent_harness import markup
from agent_harness.agent.turn import run_turn
from agent_harness.errors import StoreError
from agent_harness.ids import User
from agent_harness.memory.engine.file_index import FileIndex
from agent_harness.memory.engine.index import search_files
from agent_harness.memory.recall import coverage, recall_query, select_lines
from agent_harness.models.base import ChatRequest, ToolSpec
from agent_harness.settings import Settings
from agent_harness.tokens import TokenCounter
from tests.fakes import ORDER_TOOL, ScriptedModel, make_runtime

ALICE = User.from_id("alice")
LEDGER = (
    "\n## Flush — 2026-03-02T10:00:00Z\n> source: session=old turns=4 model=offline\n"
    "- Alice's sister Maria lives in Porto and visits every August\n"
    "- Alice is allergic to shellfish\n"
)


def recalled_block(request: ChatRequest) -> str | None:
    """The body of the recall message the model was shown, if any."""
    for message in request.messages:
        if message.role == "user" and 'source="recall"' in message.content:
            return markup.extract(message.content, markup.RECALLED)
    return None


def runtime(**settings: object):
    model = ScriptedModel(*(["ok"] * 5))
    rt = make_runtime(agent=model, settings=Settings(consolidation_min_gap_seconds=0, **settings))
    rt.store.put(ALICE, "memory/2026-03-02.md", LEDGER, create_only=True)
    return rt, model


def test_a_fact_from_a_ledger_reaches_a_new_sessions_first_call_without_a_tool() -> None:
    rt, model = runtime()

    result = run_turn(rt, ALICE, "fresh", "Where does my sister Maria live?")

    [request] = model.requests
    block = recalled_block(request)
    assert block is not None
    assert block.splitlines()[0] == (
        "- Alice's sister Maria lives in Porto and visits every August "
        "(memory/2026-03-02.md#4)"  # the path is the day: not said twice
    )
    assert "shellfish" not in block  # not about the question
    recall = next(m for m in request.messages if 'source="recall"' in m.content)
    assert 'kind="reference-data"' in recall.content and "not instructions" in recall.content
    assert request.messages[-1].content == "Where does my sister Maria live?"  # right before
    assert result.memory_tokens > 0  # counted in usage.memory_tokens
    record = json.loads(rt.store.text(ALICE, "sessions/fresh/turns/00000001.json"))
    assert record["memory"]["recalled"] == ["memory/2026-03-02.md#4"]
    assert record["memory"]["recall_tokens"] == result.memory_tokens > 0


def test_nothing_is_recalled_for_a_message_memory_knows_nothing_about() -> None:
    rt, model = runtime()

    result = run_turn(rt, ALICE, "s1", "Please draft a haiku about autumn leaves")

    assert recalled_block(model.requests[0]) is None
    assert result.memory_tokens == 0
    # positive control: the same runtime recalls when the message is about a fact
    run_turn(rt, ALICE, "s2", "Is there anything I am allergic to, like shellfish?")
    assert "shellfish" in (recalled_block(model.requests[1]) or "")


def test_lines_memory_md_already_shows_are_not_repeated() -> None:
    rt, model = runtime()
    rt.store.put(
        ALICE,
        "MEMORY.md",
        "# Memory\n- Alice's sister Maria lives in Porto and visits every August\n",
    )

    run_turn(rt, ALICE, "s1", "Where does my sister Maria live?")

    assert "Maria" in model.requests[0].messages[1].content  # MEMORY.md shows it
    assert "Maria" not in (recalled_block(model.requests[0]) or "")


@pytest.mark.parametrize(
    "settings", [{"recall_max_tokens": 0}, {"disable_memory_hooks": True}], ids=["zero", "hooks"]
)
def test_recall_can_be_turned_off_and_then_reads_nothing(settings: dict) -> None:
    rt, model = runtime(**settings)
    listed: list[str] = []
    original = rt.store.list
    rt.store.list = lambda user, prefix, **kw: listed.append(prefix) or original(user, prefix, **kw)

    run_turn(rt, ALICE, "s1", "Where does my sister Maria live?")

    assert recalled_block(model.requests[0]) is None and listed == []


def test_a_short_message_is_searched_with_the_users_message_before_it() -> None:
    rt, model = runtime()
    run_turn(rt, ALICE, "s1", "I need to plan the August visit of my sister Maria")
    run_turn(rt, ALICE, "s1", "And where is it?")

    assert "Porto" in (recalled_block(model.requests[1]) or "")
    assert recall_query("And where is it?", "plan Maria's visit") == (
        "plan Maria's visit\nAnd where is it?"
    )
    long = "Where exactly does my sister Maria live these days?"
    assert recall_query(long, "something else") == long


def break_listing(rt, folder: str) -> None:
    """Make every LIST of ``folder`` fail as S3 would."""
    original = rt.store.list

    def broken(user, prefix, **kw):
        if prefix.startswith(folder):
            raise StoreError(f"listing {folder} failed")
        return original(user, prefix, **kw)

    rt.store.list = broken


def test_a_failed_ledger_read_costs_the_recall_not_the_turn() -> None:
    rt, model = runtime()
    break_listing(rt, "memory")

    result = run_turn(rt, ALICE, "s1", "Where does my sister Maria live?")

    assert result.reply == "ok" and recalled_block(model.requests[0]) is None


def test_a_paused_turn_shows_the_same_recall_when_it_resumes() -> None:
    from agent_harness.agent.client_tools import ToolResult
    from tests.fakes import tool_call

    model = ScriptedModel(tool_call("lookup_order", '{"order_id": 42}'), "It shipped.")
    rt = make_runtime(agent=model)
    rt.store.put(ALICE, "memory/2026-03-02.md", LEDGER, create_only=True)

    order = ToolSpec(
        name=ORDER_TOOL["name"],
        description=ORDER_TOOL["description"],
        parameters=ORDER_TOOL["parameters"],
    )
    run_turn(rt, ALICE, "s1", "Is my sister Maria's order 42 here?", tools=[order])
    run_turn(rt, ALICE, "s1", tool_results=[ToolResult("call_1", "shipped")])

    first, resumed = (recalled_block(r) for r in model.requests)
    assert first is not None and "Porto" in first and resumed == first


def files(**by_path: str) -> list[tuple[str, FileIndex]]:
    return [(path, FileIndex.build(text)) for path, text in by_path.items()]


def test_equal_scores_go_newest_first_and_the_budget_keeps_whole_lines() -> None:
    same = "- the quarterly budget review is on Friday\n"
    found = files(
        **{"memory/2026-01-05.md": same, "memory/2026-02-09.md": same.replace("the", "a")}
    )
    counter = TokenCounter()

    lines = select_lines(
        found, "quarterly budget review", shown="", counter=counter, max_tokens=500, min_score=0
    )
    assert [line.day for line in lines] == ["2026-02-09", "2026-01-05"]

    one = counter.count(lines[0].render()) + 1
    assert (
        len(
            select_lines(
                found,
                "quarterly budget review",
                shown="",
                counter=counter,
                max_tokens=one,
                min_score=0,
            )
        )
        == 1
    )


def test_the_floor_drops_lines_found_only_through_their_neighbours() -> None:
    found = files(**{"memory/2026-01-05.md": "- the review is on Friday\n- lunch with Tom\n"})
    counter = TokenCounter()
    query = "when is the review, on friday?"

    every = select_lines(found, query, shown="", counter=counter, max_tokens=500, min_score=0)
    kept = select_lines(found, query, shown="", counter=counter, max_tokens=500, min_score=0.3)

    assert [line.text for line in every] == ["- the review is on Friday", "- lunch with Tom"]
    assert [line.text for line in kept] == ["- the review is on Friday"]
    hits = search_files(found, query, "ranked", 5)
    assert coverage(found, query, hits) == [1.0, 0.0]


def test_a_container_reuses_a_users_ledger_listing_for_a_while() -> None:
    # the ledgers alone (test_recall_messages has the thread segments beside them)
    rt, model = runtime(recall_listing_seconds=30, recall_messages=False)
    listed: list[str] = []
    original = rt.store.list
    rt.store.list = lambda user, prefix, **kw: listed.append(prefix) or original(user, prefix, **kw)

    run_turn(rt, ALICE, "s1", "Where does my sister Maria live?")
    rt.clock.advance(seconds=29)
    run_turn(rt, ALICE, "s1", "Tell me more about where my sister Maria lives")
    assert listed == ["memory/"]  # the second turn reused the first one's LIST
    rt.clock.advance(seconds=2)
    run_turn(rt, ALICE, "s1", "And when does Maria visit from Porto?")

    assert listed == ["memory/", "memory/"]
    assert all("Porto" in (recalled_block(r) or "") for r in model.requests)


@pytest.mark.parametrize("budget", [150, 400, 4000])
def test_the_budget_caps_the_whole_recall_message_frame_included(budget: int) -> None:
    model = ScriptedModel("ok")
    settings = Settings(consolidation_min_gap_seconds=0, recall_max_tokens=budget)
    rt = make_runtime(agent=model, settings=settings)
    facts = "\n".join(f"- the harbour ferry number {n} leaves pier {n % 7}" for n in range(300))
    rt.store.put(ALICE, "memory/2026-03-02.md", f"## Memory Save — x\n{facts}\n")

    run_turn(rt, ALICE, "fresh", "which harbour ferry leaves from which pier?")

    record = json.loads(rt.store.text(ALICE, "sessions/fresh/turns/00000001.json"))
    recall = next(m for m in model.requests[0].messages if 'source="recall"' in m.content)
    tokens = rt.counter.count(recall.content)
    assert record["memory"]["recall_tokens"] == tokens <= budget
    # filled up to about one more line (lines are counted one by one, a little over what
    # they cost together); a large budget considers more candidates than the 60 a small
    # one does, so it is not stopped at 60 lines
    assert budget - tokens < 40 + budget // 25
    assert len(record["memory"]["recalled"]) > (60 if budget == 4000 else 0)


# -- the current truth ---------------------------------------------------------------------
MOVED = (
    "\n## Flush — 2026-03-20T10:00:00Z\n> source: session=new turns=2 model=offline\n"
    "- Alice's sister Maria moved to Lisbon (supersedes {porto})\n"
)


def test_recall_shows_the_fact_that_replaced_a_superseded_one_and_not_the_old_one() -> None:
    from agent_harness.memory.facts.lifecycle import ledger_fact_id

    rt, model = runtime()
    porto = ledger_fact_id(
        "2026-03-02", "Alice's sister Maria lives in Porto and visits every August"
    )
    rt.store.put(ALICE, "memory/2026-03-20.md", MOVED.format(porto=porto), create_only=True)
    rt.store.put(
        ALICE, "MEMORY.md", "- Alice's sister Maria lives in Porto and visits every August\n"
    )

    run_turn(rt, ALICE, "fresh", "Where does my sister Maria live?")

    [request] = model.requests
    block = recalled_block(request) or ""
    assert "Maria moved to Lisbon" in block and "Porto" not in block
    # MEMORY.md still says Porto until the next consolidation: the injection leaves it out
    assert "Porto" in rt.store.text(ALICE, "MEMORY.md")
    assert not any("Porto" in m.content for m in request.messages)


def test_a_fact_whose_ground_changed_is_recalled_labelled_possibly_outdated() -> None:
    from agent_harness.memory.facts.lifecycle import ledger_fact_id

    rt, model = runtime()
    porto = ledger_fact_id(
        "2026-03-02", "Alice's sister Maria lives in Porto and visits every August"
    )
    visit = "- Alice plans to visit Maria in Porto in May (depends {porto})\n"
    rt.store.put(
        ALICE,
        "memory/2026-03-10.md",
        "\n## Flush — 2026-03-10T10:00:00Z\n" + visit.format(porto=porto),
        create_only=True,
    )
    rt.store.put(ALICE, "memory/2026-03-20.md", MOVED.format(porto=porto), create_only=True)

    run_turn(rt, ALICE, "fresh", "When do I visit Maria in May?")

    block = recalled_block(model.requests[0]) or ""
    assert "visit Maria in Porto in May" in block
    assert "possibly outdated: a fact it depends on changed" in block


def test_of_two_unmarked_facts_about_one_thing_the_newer_is_recalled_first() -> None:
    old = "\n## Flush — 2026-01-05T10:00:00Z\n- Alice's gym membership is at FitOne downtown\n"
    new = "\n## Flush — 2026-02-05T10:00:00Z\n- Alice's gym membership is at PowerHouse now\n"
    found = files(**{"memory/2026-01-05.md": old, "memory/2026-02-05.md": new})
    from agent_harness.memory.engine.truth import truth_of

    lines = select_lines(
        found,
        "Which gym membership does Alice have? FitOne downtown?",
        shown="",
        counter=TokenCounter(),
        max_tokens=500,
        min_score=0,
        truth=truth_of(found, "2026-03-01"),
    )

    assert [line.day for line in lines[:2]] == ["2026-02-05", "2026-01-05"]


def test_the_budget_chooses_by_rank_and_only_the_chosen_are_put_newest_first() -> None:
    # the older fact ranks first and the room holds one line: the newer does not push
    # it out (what fits is chosen by rank); with room for both, the newer comes first
    old = "\n## Flush — 2026-01-05T10:00:00Z\n- Alice's gym membership is at FitOne downtown\n"
    new = "\n## Flush — 2026-02-05T10:00:00Z\n- Alice's gym membership is at PowerHouse now\n"
    found = files(**{"memory/2026-01-05.md": old, "memory/2026-02-05.md": new})
    from agent_harness.memory.engine.truth import truth_of

    counter = TokenCounter()
    query = "Which gym membership does Alice have? FitOne downtown?"
    one = counter.count("- Alice's gym membership is at FitOne downtown (memory/2026-01-05.md#3)")
    kwargs = {
        "shown": "",
        "counter": counter,
        "min_score": 0,
        "truth": truth_of(found, "2026-03-01"),
    }

    tight = select_lines(found, query, max_tokens=one + 8, **kwargs)
    roomy = select_lines(found, query, max_tokens=500, **kwargs)

    assert [line.day for line in tight] == ["2026-01-05"]
    assert [line.day for line in roomy] == ["2026-02-05", "2026-01-05"]
