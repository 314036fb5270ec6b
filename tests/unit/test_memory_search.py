"""memory_search (agent_harness.memory.search over memory.engine.corpus): ordering, reading
through the cache, isolation, dates and facts ranked with their turns; the engine
itself is tested in test_index.py."""

from __future__ import annotations

from agent_harness.ids import User
from agent_harness.memory.engine.cache import MemoryIndexCache
from agent_harness.memory.engine.file_index import FileIndex
from agent_harness.memory.engine.index import search_files
from agent_harness.memory.search import format_hits, search_memory
from tests.fakes import make_runtime
from tests.unit.test_index import LEDGER

ALICE = User.from_id("alice")


def test_tool_output_format() -> None:
    hits = search_files(LEDGER, "windowsill", "phrase", 20)
    assert format_hits("windowsill", hits) == (
        "Found 1 match for: windowsill\n"
        "Source: memory/2026-01-02.md#3: - cat sits on the windowsill"
    )
    assert format_hits("zebra", []) == "No matching memories found for: zebra"
    assert format_hits("  ", []) == "No query provided"


def test_memory_md_comes_first_then_ledgers_by_path_archive_included() -> None:
    rt = make_runtime()
    for path in [
        "memory/2026-02-01.md",
        "memory/archive/2025-01-01.md",
        "memory/2026-01-01.md",
        "MEMORY.md",
    ]:
        rt.store.put(ALICE, path, f"- tea in {path}")
    hits = search_memory(rt, ALICE, "tea", "phrase", 20, MemoryIndexCache())
    assert [h.path for h in hits] == [
        "MEMORY.md",
        "memory/2026-01-01.md",
        "memory/2026-02-01.md",
        "memory/archive/2025-01-01.md",
    ]


def test_unchanged_ledgers_come_from_the_warm_cache() -> None:
    rt = make_runtime()
    for day in range(1, 31):
        rt.store.put(ALICE, f"memory/2026-01-{day:02d}.md", f"- fact {day}")
    cache = MemoryIndexCache()
    search_memory(rt, ALICE, "fact", "any", 5, cache)
    rt.store.calls.clear()
    rt.store.put(ALICE, "memory/2026-01-30.md", "- changed fact")
    rt.store.calls.clear()

    hits = search_memory(rt, ALICE, "changed", "any", 5, cache)

    assert [h.text for h in hits] == ["- changed fact"]
    gets = [path for op, path in rt.store.calls if op == "get"]
    assert sorted(gets) == ["MEMORY.md", "memory/2026-01-30.md"]  # only the changed file


def test_search_never_reads_another_users_memory() -> None:
    rt = make_runtime()
    rt.store.put(User.from_id("bob"), "MEMORY.md", "- bob's secret tea")
    rt.store.put(ALICE, "MEMORY.md", "- alice likes coffee")
    cache = MemoryIndexCache()
    assert search_memory(rt, ALICE, "tea", "any", 5, cache) == []
    assert search_memory(rt, ALICE, "secret", "ranked", 5, cache) == []
    # the same queries do find each one's own line
    bob = User.from_id("bob")
    assert [h.text for h in search_memory(rt, bob, "tea", "any", 5, cache)] == [
        "- bob's secret tea"
    ]
    assert [h.text for h in search_memory(rt, bob, "secret", "ranked", 5, cache)] == [
        "- bob's secret tea"
    ]
    assert [h.text for h in search_memory(rt, ALICE, "coffee", "any", 5, cache)] == [
        "- alice likes coffee"
    ]


def test_ranked_scores_a_ledger_line_with_its_day_as_words() -> None:
    from agent_harness.memory.engine.corpus import index_memory_file as _index_memory_file

    source = [
        ("MEMORY.md", _index_memory_file("MEMORY.md", "- went camping in the mountains")),
        (
            "memory/2023-06-27.md",
            _index_memory_file("memory/2023-06-27.md", "- went camping by the lake"),
        ),
        (
            "memory/2023-08-02.md",
            _index_memory_file("memory/2023-08-02.md", "- went camping in the rain"),
        ),
    ]
    hits = search_files(source, "camping in June", "ranked", 5)
    assert hits[0].text == "- went camping by the lake"
    assert search_files(source, "2023-06-27", "phrase", 5) == []  # a date is not text
    assert search_files(source, "June", "any", 5) == []
    # while the text is found literally
    assert [h.text for h in search_files(source, "by the lake", "phrase", 5)] == [
        "- went camping by the lake"
    ]
    assert len(search_files(source, "camping", "any", 5)) == 3


# -- facts read with the turns they came from ----------------------------------------------
def _talked_and_saved(source: bool) -> tuple[object, MemoryIndexCache]:
    """Alice talked about long flights (turn 1 of "trip"); a fact from that turn was saved
    without those words, naming the turn as its source or not."""
    from agent_harness.agent.turn import run_turn
    from agent_harness.memory.files import save_source
    from agent_harness.memory.jobs.flush import run_post_turn_job
    from agent_harness.memory.owner import Memory
    from tests.fakes import ScriptedModel

    rt = make_runtime(agent=ScriptedModel("Noted."), memory=ScriptedModel("NO_REPLY"))
    run_turn(rt, ALICE, "trip", "I get anxious on long flights over the Atlantic.")
    while rt.queue.post_turn:  # index the turn, as the FIFO consumer would
        run_post_turn_job(rt, rt.queue.post_turn.pop(0))
    provenance = save_source(rt, ALICE, "trip", [1]) if source else "> source: api"
    at = rt.clock.now()
    Memory(rt, ALICE).save(
        authority="save:api",
        lines=["- books an aisle seat near the front"],
        provenance=provenance,
        at=at,
    )
    Memory(rt, ALICE).save(
        authority="save:api",
        lines=["- likes window views from hotels"],
        provenance="> x",
        at=at,
    )
    return rt, MemoryIndexCache()


def test_ranked_finds_a_fact_by_the_words_of_the_turn_it_came_from() -> None:
    rt, cache = _talked_and_saved(source=True)
    hits = search_memory(rt, ALICE, "Atlantic flights", "ranked", 5, cache)
    assert [h.text for h in hits][:1] == ["- [save:api] books an aisle seat near the front"]
    assert hits[0].path.startswith("memory/")  # the ledger copy: it names its turn
    assert search_memory(rt, ALICE, "Atlantic", "phrase", 5, cache) == []  # never literal
    literal = search_memory(rt, ALICE, "aisle seat", "phrase", 5, cache)  # the fact's own words
    assert {h.text for h in literal} == {"- [save:api] books an aisle seat near the front"}


def test_without_a_source_the_turns_words_find_nothing() -> None:
    rt, cache = _talked_and_saved(source=False)
    assert search_memory(rt, ALICE, "Atlantic flights", "ranked", 5, cache) == []
    # the fact is there: its own words find it, ranked as well
    hits = search_memory(rt, ALICE, "aisle seat", "ranked", 5, cache)
    assert [h.text for h in hits][:1] == ["- [save:api] books an aisle seat near the front"]


def test_turn_texts_are_read_only_for_ranked_queries_over_ledgers_naming_turns() -> None:
    rt, cache = _talked_and_saved(source=True)
    rt.store.calls.clear()
    search_memory(rt, ALICE, "aisle", "any", 5, cache)
    assert not any(p.startswith("index/threads") for _, p in rt.store.calls)
    search_memory(rt, ALICE, "aisle", "ranked", 5, cache)
    assert ("get", "index/ranked/threads-2026-11.json") in rt.store.calls  # its snapshot
    rt.store.calls.clear()
    search_memory(rt, ALICE, "aisle", "ranked", 5, cache)  # warm: the segment is cached
    assert not any(op == "get" and p.startswith("index/") for op, p in rt.store.calls)

    plain, plain_cache = _talked_and_saved(source=False)
    plain.store.calls.clear()
    search_memory(plain, ALICE, "aisle", "ranked", 5, plain_cache)
    assert not any(p.startswith("index/threads") for _, p in plain.store.calls)


def test_a_source_naming_another_sessions_turn_adds_nothing_of_this_one() -> None:
    from agent_harness.memory.engine.corpus import load_turn_texts
    from agent_harness.memory.engine.index import SOURCE_WEIGHT
    from agent_harness.text import terms

    rt, cache = _talked_and_saved(source=True)
    turns = load_turn_texts(rt, ALICE, cache)
    assert turns.length(("trip", 1)) > 0 and turns.length(("trip", 2)) == 0
    (atlantic,) = terms("Atlantic")
    assert turns.counts(atlantic) == {("trip", 1): 1}
    ledger = FileIndex.build(
        "## Memory Save — t\n> source: session=other turns=1 via=memory_save\n- aisle seat"
    )
    assert search_files([("memory/d.md", ledger)], "Atlantic", "ranked", 5, turns) == []
    # the same ledger and turns: the line's own words find it
    found = search_files([("memory/d.md", ledger)], "aisle", "ranked", 5, turns)
    assert [h.text for h in found] == ["- aisle seat"]
    assert SOURCE_WEIGHT > 0


# -- the collector paused while a query reads and ranks ------------------------------------
def test_building_pauses_the_collector_and_gives_it_back_even_on_error() -> None:
    import gc

    import pytest

    from agent_harness.memory.engine.cache import building

    assert gc.isenabled()
    with building():
        assert not gc.isenabled()
        with building():  # nested: the outer one gives it back
            pass
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), building():
        raise RuntimeError("a failed read")
    assert gc.isenabled()


def test_a_cold_ranked_query_makes_no_reference_cycles_so_pausing_leaks_nothing() -> None:
    """What ``building`` relies on: a cold query (snapshots decoded, facts joined with
    their turns) leaves no cyclic garbage, and the cache it fills frees by reference
    counting alone, so the paused collector misses nothing."""
    import gc

    from agent_harness.memory.engine.corpus import refresh_snapshots

    rt, _ = _talked_and_saved(source=True)
    refresh_snapshots(rt, ALICE)
    gc.collect()
    gc.disable()
    try:
        cache = MemoryIndexCache()
        hits = search_memory(rt, ALICE, "Atlantic flights", "ranked", 5, cache)
        assert hits and gc.collect() == 0  # nothing the query made is cyclic garbage
        del cache, hits
        assert gc.collect() == 0  # and the cache went by reference counting
    finally:
        gc.enable()


def test_ranked_reads_past_lines_with_the_same_words_to_fill_the_limit() -> None:
    # the best-scored lines are one fact saved thirty times: the query must read past
    # them (beyond the few it takes first) and still rank like a full sort would
    text = "\n".join(["- green tea"] * 30 + ["- tea with milk", "- black tea, strong", "- tea"])
    files = [("memory/2026-11-02.md", FileIndex.build(text))]
    few = search_files(files, "green tea", "ranked", 3)
    assert [h.text for h in few] == [
        h.text for h in search_files(files, "green tea", "ranked", 99)
    ][:3]
    assert len({h.text for h in few}) == 3
