from __future__ import annotations

from datetime import timedelta

import pytest

from agent_harness import markup
from agent_harness.ids import User
from agent_harness.jobs import ConsolidationJob
from agent_harness.memory.jobs.consolidate import consolidate
from agent_harness.memory.jobs.schedule import fan_out, request_consolidation, retry_after
from agent_harness.settings import Settings
from tests.fakes import ScriptedModel, failing, make_runtime, untagged

ALICE = User.from_id("alice")


def job(force: bool = False, user: str = "alice") -> ConsolidationJob:
    return ConsolidationJob(user_id=user, force=force, requested_at="2026-11-30T09:00:00Z")


def append(rt, day: str, text: str) -> None:
    rt.store.append(ALICE, f"memory/{day}.md", lambda existing: text)


def memory(rt) -> str | None:
    return rt.store.text(ALICE, "MEMORY.md")


def entries_of(request) -> str:
    return markup.extract(request.messages[1].content, markup.NEW_ENTRIES)


def test_new_ledger_content_is_merged_into_memory() -> None:
    rt = make_runtime()  # offline merge
    append(rt, "2026-11-30", "\n## Flush — t\n- User said: I prefer tea.\n")

    outcome = consolidate(rt, job())

    assert outcome.status == "consolidated" and outcome.days == ["2026-11-30"]
    assert memory(rt) == "# Memory\n\n- User said: I prefer tea.\n"
    state = rt.table.get_user(ALICE)
    assert state.consumed == {
        "2026-11-30": len("\n## Flush — t\n- User said: I prefer tea.\n".encode())
    }
    assert state.last_consolidated_at == "2026-11-30T09:00:00Z"


def test_nothing_new_means_no_model_call_and_no_write() -> None:
    model = ScriptedModel("# Memory\n- x")
    rt = make_runtime(memory=model)
    assert consolidate(rt, job()).status == "nothing_new"
    append(rt, "2026-11-30", "- a\n")
    consolidate(rt, job())
    versions = len(rt.store.list_versions(ALICE, "MEMORY.md"))

    assert consolidate(rt, job()).status == "nothing_new"
    assert len(model.requests) == 1
    assert len(rt.store.list_versions(ALICE, "MEMORY.md")) == versions


def test_only_content_past_the_watermark_is_sent() -> None:
    # the second merge leaves "new fact" out beside a later day's: the second look asks
    model = ScriptedModel("# Memory\n- old", "# Memory\n- old\n- new", "NO_REPLY")
    rt = make_runtime(memory=model)
    append(rt, "2026-11-30", "- old fact\n")
    consolidate(rt, job())
    append(rt, "2026-11-30", "- new fact\n")
    append(rt, "2026-12-01", "- next day fact\n")

    consolidate(rt, job())

    sent = entries_of(model.requests[1])
    assert "new fact" in sent and "next day fact" in sent and "old fact" not in sent
    assert sent.index("### 2026-11-30") < sent.index("### 2026-12-01")
    assert (
        "- old\n"
        in markup.extract(model.requests[1].messages[1].content, markup.CURRENT_MEMORY) + "\n"
    )


def test_an_append_landing_during_the_run_is_consolidated_next_time() -> None:
    def merge_while_a_flush_appends(request):
        append(rt, "2026-11-30", "- arrived during the run\n")
        return "# Memory\n- first\n"

    merged = "# Memory\n- first\n- arrived during the run\n"
    model = ScriptedModel(merge_while_a_flush_appends, merged)
    rt = make_runtime(memory=model)
    append(rt, "2026-11-30", "- first\n")

    consolidate(rt, job())
    assert rt.table.get_user(ALICE).consumed["2026-11-30"] == len(b"- first\n")
    consolidate(rt, job())

    assert entries_of(model.requests[1]).endswith("- arrived during the run")
    assert untagged(memory(rt)) == merged


def test_a_human_edit_made_meanwhile_is_not_overwritten() -> None:
    def merge_while_a_person_edits(request):
        current = rt.store.get(ALICE, "MEMORY.md")
        rt.store.put(ALICE, "MEMORY.md", "# Memory\n- edited by hand\n", if_match=current.etag)
        return "# Memory\n- new fact\n"  # merged onto the version it read

    def merge_onto_the_edit(request):
        assert "edited by hand" in request.messages[1].content
        return "# Memory\n- edited by hand\n- new fact\n"

    model = ScriptedModel(merge_while_a_person_edits, merge_onto_the_edit)
    rt = make_runtime(memory=model)
    rt.store.put(ALICE, "MEMORY.md", "# Memory\n", create_only=True)
    append(rt, "2026-11-30", "- new fact\n")

    consolidate(rt, job())

    assert memory(rt) == "# Memory\n- edited by hand\n- new fact\n"
    assert len(model.requests) == 2


def test_a_failed_model_call_changes_nothing_and_the_queue_retries() -> None:
    rt = make_runtime(memory=ScriptedModel(failing()))
    rt.store.put(ALICE, "MEMORY.md", "# Memory\n- keep me\n", create_only=True)
    append(rt, "2026-11-30", "- fact\n")

    with pytest.raises(type(failing())):
        consolidate(rt, job())

    assert memory(rt) == "# Memory\n- keep me\n"
    assert rt.table.get_user(ALICE).consumed == {}
    assert rt.table.users[ALICE.key].cons_owner is None  # lease released
    rt.models = make_runtime().models  # a healthy model: the retry succeeds
    assert consolidate(rt, job()).status == "consolidated"


@pytest.mark.parametrize("bad", ["   ", "NO_REPLY", "I merged them."])
def test_a_malformed_answer_twice_changes_nothing_and_is_kept_as_the_users_failure(
    bad: str,
) -> None:
    model = ScriptedModel(bad, bad)
    rt = make_runtime(memory=model)
    rt.store.put(ALICE, "MEMORY.md", "# Memory\n- keep me\n", create_only=True)
    append(rt, "2026-11-30", "- fact\n")

    outcome = consolidate(rt, job())

    assert outcome.status == "failed" and "after a corrective call" in (outcome.error or "")
    assert len(model.requests) == 2  # one corrective call, no blind retry
    assert memory(rt) == "# Memory\n- keep me\n"
    state = rt.table.get_user(ALICE)
    assert state.consumed == {} and state.failures == 1 and state.last_error == outcome.error
    assert state.retry_at is not None and state.retry_at > state.failed_at  # a backoff
    assert rt.table.users[ALICE.key].cons_owner is None  # lease released
    rt.models = make_runtime().models  # a healthy model: the next run succeeds
    assert consolidate(rt, job()).status == "consolidated"
    state = rt.table.get_user(ALICE)
    assert state.failures == 0 and state.last_error is None and state.retry_at is None


def test_two_concurrent_consolidations_produce_one_write() -> None:
    def second_run_starts_meanwhile(request):
        assert consolidate(rt, job()).status == "busy"
        return "# Memory\n- fact\n"

    rt = make_runtime(memory=ScriptedModel(second_run_starts_meanwhile))
    append(rt, "2026-11-30", "- fact\n")
    consolidate(rt, job())
    assert len(rt.store.list_versions(ALICE, "MEMORY.md")) == 1


def test_the_minimum_gap_spaces_automatic_runs_but_not_forced_ones() -> None:
    rt = make_runtime(settings=Settings(consolidation_min_gap_seconds=1800))
    append(rt, "2026-11-30", "- one\n")
    assert consolidate(rt, job()).status == "consolidated"
    append(rt, "2026-11-30", "- two\n")
    rt.clock.advance(minutes=10)
    assert consolidate(rt, job()).status == "too_soon"
    assert consolidate(rt, job(force=True)).status == "consolidated"


def test_the_due_mark_survives_a_flush_during_the_run() -> None:
    def flush_marks_due_meanwhile(request):
        rt.table.mark_consolidation_due(ALICE, "2026-11-30T09:00:01Z", 16)
        return "# Memory\n- a\n"

    rt = make_runtime(memory=ScriptedModel(flush_marks_due_meanwhile, "# Memory\n- a\n- b\n"))
    rt.table.mark_consolidation_due(ALICE, "2026-11-30T09:00:00Z", 16)
    append(rt, "2026-11-30", "- a\n")
    consolidate(rt, job())
    assert rt.table.get_user(ALICE).is_due
    append(rt, "2026-11-30", "- b\n")
    consolidate(rt, job())
    assert not rt.table.get_user(ALICE).is_due


def test_a_blank_memory_with_an_old_watermark_is_rebuilt_from_recent_ledgers() -> None:
    # the first merge leaves 27 days' facts out: the second look asks (nothing ended)
    rebuilt = "# Memory\n- fact of day 28 " + "x" * 60 + "\n"
    model = ScriptedModel("# Memory\n- fact of day 1\n", "NO_REPLY", rebuilt, "NO_REPLY")
    rt = make_runtime(
        memory=model,
        settings=Settings(consolidation_max_input_bytes=1000, consolidation_min_gap_seconds=0),
    )
    for day in range(1, 29):
        append(rt, f"2026-11-{day:02d}", f"- fact of day {day} " + "x" * 60 + "\n")
    consolidate(rt, job())
    rt.store.put(ALICE, "MEMORY.md", "", if_match=rt.store.get(ALICE, "MEMORY.md").etag)

    consolidate(rt, job())

    rebuild = model.requests[2].messages[1].content
    assert "rebuild" in rebuild
    sent = entries_of(model.requests[2])
    assert "day 28" in sent and "day 1 " not in sent  # the newest days, within the budget
    assert len(sent.encode()) <= 1000 + 28 * 20
    assert untagged(memory(rt)) == rebuilt  # from the recent ledgers it was given


def test_input_over_the_byte_budget_is_carried_to_the_next_run() -> None:
    model = ScriptedModel("# Memory\n- 1\n", "# Memory\n- 1\n- 2\n")
    rt = make_runtime(
        memory=model,
        settings=Settings(consolidation_max_input_bytes=1000, consolidation_min_gap_seconds=0),
    )
    append(rt, "2026-11-29", "- " + "a" * 900 + "\n")
    append(rt, "2026-11-30", "- " + "b" * 900 + "\n")

    consolidate(rt, job())
    assert "b" * 900 not in entries_of(model.requests[0])
    consolidate(rt, job())
    assert "b" * 900 in entries_of(model.requests[1])
    assert "a" * 900 not in entries_of(model.requests[1])


def test_fan_out_queues_each_due_user_once_and_respects_the_gap() -> None:
    rt = make_runtime(settings=Settings(consolidation_min_gap_seconds=600, due_shards=4))
    bob = User.from_id("auth0|bob")
    for user in (ALICE, bob):
        rt.table.mark_consolidation_due(user, "2026-11-30T08:00:00Z", 4)
    rt.table.users[bob.key].state = rt.table.users[bob.key].state.__class__(
        due_seq=1, is_due=True, last_consolidated_at="2026-11-30T08:59:00Z"
    )

    assert fan_out(rt) == 1
    assert [j.user_id for j in rt.queue.consolidation] == ["alice"]
    assert not rt.queue.consolidation[0].force


def test_a_failing_consolidation_is_retried_by_the_schedule_after_a_doubling_backoff() -> None:
    echo = "<current_memory>\n</current_memory>"
    rt = make_runtime(memory=ScriptedModel(echo, echo, echo, echo))
    append(rt, "2026-11-30", "- a fact\n")
    rt.table.mark_consolidation_due(ALICE, "2026-11-30T08:00:00Z", 1)

    assert consolidate(rt, job()).status == "failed"
    assert fan_out(rt) == 0  # within the backoff: not queued again
    rt.clock.advance(minutes=16)
    assert fan_out(rt) == 1
    assert consolidate(rt, job()).status == "failed"
    state = rt.table.get_user(ALICE)
    assert state.failures == 2
    assert retry_after(1) == timedelta(minutes=15) and retry_after(2) == timedelta(minutes=30)
    assert retry_after(20) == timedelta(days=1)
    rt.clock.advance(minutes=16)
    assert fan_out(rt) == 0  # the second failure waits 30 minutes, not 15
    rt.clock.advance(minutes=15)
    assert fan_out(rt) == 1


def test_a_requested_consolidation_is_forced() -> None:
    rt = make_runtime()
    request_consolidation(rt, ALICE)
    assert [(j.user_id, j.force) for j in rt.queue.consolidation] == [("alice", True)]


def test_a_large_hand_written_memory_can_still_be_consolidated() -> None:
    big = "# Memory\n" + "".join(f"- hand-written fact {i}\n" for i in range(2000))
    rt = make_runtime(
        settings=Settings(consolidation_max_tokens=500, consolidation_min_gap_seconds=0)
    )
    rt.store.put(ALICE, "MEMORY.md", big, create_only=True)
    append(rt, "2026-11-30", "- a new fact\n")
    assert consolidate(rt, job()).status == "consolidated"
    assert memory(rt).endswith("- a new fact\n")


def test_a_runaway_answer_is_rejected() -> None:
    runaway = "# Memory\n" + "".join(f"- x{n}\n" for n in range(10_000))  # 60k chars
    rt = make_runtime(memory=ScriptedModel(runaway, runaway))
    append(rt, "2026-11-30", "- a fact\n")
    outcome = consolidate(rt, job())
    assert outcome.status == "failed" and "over the" in (outcome.error or "")
    assert memory(rt) is None


def test_repeated_lines_of_an_answer_are_written_once() -> None:
    rt = make_runtime(memory=ScriptedModel("# Memory\n" + "- a fact\n" * 50))
    append(rt, "2026-11-30", "- a fact\n")
    consolidate(rt, job())
    assert memory(rt) == "# Memory\n- a fact\n"


# --- retention: the archive ---


def test_retention_archives_consolidated_ledgers_strictly_older_than_the_cutoff() -> None:
    """Retention 90 on 2026-11-30: the cutoff is 2026-09-01; 2026-08-31 moves, 09-01 stays."""
    rt = make_runtime()
    for day in ("2026-08-30", "2026-08-31", "2026-09-01", "2026-11-30"):
        append(rt, day, f"\n## Flush — {day}\n- fact of {day}\n")

    outcome = consolidate(rt, job())

    assert outcome.archived == ["2026-08-30", "2026-08-31"]
    days = [i.path for i in rt.store.list(ALICE, "memory")]
    assert days == [
        "memory/2026-09-01.md",
        "memory/2026-11-30.md",
        "memory/archive/2026-08-30.md",
        "memory/archive/2026-08-31.md",
    ]
    assert "- fact of 2026-08-31" in rt.store.text(ALICE, "memory/archive/2026-08-31.md")
    assert set(rt.table.get_user(ALICE).consumed) == {"2026-09-01", "2026-11-30"}
    # archived facts stay searchable
    from agent_harness.memory.search import search_memory

    hits = search_memory(rt, ALICE, "fact of 2026-08-31", "phrase", 10, rt.search_cache)
    assert [h.path for h in hits] == ["MEMORY.md", "memory/archive/2026-08-31.md"]


def test_an_old_day_is_archived_only_after_it_is_consolidated() -> None:
    settings = Settings(consolidation_max_input_bytes=1000, consolidation_min_gap_seconds=0)
    rt = make_runtime(settings=settings)
    append(rt, "2026-01-01", "- imported old fact\n" + "- filler\n" * 200)  # over budget
    append(rt, "2026-11-30", "- today\n")
    first = consolidate(rt, job())
    assert first.archived == [] and rt.store.text(ALICE, "memory/2026-01-01.md")
    while rt.store.text(ALICE, "memory/2026-01-01.md") is not None:
        consolidate(rt, job())
    assert "imported old fact" in memory(rt)
    archived = rt.store.text(ALICE, "memory/archive/2026-01-01.md")
    assert archived.count("- imported old fact") == 1 and archived.count("- filler") == 200


def test_an_interrupted_move_is_finished_without_duplicating_the_archive() -> None:
    rt = make_runtime()
    append(rt, "2026-01-01", "\n## Flush — a\n- old fact\n")
    consolidate(rt, job())  # merged (and archived)
    archived = rt.store.text(ALICE, "memory/archive/2026-01-01.md")
    # replay a crash: the ledger is back (copied, not yet deleted) plus a late append
    append(rt, "2026-01-01", "\n## Flush — a\n- old fact\n")
    rt.table.users[ALICE.key].state = rt.table.get_user(ALICE).__class__(
        consumed={"2026-01-01": len(b"\n## Flush - a\n- old fact\n") + 2}
    )
    append(rt, "2026-01-01", "\n## Flush — b\n- late fact\n")
    consolidate(rt, job(force=True))
    text = rt.store.text(ALICE, "memory/archive/2026-01-01.md")
    assert text == archived + "\n## Flush — b\n- late fact\n"
    assert rt.store.text(ALICE, "memory/2026-01-01.md") is None


def test_a_ledger_that_changes_while_archiving_stays_and_moves_next_time() -> None:
    rt = make_runtime()
    append(rt, "2026-01-01", "\n## Flush — a\n- old fact\n")
    real_append = rt.store.append

    def append_then_flush_lands(user, path, build):
        etag = real_append(user, path, build)
        if path.startswith("memory/archive/"):
            rt.store.append = real_append
            append(rt, "2026-01-01", "\n## Flush — b\n- landed meanwhile\n")
        return etag

    rt.store.append = append_then_flush_lands
    assert consolidate(rt, job()).archived == []
    assert "landed meanwhile" in rt.store.text(ALICE, "memory/2026-01-01.md")
    consolidate(rt, job(force=True))
    text = rt.store.text(ALICE, "memory/archive/2026-01-01.md")
    assert text.count("- old fact") == 1 and text.count("- landed meanwhile") == 1
    assert rt.store.text(ALICE, "memory/2026-01-01.md") is None


def test_a_custom_consolidation_prompt_is_used() -> None:
    model = ScriptedModel("# Memory\n- tea\n")
    prompt = "Curate 100% faithfully in {max_tokens} tokens ({max_chars} chars)."
    settings = Settings(consolidation_prompt=prompt, consolidation_max_tokens=50)
    rt = make_runtime(memory=model, settings=settings)
    append(rt, "2026-11-30", "- tea\n")
    consolidate(rt, job())
    assert model.requests[0].messages[0].content == (
        "Curate 100% faithfully in 50 tokens (200 chars)."
    )


def consolidated_twice():
    """MEMORY.md written twice by consolidation: "- first", then "- second"."""
    # the second merge leaves "first" out: the second look asks, and it is still true
    answers = ("# Memory\n- first\n", "# Memory\n- second\n", "NO_REPLY")
    rt = make_runtime(memory=ScriptedModel(*answers))
    append(rt, "2026-11-30", "- first\n")
    consolidate(rt, job())
    append(rt, "2026-11-30", "- second\n")
    consolidate(rt, job(force=True))
    return rt


def test_rollback_restores_an_older_memory_as_a_new_version() -> None:
    from agent_harness.memory.files import list_memory_versions, rollback_memory

    rt = consolidated_twice()
    versions = list_memory_versions(rt, ALICE)
    assert [v.is_latest for v in versions] == [True, False]

    rollback_memory(rt, ALICE, versions[1].version_id)

    assert memory(rt) == "# Memory\n- first\n"
    assert len(list_memory_versions(rt, ALICE)) == 3


def writers(rt) -> list[str | None]:
    """The writer of every MEMORY.md version, newest first."""
    found = []
    for info in rt.store.list_versions(ALICE, "MEMORY.md"):
        version = rt.store.get_version(ALICE, "MEMORY.md", info.version_id)
        found.append(version.writer)
    return found


def test_a_consolidated_memory_version_names_the_consolidation_and_its_model() -> None:
    rt = make_runtime(memory=ScriptedModel("# Memory\n- tea\n", name="scripted:memory"))
    append(rt, "2026-11-30", "- tea\n")
    consolidate(rt, job())

    got = rt.store.get(ALICE, "MEMORY.md")
    assert got.writer == "consolidation model=scripted:memory"
    assert writers(rt) == ["consolidation model=scripted:memory"]


def test_a_merge_onto_a_human_edit_names_each_writer() -> None:
    from agent_harness.memory.files import put_memory

    def merge_while_a_person_edits(request):
        current = rt.store.get(ALICE, "MEMORY.md")
        put_memory(
            rt, ALICE, "# Memory\n- edited by hand\n", if_match=current.etag, if_none_match=None
        )
        return "# Memory\n- new\n"  # merged onto the version it read

    model = ScriptedModel(merge_while_a_person_edits, "# Memory\n- edited by hand\n- new\n")
    rt = make_runtime(memory=model)
    put_memory(rt, ALICE, "# Memory\n", if_match=None, if_none_match="*", writer="console")
    append(rt, "2026-11-30", "- new\n")
    consolidate(rt, job())

    assert writers(rt) == ["consolidation model=scripted:test", "api", "console"]


def test_a_rollback_names_its_writer_and_the_restored_version() -> None:
    from agent_harness.memory.files import rollback_memory

    rt = consolidated_twice()
    first = rt.store.list_versions(ALICE, "MEMORY.md")[-1].version_id

    rollback_memory(rt, ALICE, first)
    assert rt.store.get(ALICE, "MEMORY.md").writer == f"api: rollback to {first}"
    rollback_memory(rt, ALICE, first, writer="console alice@ops")
    assert rt.store.get(ALICE, "MEMORY.md").writer == f"console alice@ops: rollback to {first}"
    assert writers(rt)[2:] == ["consolidation model=scripted:test"] * 2


def test_a_memory_save_names_where_it_came_from() -> None:
    from agent_harness.memory.files import save_facts

    rt = make_runtime()
    save_facts(rt, ALICE, "- likes tea", timestamp=None, source=None, origin="mcp")
    assert rt.store.get(ALICE, "MEMORY.md").writer == "mcp: memory_save"


def test_a_consolidation_never_writes_memory_md_over_its_cap() -> None:
    model = ScriptedModel("# Memory\n\n- " + "x" * 3000, "# Memory\n\n- User said: I prefer tea.")
    rt = make_runtime(settings=Settings(max_memory_chars=2000), memory=model)
    append(rt, "2026-11-30", "\n## Flush — t\n- User said: I prefer tea.\n")

    assert consolidate(rt, job()).status == "consolidated"  # the corrected answer fits
    assert "over the 2000 limit" in model.requests[1].messages[-1].content
    assert len(memory(rt)) <= 2000
