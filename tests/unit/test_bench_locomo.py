"""The LoCoMo evaluation's own arithmetic (no data file needed): evidence parsing, hit
mapping and recall, on the cases the data really holds."""

from __future__ import annotations

from bench.locomo_retrieval import (
    Loaded,
    _memory_ids,
    _thread_ids,
    aggregate,
    dia_ids,
    fact_line,
    recall,
    saves,
    session_start,
    turn_keys,
)


def test_malformed_evidence_strings_are_split_and_normalised() -> None:
    assert dia_ids("D8:6; D9:17") == ["D8:6", "D9:17"]
    assert dia_ids("D30:05") == ["D30:5"]
    assert dia_ids(["D9:1 D4:4 D4:6"]) == ["D9:1", "D4:4", "D4:6"]
    assert dia_ids("D") == []
    assert dia_ids("D:11:26") == []


def test_session_dates_parse_as_written_in_the_data() -> None:
    assert session_start("1:56 pm on 8 May, 2023").isoformat() == "2023-05-08T13:56:00+00:00"
    assert session_start("10:37 am on 27 June, 2023").hour == 10


def test_a_saved_fact_line_maps_back_to_its_turns() -> None:
    line = fact_line("Caroline  went to a\nsupport group.", ["D1:3", "D1:4"])
    assert line == "- Caroline went to a support group. [D1:3, D1:4]"
    assert _memory_ids({"text": line}) == ["D1:3", "D1:4"]
    assert _memory_ids({"text": "- a line someone else wrote"}) == []


def test_facts_are_saved_in_groups_naming_the_turns_they_came_from() -> None:
    where = {"D1:1": ("s01", 1), "D1:2": ("s01", 1), "D1:3": ("s01", 2), "D2:1": ("s02", 1)}
    facts = [
        ("a", ["D1:3"]),
        ("b", ["D1:1", "D1:2"]),  # both messages of turn 1
        ("c", ["D1:3"]),
        ("d", ["D1:1", "D2:1"]),  # two sessions: no source
        ("e", ["D7:7"]),  # no such turn: no source
    ]
    assert saves(facts, where) == [
        ("s01", (2,), ["- a [D1:3]", "- c [D1:3]"]),
        ("s01", (1,), ["- b [D1:1, D1:2]"]),
        (None, (), ["- d [D1:1, D2:1]", "- e [D7:7]"]),
    ]


def test_turns_start_at_each_first_speaker_message_as_the_importer_does() -> None:
    def line(speaker: str, dia: str) -> dict:
        return {"speaker": speaker, "dia_id": dia, "text": "x"}

    sample = {
        "conversation": {
            "speaker_a": "A",
            "speaker_b": "B",
            "session_1": [line("B", "D1:1"), line("A", "D1:2"), line("B", "D1:3")],
            "session_1_date_time": "1:56 pm on 8 May, 2023",
        }
    }
    assert turn_keys(sample) == {"D1:1": ("s01", 1), "D1:2": ("s01", 2), "D1:3": ("s01", 2)}


def test_a_thread_hit_maps_to_the_message_with_its_text_in_that_turn() -> None:
    loaded = Loaded(
        "conv-x", "u", {("s01", 1): [("A: hi", "D1:1"), ("B: hello there", "D1:2")]}, 0, 0.0
    )
    hit = {"session_id": "s01", "turn": 1, "text": "B:  hello\nthere"}
    assert _thread_ids(loaded, hit) == ["D1:2"]
    assert _thread_ids(loaded, {**hit, "turn": 2}) == []


def test_recall_at_k_is_the_share_of_evidence_in_the_top_k_hits() -> None:
    hits = [["D1:1"], [], ["D1:3"], ["D2:1"], ["D9:9"], ["D1:2"]]
    values = recall(["D1:2", "D1:3"], hits)
    assert values[5] == 0.5  # D1:3 is 3rd, D1:2 is 6th
    assert values[10] == values[25] == 1.0


def test_aggregate_averages_by_category_and_keeps_adversarial_out_of_1_to_4() -> None:
    rows = [
        ("c1", 4, "turn ranked", {5: 1.0, 10: 1.0, 25: 1.0}),
        ("c1", 5, "turn ranked", {5: 0.0, 10: 0.0, 25: 1.0}),
        ("c2", 4, "turn ranked", {5: 0.0, 10: 1.0, 25: 1.0}),
    ]
    table = aggregate(rows, ("c1",))["turn ranked"]
    assert table["all"] == {"n": 2, "5": 0.5, "10": 0.5, "25": 1.0}
    assert table["1-4"]["n"] == 1 and table["5"]["n"] == 1
