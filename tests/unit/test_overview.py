"""What the operator console and CLI read about a user (agent_harness.overview), on the
in-memory fakes: the workspace at a glance, ledger sections against the consolidation
watermark, sessions, provenance down to the turn, versions with writers, the charts."""

from __future__ import annotations

import pytest

from agent_harness import overview
from agent_harness.agent.recall import preview_recall
from agent_harness.agent.turn import run_turn
from agent_harness.errors import InvalidRequestError, NotFoundError
from agent_harness.ids import User
from agent_harness.memory import files
from agent_harness.memory.jobs.consolidate import consolidate
from agent_harness.memory.jobs.flush import run_post_turn_job
from agent_harness.memory.jobs.schedule import forced_job
from agent_harness.settings import Settings
from tests.fakes import make_runtime

ANN = User.from_id("auth0|ann")


def drain(rt) -> None:
    while rt.queue.post_turn:
        run_post_turn_job(rt, rt.queue.post_turn.pop(0))


@pytest.fixture
def rt():
    rt = make_runtime()
    run_turn(rt, ANN, "s1", "Remember that I use vim.")
    drain(rt)
    consolidate(rt, forced_job(rt, ANN))
    rt.clock.advance(minutes=5)
    run_turn(rt, ANN, "s2", "Remember that my cat is called Miso.")
    drain(rt)
    return rt


def test_users_are_found_by_id_prefix_with_their_raw_ids(rt) -> None:
    files.put_memory(rt, User.from_id("bob"), "- x\n", if_match=None, if_none_match="*")
    assert [u.id for u in overview.find_users(rt, "auth0|")] == ["auth0|ann"]
    assert [u.id for u in overview.find_users(rt)] == ["auth0|ann", "bob"]
    assert overview.find_users(rt, "nobody") == []


def test_the_overview_counts_the_workspace_and_the_unmerged_ledger_bytes(rt) -> None:
    view = overview.user_overview(rt, ANN)
    assert view.exists and view.sessions == 2 and view.turns == 2
    assert view.memory_etag is not None and view.memory_bytes > 0
    ((done, size),) = view.watermarks.values()
    assert view.ledger_days == 1 and size == view.ledger_bytes
    assert 0 < done < size  # the second flush landed after the consolidation
    assert not overview.user_overview(rt, User.from_id("nobody")).exists


def test_a_ledger_day_is_cut_into_sections_marked_merged_up_to_the_watermark(rt) -> None:
    (day,) = overview.user_overview(rt, ANN).watermarks
    sections, consumed, size = overview.ledger_sections(rt, ANN, day)
    flushes = [s for s in sections if s.kind == "Flush"]
    assert [s.merged for s in flushes] == [True, False]
    assert flushes[0].end <= consumed < flushes[1].end == size
    assert flushes[0].source == "session=s1 turns=1 model=offline"
    assert any("vim" in text for _, text in flushes[0].lines)
    with pytest.raises(NotFoundError):
        overview.ledger_sections(rt, ANN, "2001-01-01")


def test_sessions_are_listed_most_recent_first(rt) -> None:
    assert [s.session_id for s in overview.list_sessions(rt, ANN)] == ["s2", "s1"]


def test_a_memory_line_leads_to_its_ledger_section_and_the_turn_that_said_it(rt) -> None:
    line = next(x for x in files.get_memory(rt, ANN).content.splitlines() if "vim" in x)
    (first, *_) = overview.line_origins(rt, ANN, line)
    assert first.session_id == "s1" and first.origin.section == "Flush"
    (turn,) = first.turns
    assert turn.turn == 1 and turn.messages[0].content == "Remember that I use vim."


def test_versions_name_their_writers_newest_first(rt) -> None:
    document = files.get_memory(rt, ANN)
    files.put_memory(
        rt,
        ANN,
        document.content + "- edited\n",
        if_match=document.etag,
        if_none_match=None,
        writer="console",
    )
    newest, oldest = overview.memory_versions(rt, ANN)
    assert newest.is_latest and newest.writer == "console"
    assert oldest.writer is not None and oldest.writer.startswith("consolidation")


def test_the_memory_size_chart_follows_versions_and_ledgers(rt) -> None:
    sizes = overview.memory_sizes(rt, ANN)
    assert [size for _, size in sizes["MEMORY.md"]] == [
        overview.user_overview(rt, ANN).memory_bytes
    ]
    assert sizes["ledgers"][-1][1] == overview.user_overview(rt, ANN).ledger_bytes


def test_the_recall_preview_is_what_a_first_turn_would_inject(rt) -> None:
    preview = preview_recall(rt, ANN, "what is my cat called, Miso?")
    assert not preview.off and preview.content and "Miso" in preview.content
    # memory lines, and past messages of the thread segments (on by default)
    assert all(source.startswith(("memory/", "index/threads/")) for source in preview.sources)
    assert any(source.startswith("memory/") for source in preview.sources)
    off = make_runtime(settings=Settings(recall_max_tokens=0))
    assert preview_recall(off, ANN, "anything").off


def test_a_user_prefix_with_a_slash_cannot_reach_past_the_users_root(rt) -> None:
    # the prefix is encoded like any id: "/" becomes %2F, never a path separator
    assert overview.find_users(rt, "../") == []
    with pytest.raises(InvalidRequestError):
        overview.find_users(rt, "x" * 300)


ARCHIVED = (
    "## Flush — 2026-08-01T09:00:00Z\n> source: session=s0 turns=1 model=offline\n- old fact\n"
)


def test_an_archived_day_is_listed_and_shown_all_merged(rt) -> None:
    rt.store.put(ANN, "memory/archive/2026-08-01.md", ARCHIVED)
    view = overview.user_overview(rt, ANN)
    assert view.archived == ("2026-08-01",) and view.archive_bytes == len(ARCHIVED.encode())
    sections, consumed, size = overview.ledger_sections(rt, ANN, "2026-08-01", archived=True)
    assert consumed == size and [s.merged for s in sections] == [True]
    with pytest.raises(NotFoundError):
        overview.ledger_sections(rt, ANN, "2026-08-01")  # not an active day
