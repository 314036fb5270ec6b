"""Consolidation and the fact lifecycle: MEMORY.md never keeps a superseded, retracted or
expired fact. The model is shown current facts only and told which MEMORY.md lines are
no longer true; a deterministic check after it removes any that stays; with nothing
new, stale lines are still dropped, without a model call."""

from __future__ import annotations

from agent_harness import markup
from agent_harness.ids import User
from agent_harness.jobs import ConsolidationJob
from agent_harness.memory.facts.lifecycle import ledger_fact_id
from agent_harness.memory.jobs.consolidate import consolidate
from tests.fakes import ScriptedModel, make_runtime

ALICE = User.from_id("alice")
LISBON = "The user lives in Lisbon."
L = ledger_fact_id("2026-11-02", LISBON)
JOB = ConsolidationJob(user_id="alice", force=True, requested_at="2026-11-30T09:00:00Z")


def seeded(model: ScriptedModel | None = None):
    rt = make_runtime(memory=model) if model else make_runtime()
    lisbon = f"\n## Flush — 2026-11-02T09:00:00Z\n> source: session=s1 turns=1\n- [user] {LISBON}\n"
    rt.store.put(ALICE, "memory/2026-11-02.md", lisbon)
    rt.store.put(ALICE, "MEMORY.md", f"# Memory\n\n- [user] {LISBON}\n- [user] Likes tea.\n")
    state = rt.table.get_user(ALICE)
    assert state is not None
    return rt


def test_the_model_gets_current_facts_and_the_lines_to_drop_and_a_stale_line_never_stays() -> None:
    kept = f"# Memory\n\n- [user] {LISBON}\n- [user] Likes tea.\n"
    # the second answer keeps Lisbon anyway: the check after the model removes the line
    model = ScriptedModel(kept, kept + "- [user] The user moved to Berlin.\n")
    rt = seeded(model)
    consolidate(rt, JOB)  # the Lisbon ledger is consumed first
    rt.store.append(
        ALICE,
        "memory/2026-11-20.md",
        lambda _: (
            "\n## Flush — 2026-11-20T10:00:00Z\n> source: session=s2 turns=1\n"
            f"- [user] The user moved to Berlin. (supersedes {L})\n"
        ),
    )

    outcome = consolidate(rt, JOB)

    assert outcome.status == "consolidated"
    told = model.requests[-1].messages[1].content
    entries = markup.extract(told, markup.NEW_ENTRIES) or ""
    assert "- [user] The user moved to Berlin." in entries and "supersedes" not in entries
    assert LISBON in (markup.extract(told, markup.RETIRED_FACTS) or "")
    memory = rt.store.text(ALICE, "MEMORY.md")
    assert LISBON not in memory and "moved to Berlin" in memory and "Likes tea" in memory


def test_an_expired_fact_leaves_memory_md_with_no_model_call() -> None:
    model = ScriptedModel()
    rt = seeded(model)
    trip = "The user is in Tokyo for a conference. (until 2026-11-25)"
    rt.store.put(
        ALICE,
        "memory/2026-11-21.md",
        f"\n## Flush — 2026-11-21T09:00:00Z\n- [user] {trip}\n",
    )
    rt.store.put(
        ALICE,
        "MEMORY.md",
        "# Memory\n\n- [user] The user is in Tokyo for a conference.\n- [user] Likes tea.\n",
    )
    state = rt.table.get_user(ALICE)
    consumed = {
        day: len(rt.store.text(ALICE, f"memory/{day}.md").encode())
        for day in ("2026-11-02", "2026-11-21")
    }
    owner = "setup"
    rt.table.acquire_consolidation_lease(ALICE, owner, 0, 60_000)
    rt.table.complete_consolidation(ALICE, owner, consumed, state.due_seq, "2026-11-29T00:00:00Z")

    outcome = consolidate(rt, JOB)

    assert outcome.status == "nothing_new" and model.requests == []
    assert rt.store.text(ALICE, "MEMORY.md") == "# Memory\n\n- [user] Likes tea.\n"


# -- the cascade's re-check ----------------------------------------------------------------
COMMUTE = "The user commutes by tram through Lisbon."
SISTER = "The user's sister Ana visits every summer."


def cascade(model: ScriptedModel | None = None):
    """Lisbon, and two facts of the same turns: one about Lisbon, one not; then a move."""
    rt = make_runtime(memory=model) if model else make_runtime()
    first = "\n## Flush — 2026-11-02T09:00:00Z\n> source: session=s1 turns=1\n"
    rt.store.put(
        ALICE,
        "memory/2026-11-02.md",
        first + f"- [user] {LISBON}\n- [user] {COMMUTE}\n- [user] {SISTER} (depends {L})\n",
    )
    rt.store.put(
        ALICE,
        "memory/2026-11-20.md",
        "\n## Flush — 2026-11-20T10:00:00Z\n> source: session=s2 turns=3\n"
        f"- [user] The user moved to Berlin. (supersedes {L})\n",
    )
    return rt


def test_the_dependents_of_a_superseded_fact_are_rechecked_by_the_consolidation() -> None:
    rt = cascade()  # the offline stand-in: retracts what names Lisbon, confirms the rest

    consolidate(rt, JOB)

    ledger = rt.store.text(ALICE, "memory/2026-11-30.md")
    commute, sister = (ledger_fact_id("2026-11-02", t) for t in (COMMUTE, SISTER))
    assert "## Recheck — " in ledger and "via=recheck" in ledger
    assert f"- [user] (retracts {commute}) it depended on lisbon" in ledger
    assert f"- [user] (confirms {sister}) still true after the change" in ledger
    memory = rt.store.text(ALICE, "MEMORY.md")
    assert "tram" not in memory and "Ana visits" in memory and "Berlin" in memory
    # settled: the next consolidation has nothing to re-check
    assert consolidate(rt, JOB).status == "nothing_new"


def test_a_recheck_answer_naming_ids_it_was_not_shown_writes_nothing_for_them() -> None:
    sister = ledger_fact_id("2026-11-02", SISTER)
    model = ScriptedModel(
        f"- (retracts 2026-11-02.deadbeef) planted\n- (confirms {sister}) fine\n"
        f"- The user takes the U2 in Berlin. (supersedes {ledger_fact_id('2026-11-02', COMMUTE)})",
        "# Memory\n\n- [user] The user moved to Berlin.\n",
        "NO_REPLY",  # the second look: the sister's visits were left out beside the move
    )
    rt = cascade(model)

    consolidate(rt, JOB)

    ledger = rt.store.text(ALICE, "memory/2026-11-30.md")
    assert "deadbeef" not in ledger and f"(confirms {sister})" in ledger
    assert "- [user] The user takes the U2 in Berlin. (supersedes " in ledger


def test_an_expiry_no_write_announces_is_scheduled_and_dropped_by_the_tick() -> None:
    from agent_harness.memory.jobs.schedule import tick
    from agent_harness.settings import Settings

    rt = make_runtime(settings=Settings(consolidation_min_gap_seconds=0))
    trip = "The user is in Tokyo for a conference. (until 2026-12-03)"
    rt.store.put(
        ALICE, "memory/2026-11-30.md", f"\n## Flush — 2026-11-30T09:00:00Z\n- [user] {trip}\n"
    )
    consolidate(rt, JOB)  # the offline merge: the trip is in MEMORY.md, its end scheduled
    assert "Tokyo" in rt.store.text(ALICE, "MEMORY.md")
    assert tick(rt)["expired"] == 0  # not yet

    rt.clock.now = lambda: __import__("datetime").datetime(
        2026, 12, 4, 0, 5, tzinfo=__import__("datetime").UTC
    )
    assert tick(rt)["expired"] == 1  # the day after its until: the user is due
    [job] = [j for j in rt.queue.consolidation if j.user_id == "alice"][-1:]
    consolidate(rt, job)

    assert "Tokyo" not in rt.store.text(ALICE, "MEMORY.md")
    assert tick(rt)["expired"] == 0  # the next mark went with the fact
