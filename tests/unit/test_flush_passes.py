"""The flush's passes over a window (memory.facts.flow): the user's words in one call,
text the user did not write in another, and no second call for a window whose only other
text is an imported reply acknowledging the user."""

from __future__ import annotations

import pytest

from agent_harness.memory.facts.flow import acknowledges, flush_passes
from agent_harness.models.base import Message, ToolCall
from agent_harness.records import TurnRecord

SAID = "Hi, I'm Sam. I prefer green tea over coffee.\nI live in Lisbon, in Alfama."


def imported(*pairs: tuple[str, str]) -> list[TurnRecord]:
    return [
        TurnRecord(
            session_id="imp",
            turn=n,
            created_at="2026-11-30T09:00:00Z",
            source="import",
            messages=[
                Message(role="user", content=user),
                Message(role="assistant", content=reply),
            ],
        )
        for n, (user, reply) in enumerate(pairs, start=1)
    ]


@pytest.mark.parametrize(
    "reply",
    [
        "Noted, Sam!",
        "Congratulations!",
        "Good choice.",
        "I'll keep that in mind.",
        "Got it, you live in Lisbon now.",
    ],
)
def test_a_reply_that_only_acknowledges_the_user_says_nothing_new(reply: str) -> None:
    assert acknowledges(reply, SAID)


@pytest.mark.parametrize(
    "reply",
    [
        "You don't live in Lisbon.",  # a negation is meaning
        "You no longer prefer green tea.",
        "Your dentist is Dr Alvarez.",  # words the user never said
        "Noted: your card ends 4417.",  # an identifier nobody gave
        "Lovely part of town, the tram 28 stops there.",
    ],
)
def test_a_reply_that_states_anything_of_its_own_is_not_an_acknowledgement(reply: str) -> None:
    assert not acknowledges(reply, SAID)


def test_an_imported_session_of_acknowledgements_costs_one_call() -> None:
    records = imported(
        ("Hi, I'm Sam. I prefer green tea over coffee.", "Noted, Sam!"),
        ("I live in Lisbon, in Alfama.", "Good choice."),
    )
    passes = flush_passes(records)
    assert [p.trusted for p in passes] == [True]
    assert all(m.role == "user" for p in passes for r in p.turns for m in r.messages)


def test_an_imported_reply_stating_a_fact_gets_its_own_call_at_its_own_label() -> None:
    records = imported(
        ("Hi, I'm Sam.", "Noted, Sam!"),
        ("Who is my dentist?", "Your dentist is Dr Alvarez in Bilbao."),
    )
    trusted, untrusted = flush_passes(records)
    assert trusted.trusted and not untrusted.trusted
    assert untrusted.floor != trusted.floor
    said = [m.content for r in untrusted.turns for m in r.messages if m.role == "user"]
    assert said == []  # the user's words are the trusted pass's alone


def test_a_tool_result_always_gets_its_own_call() -> None:
    call = ToolCall(id="c1", name="fetch_page", arguments="{}")
    record = TurnRecord(
        session_id="s",
        turn=1,
        created_at="2026-11-30T09:00:00Z",
        messages=[
            Message(role="user", content="Fetch it"),
            Message(role="assistant", tool_calls=[call]),
            Message(role="tool", name="fetch_page", tool_call_id="c1", content="ok"),
            Message(role="assistant", content="Done."),
        ],
    )
    assert [p.trusted for p in flush_passes([record])] == [True, False]
