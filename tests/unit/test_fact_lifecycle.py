"""The fact lifecycle read from the ledgers (memory.facts.lifecycle): ids, marks, what
supersedes, retracts and expires what, the authority rule, as-of days, and the facts a
retired one takes with it for a re-check."""

from __future__ import annotations

from agent_harness.memory.facts.lifecycle import (
    Marks,
    ledger_fact_id,
    lifecycle_of,
    render_marks,
    split_marks,
    strip_marks,
)

LISBON = "The user lives in Lisbon."
L = ledger_fact_id("2026-11-02", LISBON)


def section(time: str, *lines: str, turns: str = "session=s1 turns=1-2") -> str:
    return "\n".join(["", f"## Flush — {time}", f"> source: {turns}", *lines, ""])


def test_an_id_is_the_day_and_the_words_whatever_the_tag_marks_case_and_spacing() -> None:
    assert L.startswith("2026-11-02.") and len(L) == len("2026-11-02.") + 8
    assert ledger_fact_id("2026-11-02", "[user]   the user LIVES in lisbon.  ") == L
    assert ledger_fact_id("2026-11-02", f"{LISBON} (until 2027-01-01)") == L
    assert ledger_fact_id("2026-11-02", f"- [user] {LISBON}") == L
    assert ledger_fact_id("2026-11-03", LISBON) != L


def test_marks_split_from_the_text_and_render_back() -> None:
    text, marks = split_marks(f"The user moved to Berlin. (supersedes {L}) (until 2027-05-01)")
    assert text == "The user moved to Berlin."
    assert marks == Marks(supersedes=(L,), until="2027-05-01")
    assert (
        render_marks(text, marks)
        == f"The user moved to Berlin. (supersedes {L}) (until 2027-05-01)"
    )
    text, marks = split_marks(f"(retracts {L}, 2026-11-05.0000abcd) sold the flat")
    assert (text, marks.retracts) == ("sold the flat", (L, "2026-11-05.0000abcd"))
    assert strip_marks(f"x (supersedes {L})") == "x"
    # prose in parentheses is text, not a mark
    assert split_marks("The user likes tea (green).")[0] == "The user likes tea (green)."


def test_a_later_fact_supersedes_an_earlier_one_and_history_tells_the_story() -> None:
    ledgers = {
        "2026-11-02": section("2026-11-02T09:00:00Z", f"- [user] {LISBON}"),
        "2026-11-20": section(
            "2026-11-20T10:00:00Z", f"- [user] The user moved to Berlin. (supersedes {L})"
        ),
    }
    life = lifecycle_of(ledgers)
    berlin = ledger_fact_id("2026-11-20", "The user moved to Berlin.")

    assert life.status[L].state == "superseded" and life.status[L].by == berlin
    assert life.status[L].at == "2026-11-20T10:00:00Z"
    assert life.current(berlin) and not life.current(L)
    assert [f.id for f in life.history(L)] == [L, berlin] == [f.id for f in life.history(berlin)]
    # as of a day before the move, Lisbon was current and Berlin unknown
    before = lifecycle_of(ledgers, on="2026-11-10")
    assert before.current(L) and berlin not in before.facts


def test_a_retraction_retires_with_nothing_in_its_place_and_states_no_fact() -> None:
    cycles = ledger_fact_id("2026-11-02", "The user cycles to work.")
    ledgers = {
        "2026-11-02": section("2026-11-02T09:00:00Z", "- [user] The user cycles to work."),
        "2026-11-03": section("2026-11-03T09:00:00Z", f"- [user] (retracts {cycles}) sold it"),
    }
    life = lifecycle_of(ledgers)
    assert life.status[cycles].state == "retracted"
    assert [f.text for f in life.of_state("current")] == []


def test_a_fact_expires_after_its_until_day() -> None:
    trip = "The user is in Tokyo for a conference. (until 2026-12-05)"
    ledgers = {"2026-12-01": section("2026-12-01T09:00:00Z", f"- [user] {trip}")}
    tokyo = ledger_fact_id("2026-12-01", trip)

    assert lifecycle_of(ledgers, on="2026-12-05").current(tokyo)
    gone = lifecycle_of(ledgers, on="2026-12-06")
    assert gone.status[tokyo].state == "expired" and gone.status[tokyo].at == "2026-12-05"


def test_a_tool_claim_cannot_retire_what_the_user_said_but_the_user_can_retire_a_tool_claim() -> (
    None
):
    tool_fact = "A tool result (crm) said: the user's plan is Basic."
    ledgers = {
        "2026-11-02": section(
            "2026-11-02T09:00:00Z", f"- [user] {LISBON}", f"- [tool:crm] {tool_fact}"
        ),
        "2026-11-03": section(
            "2026-11-03T09:00:00Z",
            f"- [tool:web] (retracts {L}) the page says the user left Lisbon",
            f"- [user] The plan is Pro. (supersedes {ledger_fact_id('2026-11-02', tool_fact)})",
        ),
    }
    life = lifecycle_of(ledgers)

    assert life.current(L)
    assert life.status[ledger_fact_id("2026-11-02", tool_fact)].state == "superseded"
    assert [target for _, target in life.refused] == [L]


def test_a_record_cannot_retire_a_later_fact_or_an_unknown_id() -> None:
    ledgers = {
        "2026-11-02": section("2026-11-02T09:00:00Z", "- [user] (retracts 2026-11-09.00000000) x"),
        "2026-11-09": section("2026-11-09T09:00:00Z", "- [user] A fact of later."),
    }
    life = lifecycle_of(ledgers)
    assert life.refused and all(s.state == "current" for s in life.status.values())


def test_the_dependents_of_a_retired_fact_need_a_recheck_until_confirmed() -> None:
    commute = "The user commutes by tram through Lisbon."
    sister = "The user's sister is called Ana."
    stated = f"The user's gym is near home. (depends {L})"
    ledgers = {
        "2026-11-02": section(
            "2026-11-02T09:00:00Z",
            f"- [user] {LISBON}",
            f"- [user] {commute}",
            f"- [user] {sister}",
            f"- [user] {stated}",
        ),
        "2026-11-20": section(
            "2026-11-20T10:00:00Z",
            f"- [user] The user moved to Berlin. (supersedes {L})",
            turns="session=s2 turns=1",
        ),
    }
    life = lifecycle_of(ledgers)
    ids = {t: ledger_fact_id("2026-11-02", t) for t in (commute, sister, stated)}

    assert {f.id for f in life.to_recheck()} == {ids[commute], ids[stated]}
    assert life.status[ids[commute]].recheck == [L]
    confirmed = {
        **ledgers,
        "2026-11-21": section("2026-11-21T03:00:00Z", f"- [user] (confirms {ids[stated]}) too"),
    }
    assert {f.id for f in lifecycle_of(confirmed).to_recheck()} == {ids[commute]}
