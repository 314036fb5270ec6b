"""The LoCoMo context bench's own rules (no data file needed): what counts as evidence in
a model's input, how the recommended recall setting is chosen, and the source
granularities of the retrieval bench's saves."""

from __future__ import annotations

from bench.locomo_context import BUDGETS, held_out_keys, recommend, summarise
from bench.locomo_memory import Evidence, input_lines, key_of, parse_key
from bench.locomo_retrieval import saves


def test_evidence_is_a_whole_observation_or_the_turn_itself_within_one_input_line() -> None:
    evidence = Evidence(
        turn_text={"D1:3": "Caroline: I went to a support group.", "D2:1": "Mel: hi"},
        facts={"D1:3": {"Caroline attended an LGBTQ support group."}},
    )
    body = {
        "messages": [
            {"role": "system", "content": "You are helpful."},
            {
                "role": "user",
                "content": "<recalled>\n- Caroline  attended an LGBTQ support group. "
                "(memory/2023-05-08.md#4, 2023-05-08)\n</recalled>",
            },
            {"role": "user", "content": "Where did Caroline go?"},
        ]
    }
    lines = input_lines(body)
    assert evidence.present("D1:3", lines)  # whitespace collapsed, recall suffix aside
    assert not evidence.present("D2:1", lines)
    assert not evidence.present("D9:9", lines)  # a turn the bench does not know
    # a fact cut in the middle (a truncated MEMORY.md) is not in context
    cut = input_lines({"messages": [{"content": "- Caroline attended an LGBTQ"}]})
    assert not evidence.present("D1:3", cut)
    # the turn's own message counts too
    assert evidence.present("D2:1", input_lines({"messages": [{"content": "[user]: Mel: hi"}]}))


def test_setting_keys_round_trip() -> None:
    assert parse_key(key_of("memory")) == ("memory", 0, 0.0)
    assert parse_key(key_of("recall", 1500, 0.15)) == ("recall", 1500, 0.15)


def _rows(key: str, hits: list[bool], tokens: int) -> list[dict]:
    return [
        {"conv": "c", "category": 4, "key": key, "all": h, "any": h, "tokens": tokens} for h in hits
    ]


def test_the_recommended_setting_fits_the_token_target_and_is_the_cheapest_near_the_best() -> None:
    rows = [
        *_rows("recall 4000 0", [True] * 10, 4100),  # best, but over 2,000 tokens a call
        *_rows("recall 2000 0", [True] * 9 + [False], 1900),
        *_rows("recall 1000 0.15", [True] * 9 + [False], 800),  # as good, cheaper
        *_rows("recall 500 0.3", [True] * 8 + [False] * 2, 300),
        *_rows("both 1000 0.15", [True] * 10, 1500),  # not a recall-only arm
    ]
    table = summarise(rows, ("c",))
    assert table["recall 2000 0"]["all"]["all"] == 0.9
    assert table["recall 2000 0"]["4"]["tokens_max"] == 1900
    assert recommend(table) == "recall 1000 0.15"
    assert recommend(summarise(_rows("recall 4000 0", [True], 4100), ("c",))) is None


def test_recall_with_past_messages_competes_and_the_lines_only_choice_is_kept_apart() -> None:
    rows = [
        *_rows("recall 1000 0", [True] * 6 + [False] * 4, 900),
        *_rows("messages 1500 0", [True] * 9 + [False], 1400),
        *_rows("messages 2000 0", [True] * 9 + [False], 1900),  # as good, dearer
        *_rows("ceiling", [True] * 10, 0),  # not a setting
        *_rows("top 10", [True] * 10, 0),
    ]
    table = summarise(rows, ("c",))
    assert recommend(table) == "messages 1500 0"
    assert recommend(table, ("recall",)) == "recall 1000 0"
    assert held_out_keys("messages 1500 0", "recall 1000 0") == [
        "memory",
        "shipped 1000 0.15",  # the product's defaults: MEMORY.md and recall with messages
        "both 1000 0",
        "both 1000 0.15",
        *(f"recall {b} 0" for b in BUDGETS),
        "recall 1000 0.15",
        *(f"messages {b} 0" for b in BUDGETS),
        "messages 1000 0.15",
    ]


def test_sources_at_each_granularity() -> None:
    where = {f"D1:{n}": ("s01", n) for n in range(1, 6)} | {"D2:1": ("s02", 1)}
    facts = [("a", ["D1:3"]), ("b", ["D1:1"]), ("c", ["D1:3", "D2:1"])]
    assert saves(facts, where, "turns") == [
        ("s01", (3,), ["- a [D1:3]"]),
        ("s01", (1,), ["- b [D1:1]"]),
        (None, (), ["- c [D1:3, D2:1]"]),
    ]
    assert saves(facts, where, "window") == [
        ("s01", (2, 3, 4), ["- a [D1:3]"]),
        ("s01", (1, 2), ["- b [D1:1]"]),  # clipped to the session's turns
        (None, (), ["- c [D1:3, D2:1]"]),
    ]
    assert saves(facts, where, "session") == [
        ("s01", (1, 2, 3, 4, 5), ["- a [D1:3]", "- b [D1:1]"]),
        (None, (), ["- c [D1:3, D2:1]"]),
    ]
    assert saves(facts, where, "none") == [
        (None, (), ["- a [D1:3]", "- b [D1:1]", "- c [D1:3, D2:1]"]),
    ]
