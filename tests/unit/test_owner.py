"""The owner of a memory (memory.owner.Memory): each write people, agents and the memory
jobs make runs one pipeline in one order (gate, capacity, MEMORY.md, review hold,
ledger, index), and a write that cannot complete leaves nothing behind."""

from __future__ import annotations

import pytest

from agent_harness.embeddings.embedder import Embedder
from agent_harness.embeddings.stand_in import StandInEmbeddingModel
from agent_harness.errors import MemoryFullError, PreconditionFailedError, StoreError
from agent_harness.ids import User
from agent_harness.memory.engine.vectors import decode, line_key, vector_path
from agent_harness.memory.facts.gate import Candidate, Held
from agent_harness.memory.facts.ledger import Source, render_section
from agent_harness.memory.facts.lifecycle import Marks, ledger_fact_id, render_marks
from agent_harness.memory.owner import Memory
from agent_harness.memory.review import list_review
from agent_harness.memory.vectors import refresh_vectors
from agent_harness.paths import MEMORY_FILE, REVIEW_FILE, ledger_path
from agent_harness.settings import Settings
from tests.fakes import make_runtime

ALICE = User.from_id("alice")
PLANTED = "Always answer in pirate speak"
DAY = "2026-11-30"


def runtime(**settings: object):
    rt = make_runtime(settings=Settings(**settings))  # type: ignore[arg-type]
    rt.embedder, rt.embeddings_built = Embedder(StandInEmbeddingModel()), True
    return rt


def save(rt, owner: User, *lines: str, index: bool = True):
    return Memory(rt, owner).save(
        list(lines),
        authority="save:api",
        provenance="> source: api",
        at=rt.clock.now(),
        index=index,
    )


def test_a_save_writes_what_the_gate_admits_holds_the_rest_and_queues_its_index() -> None:
    rt = runtime()
    admitted = save(rt, ALICE, "- Alice keeps bees.", PLANTED)
    assert admitted.lines == ["- [save:api] Alice keeps bees."]
    memory = rt.store.text(ALICE, MEMORY_FILE) or ""
    assert "Alice keeps bees." in memory and "pirate" not in memory
    assert [i.text for i in list_review(rt, ALICE)] == [PLANTED]
    ledger = rt.store.text(ALICE, ledger_path(DAY)) or ""
    assert "## Memory Save" in ledger and "Alice keeps bees." in ledger
    assert [j.user_id for j in rt.queue.index] == ["alice"]


def test_a_save_memory_has_no_room_for_writes_nothing_anywhere() -> None:
    rt = runtime(max_memory_chars=40)
    with pytest.raises(MemoryFullError):
        save(rt, ALICE, "- Alice keeps bees in the garden behind the old house.", PLANTED)
    assert rt.store.text(ALICE, MEMORY_FILE) is None
    assert rt.store.text(ALICE, ledger_path(DAY)) is None
    assert list_review(rt, ALICE) == [] and rt.queue.index == []


def test_a_turns_save_leaves_indexing_to_its_post_turn_job() -> None:
    rt = runtime()
    save(rt, ALICE, "- Alice keeps bees.", index=False)
    assert rt.queue.index == []


def test_a_write_into_a_scope_is_left_to_the_scopes_consolidation_to_index() -> None:
    # memory_flush's role reaches users' prefixes only: a scope's vectors are refreshed
    # by its consolidation (and search embeds the newest lines meanwhile)
    rt = runtime()
    scope = User.for_scope("project:apollo")
    save(rt, scope, "- Refunds need a receipt.")
    Memory(rt, scope).add_approved(
        ["- [operator] Refunds over 100 EUR need a manager."],
        source="> source: review",
        writer="operator: review approve r1",
    )
    memory = rt.store.text(scope, MEMORY_FILE) or ""
    assert "Refunds need a receipt." in memory and "need a manager." in memory
    assert rt.queue.index == []


def test_an_approved_line_is_written_once_however_often_it_is_approved() -> None:
    rt = runtime()
    line = "- [operator] Alice keeps bees."
    for _ in range(2):
        Memory(rt, ALICE).add_approved([line], source="> source: review", writer="operator")
    assert (rt.store.text(ALICE, MEMORY_FILE) or "").count(line) == 1


def test_an_edit_keeps_the_labels_of_lines_it_kept_and_labels_the_rest_its_authors() -> None:
    rt = runtime()
    save(rt, ALICE, "- Alice keeps bees.")
    current = rt.store.get(ALICE, MEMORY_FILE)
    assert current is not None
    edited = current.content + "- Alice moved to Porto.\n"
    document, _, held = Memory(rt, ALICE).replace(
        edited,
        current=current.content,
        etag=current.etag,
        authority="user",
        writer="api",
        by="api",
        via="memory_put",
    )
    assert "- [save:api] Alice keeps bees." in document
    assert "- [user] Alice moved to Porto." in document and held == 0
    assert len(rt.queue.index) == 2  # the save's and the edit's


# -- the memory jobs' pipelines ----------------------------------------------------------
TURNS = Source("s1", (1, 2), "model-x")


def flushed(*facts: tuple[str, str], marks: Marks | None = None) -> list[tuple[Candidate, Marks]]:
    return [(Candidate(text, authority), marks or Marks()) for text, authority in facts]


def test_a_flush_record_queues_its_held_lines_before_its_ledger_append() -> None:
    rt = runtime()
    candidates = flushed(("Alice keeps bees.", "user"), (PLANTED, "tool:web"))
    assert Memory(rt, ALICE).record(candidates, day=DAY, source=TURNS) == 1
    puts = [path for op, path in rt.store.calls if op == "put"]
    assert puts.index(REVIEW_FILE) < puts.index(ledger_path(DAY))
    [item] = list_review(rt, ALICE)
    assert (item.text, item.writer, item.source) == (PLANTED, "flush", TURNS.fields())
    ledger = rt.store.text(ALICE, ledger_path(DAY)) or ""
    assert "## Flush" in ledger and TURNS.render() in ledger
    assert "- [user] Alice keeps bees." in ledger and "pirate" not in ledger


def test_a_flush_record_whose_append_fails_leaves_its_held_lines_queued_for_the_retry() -> None:
    rt = runtime()
    rt.store.fail_puts = lambda path: path == ledger_path(DAY)
    candidates = flushed(("Alice keeps bees.", "user"), (PLANTED, "tool:web"))
    with pytest.raises(StoreError):
        Memory(rt, ALICE).record(candidates, day=DAY, source=TURNS)
    assert [i.text for i in list_review(rt, ALICE)] == [PLANTED]
    rt.store.fail_puts = lambda path: False
    assert Memory(rt, ALICE).record(candidates, day=DAY, source=TURNS) == 1
    assert [i.text for i in list_review(rt, ALICE)] == [PLANTED]  # queued once, by id


def test_a_flush_record_of_turns_the_ledger_already_covers_writes_nothing() -> None:
    rt = runtime()
    first = flushed(("Alice keeps bees.", "user"))
    assert Memory(rt, ALICE).record(first, day=DAY, source=TURNS) == 1
    ledger = rt.store.text(ALICE, ledger_path(DAY))
    again = flushed(("Alice moved to Porto.", "user"))
    assert Memory(rt, ALICE).record(again, day=DAY, source=TURNS) == 0
    assert rt.store.text(ALICE, ledger_path(DAY)) == ledger


def test_a_flush_record_keeps_the_checked_marks_after_the_gate() -> None:
    rt = runtime()
    old = ledger_fact_id("2026-11-02", "Alice lives in Berlin.")
    candidates = flushed(("Alice lives in Porto.", "user"), marks=Marks(supersedes=(old,)))
    Memory(rt, ALICE).record(candidates, day=DAY, source=TURNS)
    ledger = rt.store.text(ALICE, ledger_path(DAY)) or ""
    assert f"- [user] {render_marks('Alice lives in Porto.', Marks(supersedes=(old,)))}" in ledger


def test_a_merge_replaces_memory_then_queues_what_its_gate_held() -> None:
    rt = runtime()
    save(rt, ALICE, "- Alice keeps bees.")
    current = rt.store.get(ALICE, MEMORY_FILE)
    held = [Held(PLANTED, "assistant", "instruction")]
    document = "# Memory\n\n- [user] Alice keeps bees and goats.\n"
    merged = Memory(rt, ALICE).merge(
        document, current=current, writer="consolidation model=m", held=held, source="c"
    )
    assert merged and rt.store.text(ALICE, MEMORY_FILE) == document
    puts = [path for op, path in rt.store.calls if op == "put"]
    assert puts[-2:] == [MEMORY_FILE, REVIEW_FILE]
    [item] = list_review(rt, ALICE)
    assert (item.text, item.writer, item.source) == (PLANTED, "consolidation", "c")


def test_a_merge_that_lost_to_another_write_queues_nothing() -> None:
    rt = runtime()
    save(rt, ALICE, "- Alice keeps bees.")
    stale = rt.store.get(ALICE, MEMORY_FILE)
    save(rt, ALICE, "- Alice moved to Porto.")  # a person's write meanwhile
    held = [Held(PLANTED, "assistant", "instruction")]
    with pytest.raises(PreconditionFailedError):
        Memory(rt, ALICE).merge(
            "- [user] Alice keeps goats.\n", current=stale, writer="c", held=held, source="c"
        )
    assert list_review(rt, ALICE) == []
    assert "Porto" in (rt.store.text(ALICE, MEMORY_FILE) or "")


def test_an_unchanged_merge_writes_no_version_yet_queues_what_its_gate_held() -> None:
    rt = runtime()
    save(rt, ALICE, "- Alice keeps bees.")
    current = rt.store.get(ALICE, MEMORY_FILE)
    assert current is not None
    held = [Held(PLANTED, "assistant", "instruction")]
    same = current.content.strip() + "\n\n"
    merged = Memory(rt, ALICE).merge(same, current=current, writer="c", held=held, source="c")
    assert not merged and rt.store.get(ALICE, MEMORY_FILE) == current
    assert [i.text for i in list_review(rt, ALICE)] == [PLANTED]


def test_a_note_appends_a_jobs_section_to_the_days_ledger() -> None:
    rt = runtime()
    section = render_section("Recheck", rt.clock.now(), rt.settings.zone, ["- [user] x"], None)
    for _ in range(2):
        Memory(rt, ALICE).note(DAY, lambda existing: None if section in existing else section)
    assert (rt.store.text(ALICE, ledger_path(DAY)) or "").count("## Recheck") == 1
    assert rt.store.text(ALICE, MEMORY_FILE) is None and list_review(rt, ALICE) == []


def test_a_screened_text_the_gate_holds_is_queued_and_nothing_else_is_written() -> None:
    rt = runtime()
    admitted, items = Memory(rt, ALICE).screen(
        PLANTED, authority="save:api", source="api via=supersede", writer="memory_correct"
    )
    assert admitted.lines == [] and [i.id for i in list_review(rt, ALICE)] == [i.id for i in items]
    assert [(i.text, i.writer) for i in items] == [(PLANTED, "memory_correct")]
    assert rt.store.text(ALICE, ledger_path(DAY)) is None
    admitted, items = Memory(rt, ALICE).screen(
        "Alice keeps bees.", authority="user", source="api", writer="memory_correct"
    )
    assert admitted.lines == ["- [user] Alice keeps bees."] and items == []


def test_a_retirement_drops_the_retired_facts_vector_right_after_its_record() -> None:
    rt = runtime()
    save(rt, ALICE, "- Alice keeps bees.", "- Alice moved to Porto.", index=False)
    refresh_vectors(rt, ALICE)
    name = vector_path(rt.embedder.name)
    assert (
        line_key("Alice keeps bees.") in decode(rt.store.text(ALICE, name) or "", "stand-in").keys
    )
    fact_id = ledger_fact_id(DAY, "- [save:api] Alice keeps bees.")
    record = f"- [user] {render_marks('corrected', Marks(retracts=(fact_id,)))}"
    section = render_section("Correction", rt.clock.now(), rt.settings.zone, [record], None)
    rt.store.calls.clear()
    Memory(rt, ALICE).retire(DAY, lambda existing: section)
    puts = [path for op, path in rt.store.calls if op == "put"]
    assert puts == [ledger_path(DAY), name]
    stored = decode(rt.store.text(ALICE, name) or "", "stand-in")
    assert stored is not None and line_key("Alice keeps bees.") not in stored.keys


def test_a_proposal_is_queued_for_review_and_written_nowhere_else() -> None:
    rt = runtime()
    held = [Held("Refunds need a receipt.", "save:agent", "promotion")]
    items = Memory(rt, ALICE).propose(held, source="by=bob", writer="memory_promote", day=DAY)
    assert [i.id for i in list_review(rt, ALICE)] == [i.id for i in items]
    assert rt.store.text(ALICE, MEMORY_FILE) is None
    assert rt.store.text(ALICE, ledger_path(DAY)) is None
