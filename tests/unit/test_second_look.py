"""The consolidation's second look: a change the flush was not shown the old fact for
(worded unlike it, in a crowded memory) is caught when the merge leaves the old line out
of MEMORY.md; the memory model judges it beside the new facts, the retraction lands on
the change's day (so ``as_of`` that day sees it), and its cascade is re-checked at once."""

from __future__ import annotations

from agent_harness import markup
from agent_harness.errors import ModelUnavailableError
from agent_harness.ids import User
from agent_harness.jobs import ConsolidationJob
from agent_harness.memory.facts.lifecycle import ledger_fact_id, lifecycle_of
from agent_harness.memory.jobs.consolidate import consolidate
from tests.fakes import ScriptedModel, make_runtime

ALICE = User.from_id("alice")
JOB = ConsolidationJob(user_id="alice", force=True, requested_at="2026-11-30T09:00:00Z")
GALAXY = "The user's phone is a Galaxy S23."
CASE = "The user keeps the Galaxy S23 in a red case."
TEA = "The user likes green tea."
PIXEL = "The user treated themselves to a Pixel 8."
G, C, T = (ledger_fact_id("2026-11-02", t) for t in (GALAXY, CASE, TEA))
P = ledger_fact_id("2026-11-20", PIXEL)
MERGED = f"# Memory\n\n- [user] {TEA}\n- [user] {PIXEL}\n"  # the Galaxy line left out


def crowded(model: ScriptedModel, new_fact: str = f"- [user] {PIXEL}"):
    """MEMORY.md holds the phone; the flush that wrote the Pixel marked nothing."""
    rt = make_runtime(memory=model)
    first = "\n## Flush — 2026-11-02T09:00:00Z\n> source: session=s1 turns=1\n"
    rt.store.put(
        ALICE,
        "memory/2026-11-02.md",
        first + f"- [user] {GALAXY}\n- [user] {CASE}\n- [user] {TEA}\n",
    )
    rt.store.put(ALICE, "MEMORY.md", f"# Memory\n\n- [user] {GALAXY}\n- [user] {TEA}\n")
    state = rt.table.get_user(ALICE)
    consumed = {"2026-11-02": len(rt.store.text(ALICE, "memory/2026-11-02.md").encode())}
    rt.table.acquire_consolidation_lease(ALICE, "setup", 0, 60_000)
    rt.table.complete_consolidation(
        ALICE, "setup", consumed, state.due_seq if state else 0, "2026-11-10T00:00:00Z"
    )
    rt.store.put(
        ALICE,
        "memory/2026-11-20.md",
        f"\n## Flush — 2026-11-20T10:00:00Z\n> source: session=s2 turns=4\n{new_fact}\n",
    )
    return rt


def ledgers(rt) -> dict[str, str]:
    return {d: rt.store.text(ALICE, f"memory/{d}.md") for d in ("2026-11-02", "2026-11-20")}


def test_a_left_out_line_a_new_fact_ended_is_retracted_on_the_changes_day() -> None:
    model = ScriptedModel(
        MERGED,
        f"- (retracts {G}) {P}",
        f"- (retracts {C}) the phone it was about is gone",  # the cascade's re-check
    )
    rt = crowded(model)

    outcome = consolidate(rt, JOB)

    assert outcome.status == "consolidated"
    asked = model.requests[1].messages[1].content
    assert f"[{G}] {GALAXY}" in (markup.extract(asked, markup.LEFT_OUT_FACTS) or "")
    assert f"[{P}] {PIXEL}" in (markup.extract(asked, markup.NEW_FACTS) or "")
    assert TEA not in (markup.extract(asked, markup.LEFT_OUT_FACTS) or "")  # kept: not asked
    day = rt.store.text(ALICE, "memory/2026-11-20.md")
    assert "## Second look — " in day and "via=second-look" in day
    assert f"- [user] (retracts {G}) {PIXEL}" in day
    # valid on the change's day, not before it
    assert lifecycle_of(ledgers(rt), "2026-11-20").status[G].state == "retracted"
    assert lifecycle_of(ledgers(rt), "2026-11-19").status[G].state == "current"
    # the cascade went in the same run: the case's re-check is in today's ledger
    assert f"(retracts {C})" in rt.store.text(ALICE, "memory/2026-11-30.md")
    assert len(model.requests) == 3
    assert rt.store.text(ALICE, "MEMORY.md") == MERGED


def test_a_tools_new_fact_never_retires_what_the_user_said() -> None:
    model = ScriptedModel(MERGED.replace("[user] The user treated", "[tool:web] The user treated"))
    rt = crowded(model, f"- [tool:web] {PIXEL}")

    consolidate(rt, JOB)

    assert len(model.requests) == 1  # no new fact may retire the phone: nobody is asked
    assert "Second look" not in rt.store.text(ALICE, "memory/2026-11-20.md")
    assert lifecycle_of(ledgers(rt)).status[G].state == "current"


def test_answers_naming_facts_not_shown_or_no_cause_and_confirmations_write_nothing() -> None:
    model = ScriptedModel(
        MERGED,
        f"- (retracts 2026-11-02.deadbeef) {P}\n"  # not shown
        f"- (retracts {T}) {P}\n"  # not left out: the merge kept it
        f"- (retracts {G}) the user said so\n"  # no new fact named as the cause
        f"- (confirms {G}) only shortened",
    )
    rt = crowded(model)

    assert consolidate(rt, JOB).status == "consolidated"

    assert "Second look" not in rt.store.text(ALICE, "memory/2026-11-20.md")
    life = lifecycle_of(ledgers(rt))
    assert life.status[G].state == "current" and life.status[T].state == "current"


def test_a_failed_second_look_leaves_the_merge_written_and_no_record() -> None:
    model = ScriptedModel(MERGED, ModelUnavailableError("provider down"))
    rt = crowded(model)

    assert consolidate(rt, JOB).status == "consolidated"

    # the merge is written; the user's own line came back (precedence: no new fact of
    # theirs shares its words) and stays while the fact is current
    assert rt.store.text(ALICE, "MEMORY.md") == MERGED + f"- [user] {GALAXY}\n"
    assert "Second look" not in rt.store.text(ALICE, "memory/2026-11-20.md")
    assert lifecycle_of(ledgers(rt)).status[G].state == "current"


def test_the_offline_stand_in_confirms_every_left_out_fact() -> None:
    from agent_harness.memory.facts.lifecycle import LedgerFact, Marks
    from agent_harness.memory.jobs.second_look import second_look_messages
    from agent_harness.models.offline_marks import second_look_answer

    def fact(fid: str, day: str, text: str) -> LedgerFact:
        return LedgerFact(fid, day, 1, text, "user", day, Marks())

    messages = second_look_messages([fact(G, "2026-11-02", GALAXY)], [fact(P, "2026-11-20", PIXEL)])
    prompt = messages[1].content
    assert second_look_answer(prompt) == f"- (confirms {G}) kept"
    assert second_look_answer("no such block") is None
