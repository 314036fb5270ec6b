"""The ranking ideas the LoCoMo ablation measures and did not keep: each is the shipped
ranking plus the idea, and the table's verdict is read from the numbers."""

from __future__ import annotations

from agent_harness.memory.engine.file_index import FileIndex
from agent_harness.memory.engine.index import Hit, rank
from bench.locomo_retrieval import _ideas_verdict
from bench.ranking_ideas import Coverage, Feedback, Proximity

LEDGER = "\n".join(
    [
        "- the garden party is on friday at the old house by the lake, bring a chair",
        "- friday the party moved to the garden",
        "- Alice grows tomatoes in the garden",
        "",  # a new block: no neighbour lends it the words above
        "- the tomatoes need water every morning",
        "- Bob fixed the bike on monday",
    ]
)
FILES = [("memory/2026-11-02.md", FileIndex.build(LEDGER))]


def texts(hits) -> list[str]:  # type: ignore[no-untyped-def]
    return [hit.text for hit in hits]


def test_each_idea_at_no_strength_ranks_as_shipped() -> None:
    shipped = rank(FILES, "garden party tomatoes", 5)
    assert texts(Feedback(rank, weight=0.0)(FILES, "garden party tomatoes", 5)) == texts(shipped)
    assert texts(Proximity(rank, weight=0.0)(FILES, "garden party tomatoes", 5)) == texts(shipped)
    assert texts(Coverage(rank, power=0.0)(FILES, "garden party tomatoes", 5)) == texts(shipped)


def test_proximity_lifts_the_line_with_the_query_words_side_by_side() -> None:
    side_by_side = "- the garden party is on friday at the old house by the lake, bring a chair"
    assert rank(FILES, "garden party", 2)[0].text != side_by_side  # the shorter line first
    assert Proximity(rank, weight=5.0)(FILES, "garden party", 2)[0].text == side_by_side


def test_feedback_reaches_a_line_only_the_added_words_find() -> None:
    shipped = texts(rank(FILES, "Alice garden", 5))
    fed = texts(Feedback(rank, lines=1, words=3, weight=1.0)(FILES, "Alice garden", 5))
    assert "- the tomatoes need water every morning" not in shipped
    assert "- the tomatoes need water every morning" in fed


def test_coverage_puts_a_line_holding_every_query_word_first() -> None:
    one, both = Hit("m", 1, "- tomatoes on sale", 2.0), Hit("m", 2, "- tomatoes in the garden", 1.5)

    def shipped(*_: object) -> list[Hit]:
        return [one, both]  # the line with one of the two words scored higher

    assert Coverage(shipped, power=1.0)(FILES, "tomatoes garden", 2) == [both, one]


def _row(turn: float, observation: float) -> dict[str, dict[str, float]]:
    return {"turn": {"5": turn}, "observation": {"5": observation}}


def test_the_verdict_names_only_ideas_that_beat_the_shipped_ranking() -> None:
    rows = {"ranked as shipped": _row(0.68, 0.61), "tried, not kept: a": _row(0.67, 0.60)}
    assert "none lifts recall@5" in " ".join(_ideas_verdict(rows))
    rows["tried, not kept: b"] = _row(0.68, 0.62)
    verdict = " ".join(_ideas_verdict(rows))
    assert "b lifts observation recall@5" in verdict and "a lifts" not in verdict
    assert "shows a gain for b" in verdict


def test_an_idea_that_lowers_the_other_unit_is_not_a_gain() -> None:
    rows = {"ranked as shipped": _row(0.68, 0.61), "tried, not kept: c": _row(0.66, 0.62)}
    verdict = " ".join(_ideas_verdict(rows))
    assert "c lifts observation recall@5 but lowers turn recall@5" in verdict
    assert "none lifts recall@5 of turns or of observations without lowering" in verdict
