"""The persisted ranked index (memory.engine.snapshots, read and refreshed by
memory.engine.corpus): a restored index ranks exactly like a built one, a cold read takes
one GET per month, an entry is used only at its file's current ETag, and a damaged or
foreign snapshot costs speed, never a result."""

from __future__ import annotations

import base64
import json

import pytest

from agent_harness.errors import StoreError
from agent_harness.ids import User
from agent_harness.memory.engine import snapshots
from agent_harness.memory.engine.cache import MemoryIndexCache
from agent_harness.memory.engine.corpus import index_memory_file, refresh_snapshots
from agent_harness.memory.engine.index import LinkedIndexes, search_files
from agent_harness.memory.engine.segments import parse_segment
from agent_harness.memory.jobs.consolidate import consolidate
from agent_harness.memory.jobs.forget import forget_user
from agent_harness.memory.jobs.schedule import forced_job
from agent_harness.memory.search import search_memory
from agent_harness.memory.threads import search_threads
from agent_harness.settings import Settings
from tests.fakes import ScriptedModel, make_runtime, tool_call
from tests.unit.test_threads import drain, talk, three_months

ALICE = User.from_id("alice")
BOB = User.from_id("bob")

LEDGER = """## Flush — 2026-11-02T09:00:00Z
> source: session=s1 turns=1-2 model=offline
- Alice prefers window seats on long flights
- The atlas project deadline moved to Friday

## Memory Save — 2026-11-02T10:00:00Z
> source: session=s1 turns=3 via=memory_save
- Allergic to peanuts; told the dentist
- 東京タワーに行きたい
"""
SEGMENT = "\n".join(
    json.dumps({"s": s, "t": t, "i": i, "r": r, "at": "2026-11-02T09:00:00Z", "x": x})
    for s, t, i, r, x in [
        ("s1", 1, 0, "user", "I always book a window seat when flying"),
        ("s1", 1, 1, "assistant", "Noted: window seats"),
        ("s1", 2, 0, "user", "The atlas deadline moved to Friday after the review"),
        ("s1", 3, 0, "user", "peanuts are a problem, the dentist knows"),
    ]
)
QUERIES = ["window seats", "atlas deadline friday", "about flying", "peanut 東京", "2 November"]


def roundtrip(parsed, etag: str = '"e"'):  # type: ignore[no-untyped-def]
    text = snapshots.render({"file": snapshots.encode(parsed, etag)})
    return snapshots.read(text)["file"]


@pytest.mark.parametrize("mode", ["phrase", "all", "any", "ranked"])
def test_a_restored_ledger_ranks_exactly_like_a_built_one(mode: str) -> None:
    built = index_memory_file("memory/2026-11-02.md", LEDGER)
    restored = snapshots.decode_ledger(roundtrip(index_memory_file("memory/2026-11-02.md", LEDGER)))
    turns = parse_segment("index/threads/2026-11.jsonl", SEGMENT)
    for query in QUERIES:
        for linked, weight in [(None, 0.0), (LinkedIndexes([turns.index]), 0.5)]:
            expected = search_files([("m", built)], query, mode, 20, linked, weight)  # type: ignore[arg-type]
            got = search_files([("m", restored)], query, mode, 20, linked, weight)  # type: ignore[arg-type]
            assert got == expected, (query, weight)
    assert restored.linked_groups() == built.linked_groups()
    assert [restored.keys_of(n) for n in range(len(built.lines))] == [
        built.keys_of(n) for n in range(len(built.lines))
    ]


def test_a_restored_segment_keeps_its_messages_metadata_and_links() -> None:
    built = parse_segment("index/threads/2026-11.jsonl", SEGMENT)
    restored = snapshots.decode_segment(roundtrip(parse_segment("x", SEGMENT)))
    records = range(len(built.index.lines))
    assert [restored.meta(n) for n in records] == [built.meta(n) for n in records] != []
    assert restored.size == built.size
    facts = LinkedIndexes([index_memory_file("memory/2026-11-02.md", LEDGER)])
    for query in QUERIES:
        expected = search_files([("s", built.index)], query, "ranked", 20, facts, 0.5)
        assert search_files([("s", restored.index)], query, "ranked", 20, facts, 0.5) == expected


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        json.dumps({"format": snapshots.FORMAT + 1, "terms": snapshots.fingerprint(), "files": {}}),
        json.dumps({"format": snapshots.FORMAT, "terms": "another tokenizer", "files": {}}),
    ],
)
def test_a_damaged_or_foreign_snapshot_reads_as_empty(text: str) -> None:
    assert snapshots.read(text) == {}


def _one_short(text: str) -> str:
    """A column's text holding one integer fewer (well-formed base64)."""
    return base64.b64encode(base64.b64decode(text)[:-4]).decode()


@pytest.mark.parametrize(
    "damage",
    [
        lambda e: e | {"own": e["own"][:-1]},  # torn base64
        lambda e: e | {"after": _one_short(e["after"])},  # a column one line short
        lambda e: e | {"before": [0] * len(e["lines"])},  # format 1's JSON list
        lambda e: e | {"own": e["own"][:-4] + "!!!!"},  # not base64
        lambda e: e | {"lines": e["lines"].rsplit("\n", 1)[0]},  # a line short
        lambda e: e | {"lines": e["lines"].split("\n")},  # format 1's JSON list
    ],
)
def test_a_damaged_entry_does_not_decode(damage) -> None:  # type: ignore[no-untyped-def]
    entry = roundtrip(index_memory_file("memory/2026-11-02.md", LEDGER))
    with pytest.raises(ValueError):
        snapshots.decode_ledger(damage(entry))
    segment = roundtrip(parse_segment("x", SEGMENT))
    with pytest.raises(ValueError):
        snapshots.decode_segment(damage(segment))
    with pytest.raises(ValueError):
        snapshots.decode_segment(segment | {"roles": segment["roles"][:-1]})


def test_damaged_sections_are_read_again_from_the_lines() -> None:
    built = index_memory_file("memory/2026-11-02.md", LEDGER)
    entry = roundtrip(index_memory_file("memory/2026-11-02.md", LEDGER))
    entry["sections"] = "[[1, 2"
    restored = snapshots.decode_ledger(entry)
    assert restored.linked_groups() == built.linked_groups() != []


WHOLE = """## Flush — 2026-11-02T09:00:00Z
> source: session=s1 turns=1-6 model=offline
- Alice prefers window seats on long flights

## Flush — 2026-11-02T09:00:00Z
> source: session=s1 turns=1-6 model=offline
- The atlas project deadline moved to Friday

## Flush — 2026-11-02T10:00:00Z
> source: session=s2 turns=1-6 model=offline
- Allergic to peanuts; told the dentist
"""


def test_sections_naming_the_same_turns_are_written_once_and_share_them() -> None:
    built = index_memory_file("memory/2026-11-02.md", WHOLE)
    entry = roundtrip(built)

    stored = [turns for _, turns in json.loads(entry["sections"])]
    assert stored[3] == 1 and stored[5] != 1  # the second flush of s1 refers to the first
    restored = snapshots.decode_ledger(entry)
    groups = [turns for _, turns in restored.linked_groups()]
    assert groups == [turns for _, turns in built.linked_groups()]
    assert groups[0] is groups[1] and groups[0] is not groups[2]  # one object: one join
    first, second, _ = (t for _, t in built.linked_groups())
    assert first is second  # parsed from the lines, the same


def test_sections_sharing_their_turns_rank_as_if_each_had_its_own() -> None:
    talked = "\n".join(
        json.dumps({"s": s, "t": t, "i": 0, "r": "user", "at": "2026-11-02T09:00:00Z", "x": x})
        for s, t, x in [("s1", 2, "the atlas deadline is on Friday"), ("s2", 4, "peanuts")]
    )
    turns = parse_segment("index/threads/2026-11.jsonl", talked)
    shared = index_memory_file("memory/2026-11-02.md", WHOLE)
    apart = index_memory_file("memory/2026-11-02.md", WHOLE)
    apart._sections = [(start, tuple(iter(t))) for start, t in apart._section_starts()]
    first, second, _ = (t for _, t in apart.linked_groups())
    assert first == second and first is not second

    for query in ["atlas deadline friday", "window seats", "peanuts dentist"]:
        expected = search_files(
            [("m", apart)], query, "ranked", 20, LinkedIndexes([turns.index]), 0.5
        )
        got = search_files([("m", shared)], query, "ranked", 20, LinkedIndexes([turns.index]), 0.5)
        assert got == expected and expected


@pytest.mark.parametrize("reference", [7, -1, 0, 2])
def test_a_section_referring_to_no_earlier_turns_is_read_again_from_the_lines(
    reference: int,
) -> None:
    built = index_memory_file("memory/2026-11-02.md", WHOLE)
    entry = roundtrip(built)
    sections = json.loads(entry["sections"])
    sections[3][1] = reference  # sections 0 and 2 are headings: no turns to refer to
    entry["sections"] = json.dumps(sections)

    restored = snapshots.decode_ledger(entry)

    assert restored.linked_groups() == built.linked_groups()


def test_a_snapshot_written_before_the_references_still_shares_the_turns() -> None:
    built = index_memory_file("memory/2026-11-02.md", WHOLE)
    entry = roundtrip(built)
    sections = json.loads(entry["sections"])
    sections[3][1] = sections[1][1]  # each list written out, as older snapshots have it
    entry["sections"] = json.dumps(sections)

    groups = [turns for _, turns in snapshots.decode_ledger(entry).linked_groups()]

    assert groups == [turns for _, turns in built.linked_groups()] and groups[0] is groups[1]


def ledgers(rt, user: User = ALICE, days: range = range(1, 11)) -> None:  # type: ignore[no-untyped-def]
    for day in days:
        rt.store.put(user, f"memory/2026-11-{day:02d}.md", f"- fact {day} about tea\n")


def gets(rt) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(p for op, p in rt.store.calls if op == "get")


def test_a_cold_search_reads_one_snapshot_per_month_not_every_ledger() -> None:
    rt = make_runtime()
    ledgers(rt)
    rt.store.put(ALICE, "memory/2026-10-31.md", "- october tea\n")
    assert refresh_snapshots(rt, ALICE) == 2
    rt.store.calls.clear()
    hits = search_memory(rt, ALICE, "tea", "ranked", 20, MemoryIndexCache())
    assert len(hits) == 11
    assert gets(rt) == [
        "MEMORY.md",
        "index/ranked/memory-2026-10.json",
        "index/ranked/memory-2026-11.json",
    ]
    for info in rt.store.list(ALICE, "index/ranked"):
        rt.store.delete(ALICE, info.path)
    expected = search_memory(rt, ALICE, "tea", "ranked", 20, MemoryIndexCache())
    assert hits == expected  # from the snapshots or from the files themselves: the same


def test_a_ledger_changed_since_its_snapshot_is_read_from_the_file() -> None:
    rt = make_runtime()
    ledgers(rt)
    refresh_snapshots(rt, ALICE)
    rt.store.put(ALICE, "memory/2026-11-10.md", "- fact 10 about coffee now\n")
    rt.store.calls.clear()
    hits = search_memory(rt, ALICE, "coffee", "ranked", 5, MemoryIndexCache())
    assert [h.text for h in hits] == ["- fact 10 about coffee now"]
    assert gets(rt) == ["MEMORY.md", "index/ranked/memory-2026-11.json", "memory/2026-11-10.md"]


def test_a_damaged_snapshot_costs_speed_not_results() -> None:
    rt = make_runtime()
    ledgers(rt)
    rt.store.put(ALICE, "index/ranked/memory-2026-11.json", '{"format": 1, "files": ')
    hits = search_memory(rt, ALICE, "tea", "ranked", 20, MemoryIndexCache())
    assert len(hits) == 10


def test_refresh_rewrites_only_changed_snapshots_and_drops_empty_ones() -> None:
    rt = make_runtime()
    ledgers(rt)
    assert refresh_snapshots(rt, ALICE) == 1
    rt.store.calls.clear()
    assert refresh_snapshots(rt, ALICE, {"memory/2026-11-03.md"}) == 0  # nothing changed
    assert [op for op, _ in rt.store.calls if op in ("put", "delete")] == []
    rt.store.put(ALICE, "memory/2026-11-03.md", "- fact 3 changed\n")
    rt.store.calls.clear()
    assert refresh_snapshots(rt, ALICE, {"memory/2026-11-03.md"}) == 1
    assert [p for op, p in rt.store.calls if op == "get" and p.startswith("memory/")] == [
        "memory/2026-11-03.md"  # the unchanged ledgers' entries are kept as they were
    ]
    for day in range(1, 11):
        rt.store.delete(ALICE, f"memory/2026-11-{day:02d}.md")
    assert refresh_snapshots(rt, ALICE) == 1
    assert rt.store.text(ALICE, "index/ranked/memory-2026-11.json") is None


def test_the_post_turn_job_writes_the_snapshots_of_what_it_wrote() -> None:
    rt = make_runtime(
        agent=ScriptedModel("noted"), memory=ScriptedModel("- Alice grows tomatoes on the balcony")
    )
    talk(rt, "s1", "I grow tomatoes on my balcony")
    drain(rt)
    ledger = snapshots.read(rt.store.text(ALICE, "index/ranked/memory-2026-11.json") or "")
    threads = snapshots.read(rt.store.text(ALICE, "index/ranked/threads-2026-11.json") or "")
    day = next(iter(ledger))
    assert ledger[day]["etag"] == rt.store.get(ALICE, day).etag  # type: ignore[union-attr]
    assert list(threads) == ["index/threads/2026-11.jsonl"]
    assert threads["index/threads/2026-11.jsonl"]["turns"] == [1, 1]


def test_a_job_that_writes_no_ledger_leaves_the_ledger_snapshot_alone() -> None:
    rt = make_runtime(agent=ScriptedModel("hello"), memory=ScriptedModel("NO_REPLY"))
    talk(rt, "s1", "hi there")
    rt.store.calls.clear()
    drain(rt)
    assert not [p for _, p in rt.store.calls if p.startswith("index/ranked/memory")]
    assert rt.store.text(ALICE, "index/ranked/threads-2026-11.json") is not None


def test_a_memory_save_in_the_turn_reaches_the_ledger_snapshot() -> None:
    agent = ScriptedModel(tool_call("memory_save", '{"content": "- likes pike"}'), "saved")
    rt = make_runtime(agent=agent, memory=ScriptedModel("NO_REPLY"))
    talk(rt, "s1", "remember that I like pike")
    drain(rt)
    ledger = snapshots.read(rt.store.text(ALICE, "index/ranked/memory-2026-11.json") or "")
    [(path, entry)] = ledger.items()
    assert "- [save:agent] likes pike" in entry["lines"]
    assert entry["etag"] == rt.store.get(ALICE, path).etag  # type: ignore[union-attr]


def test_consolidation_moves_archived_days_between_snapshots() -> None:
    settings = Settings(consolidation_min_gap_seconds=0, daily_file_retention_days=30)
    rt = make_runtime(settings=settings, memory=ScriptedModel("- tea", "NO_REPLY"))
    rt.store.put(ALICE, "memory/2026-09-01.md", "- old tea\n")
    rt.store.put(ALICE, "memory/2026-11-01.md", "- new tea\n")
    refresh_snapshots(rt, ALICE)
    assert rt.store.text(ALICE, "index/ranked/memory-2026-09.json") is not None
    consolidate(rt, forced_job(rt, ALICE))
    assert rt.store.text(ALICE, "memory/archive/2026-09-01.md") == "- old tea\n"
    assert rt.store.text(ALICE, "index/ranked/memory-2026-09.json") is None
    archive = rt.store.text(ALICE, "index/ranked/memory-archive-2026-09.json")
    archived = snapshots.read(archive or "")
    assert list(archived) == ["memory/archive/2026-09-01.md"]


def test_a_refresh_that_fails_or_loses_a_race_leaves_the_job_alone() -> None:
    rt = make_runtime()
    ledgers(rt)
    rt.store.fail_puts = lambda path: path.startswith("index/ranked/")
    assert refresh_snapshots(rt, ALICE) == 0  # logged, not raised
    rt.store.fail_puts = lambda path: False
    refresh_snapshots(rt, ALICE)
    rt.store.put(ALICE, "memory/2026-11-01.md", "- changed\n")
    real_get = rt.store.get

    def racing_get(user, path):  # type: ignore[no-untyped-def]
        found = real_get(user, path)
        if path.startswith("index/ranked/"):
            rt.store.put(user, path, found.content + " ")  # another writer, meanwhile
        return found

    rt.store.get = racing_get  # type: ignore[method-assign]
    assert refresh_snapshots(rt, ALICE) == 0  # the 412 leaves it to the other writer


def test_snapshots_never_cross_users_and_forget_removes_them() -> None:
    rt = make_runtime()
    ledgers(rt, ALICE)
    refresh_snapshots(rt, ALICE)
    bob_hits = search_memory(rt, BOB, "tea", "ranked", 20, MemoryIndexCache())
    assert bob_hits == []
    assert rt.store.list(BOB, "index/ranked") == []
    forget_user(rt, ALICE)
    assert rt.store.list(ALICE, "index/ranked") == []


def test_thread_search_from_snapshots_finds_what_the_segments_hold() -> None:
    rt = three_months("the harbour ferry of month {month}")
    from_snapshots = search_threads(rt, ALICE, "harbour ferry", "ranked", 5, MemoryIndexCache())
    for info in rt.store.list(ALICE, "index/ranked"):
        rt.store.delete(ALICE, info.path)
    from_files = search_threads(rt, ALICE, "harbour ferry", "ranked", 5, MemoryIndexCache())
    assert from_snapshots == from_files
    assert {h.session_id for h in from_snapshots} == {"s9", "s10", "s11"}


def test_a_store_error_reading_snapshots_falls_back_to_the_files() -> None:
    rt = make_runtime()
    ledgers(rt)
    refresh_snapshots(rt, ALICE)
    real = rt.store.get_many

    def flaky(user, paths):  # type: ignore[no-untyped-def]
        if any(p.startswith("index/ranked/") for p in paths):
            raise StoreError("injected")
        return real(user, paths)

    rt.store.get_many = flaky  # type: ignore[method-assign]
    assert len(search_memory(rt, ALICE, "tea", "ranked", 20, MemoryIndexCache())) == 10
