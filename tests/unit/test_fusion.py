"""Fusion trusts a query's words as far as its best lexical hits cover it: a question
that reuses a line's words keeps the lexical order; one worded unlike everything stored
is ranked by meaning, and its chance word matches are noise."""

from __future__ import annotations

from agent_harness.memory.engine.file_index import FileIndex
from agent_harness.memory.engine.fusion import FACTS, fuse, words_confidence
from agent_harness.memory.engine.index import search_files
from agent_harness.memory.engine.vectors import line_key

LINES = [
    "- [user] I prefer green tea over coffee in the morning.",
    "- [user] My daughter Mia is allergic to peanuts.",
    "- [user] The morning train to Lyon leaves at seven.",
]
FILES = [("MEMORY.md", FileIndex.build("# Memory\n" + "\n".join(LINES) + "\n"))]


def ranked(query: str, cosines: dict[str, float]) -> list[str]:
    lexical = search_files(FILES, query, "ranked", 50)
    return [h.text for h in fuse(FILES, query, lexical, cosines, 5, 0.8, profile=FACTS)]


def cos(**by_line: float) -> dict[str, float]:
    bodies = {
        "tea": "I prefer green tea over coffee in the morning.",
        "mia": "My daughter Mia is allergic to peanuts.",
        "train": "The morning train to Lyon leaves at seven.",
    }
    return {line_key(bodies[k]): v for k, v in by_line.items()}


def test_confidence_rises_with_the_coverage_of_the_best_lexical_hits() -> None:
    assert words_confidence([0.1, 0.05], 0.25, 0.55) == 0.0
    assert words_confidence([0.4], 0.25, 0.55) == 0.5
    assert words_confidence([0.9, 0.2], 0.25, 0.55) == 1.0


def test_a_question_reusing_a_lines_words_keeps_that_line_first() -> None:
    # the meaning prefers another line a little; the words name this one
    found = ranked("when does the Lyon train leave", cos(train=0.84, tea=0.86))
    assert "train to Lyon" in found[0]


def test_a_question_worded_unlike_everything_is_ranked_by_meaning() -> None:
    # "morning" matches two lines by chance; the meaning names the right one
    found = ranked("what hot drink starts my morning", cos(tea=0.9, train=0.78, mia=0.7))
    assert "green tea" in found[0]
    assert not any("train" in line for line in found)  # a chance word is noise
