from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from agent_harness.errors import ModelOutputError
from agent_harness.memory.facts.ledger import (
    Source,
    clean_bullets,
    covered_turns,
    day_of,
    format_turns,
    parse_source,
    parse_turns,
    render_section,
)


def test_turn_ranges_round_trip() -> None:
    assert format_turns([5, 1, 2, 3, 9, 10]) == "1-3,5,9-10"
    assert parse_turns("1-3,5,9-10") == {1, 2, 3, 5, 9, 10}


def test_sections_carry_time_and_provenance() -> None:
    at = datetime(2026, 11, 30, 9, 12, 44, tzinfo=UTC)
    text = render_section("Flush", at, ZoneInfo("UTC"), ["- a"], Source("s1", (3, 4, 5)).render())
    assert text == "\n## Flush — 2026-11-30T09:12:44Z\n> source: session=s1 turns=3-5\n- a\n"


def test_day_and_header_use_the_same_configured_zone() -> None:
    # 23:30 UTC is already the next day in Tokyo: file date and header must agree
    # (the reference mixed them: docs/design.md#mixed-time-zones)
    at = datetime(2026, 11, 30, 23, 30, tzinfo=UTC)
    zone = ZoneInfo("Asia/Tokyo")
    assert day_of(at, zone) == "2026-12-01"
    assert "2026-12-01T08:30:00+09:00" in render_section("Flush", at, zone, ["- a"])


def test_covered_turns_are_per_session() -> None:
    ledger = (
        render_section("Flush", datetime.now(UTC), UTC_ZONE, ["- a"], Source("s1", (1, 2)).render())
        + render_section("Flush", datetime.now(UTC), UTC_ZONE, ["- b"], Source("s2", (1,)).render())
        + render_section("Flush", datetime.now(UTC), UTC_ZONE, ["- c"], Source("s1", (4,)).render())
    )
    assert covered_turns(ledger, "s1") == {1, 2, 4}
    assert covered_turns(ledger, "s2") == {1}
    assert covered_turns(ledger, "s3") == set()


def test_saved_facts_that_name_their_turns_do_not_count_as_flushed() -> None:
    saved = Source("s1", (3,), via="memory_save").render()
    assert saved == "> source: session=s1 turns=3 via=memory_save"
    ledger = render_section("Memory Save", datetime.now(UTC), UTC_ZONE, ["- a"], saved)
    assert covered_turns(ledger, "s1") == set()  # the flush of turn 3 still runs


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "> source: session=s1 turns=3-5 model=openai:gpt-4.1",
            Source("s1", (3, 4, 5), "openai:gpt-4.1"),
        ),
        ("> source: session=s1 turns=2,7 via=memory_save", Source("s1", (2, 7), via="memory_save")),
        ("> source: session=s1 turn=4 via=memory_save", Source("s1", (4,), via="memory_save")),
        ("> source: api via=memory_save", None),
        ("> source: session=s1 turns=x", None),
        ("> source: session=s1 turns=1-99999999", None),  # a hand-edited range: ignored
        ("- session=s1 turns=3", None),
    ],
)
def test_source_lines_name_a_session_and_its_turns(line: str, expected: Source | None) -> None:
    assert parse_source(line) == expected


UTC_ZONE = ZoneInfo("UTC")


@pytest.mark.parametrize("answer", ["NO_REPLY", "  NO_REPLY \n", "", "   "])
def test_no_reply_means_nothing_to_write(answer: str) -> None:
    assert clean_bullets(answer) == []


def test_bullets_are_normalised_and_chatter_dropped() -> None:
    answer = (
        "Here are the facts:\n\n* User prefers tea\n1. Project Atlas ships Friday\n- ## heading\n"
    )
    assert clean_bullets(answer) == ["- User prefers tea", "- Project Atlas ships Friday"]


def test_an_answer_without_bullets_is_malformed() -> None:
    with pytest.raises(ModelOutputError):
        clean_bullets("The user seems nice and likes many things.")


def test_bullets_are_capped_in_length_and_number() -> None:
    bullets = clean_bullets("\n".join(f"- {'x' * 1000} {i}" for i in range(80)))
    assert len(bullets) == 50
    assert all(len(b) <= 602 for b in bullets)
