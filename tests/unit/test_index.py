"""The search engine (agent_harness.memory.engine.index): the match modes, BM25 ranking with
neighbours, stems and CJK bigrams, and the bounded per-container cache."""

from __future__ import annotations

import pytest

from agent_harness.memory.engine.cache import MemoryIndexCache
from agent_harness.memory.engine.file_index import FileIndex
from agent_harness.memory.engine.index import parse_match_mode, search_files


def files(by_path: dict[str, str]) -> list[tuple[str, FileIndex]]:
    return [(path, FileIndex.build(text)) for path, text in by_path.items()]


LEDGER = files(
    {
        "MEMORY.md": "# Memory\n- User prefers Dark Mode\n- 部署蓝鲸系统 in March",
        "memory/2026-01-02.md": (
            "## Flush — 2026-01-02T09:00:00Z\n> source: session=s turns=1\n"
            "- cat sits on the windowsill\n- äpfel sind rot"
        ),
    }
)


def texts(query: str, mode: str | None, source=LEDGER, limit: int = 20) -> list[str]:
    return [h.text for h in search_files(source, query, parse_match_mode(mode), limit)]


@pytest.mark.parametrize(
    ("query", "mode", "expected"),
    [
        # phrase: literal, case-insensitive substring; null means phrase
        ("dark mode", "phrase", ["- User prefers Dark Mode"]),
        ("dark mode", None, ["- User prefers Dark Mode"]),
        ("  dark mode ", None, ["- User prefers Dark Mode"]),
        ("dark  mode", "phrase", []),  # a phrase keeps its inner spacing
        ("mode dark", "phrase", []),
        ("a.b", "phrase", []),  # literal: no regex
        ("(x", "phrase", []),  # and no regex error
        ("ÄPFEL", "phrase", ["- äpfel sind rot"]),  # Unicode case folding
        # all: every keyword in the same line, any order; duplicates and spaces ignored
        ("mode dark", "all", ["- User prefers Dark Mode"]),
        ("dark   dark  mode", "all", ["- User prefers Dark Mode"]),
        ("dark cat", "all", []),
        # any: at least one keyword, file then line order, not re-sorted
        ("windowsill dark", "any", ["- User prefers Dark Mode", "- cat sits on the windowsill"]),
        # no Chinese word splitting: keywords are what whitespace separates
        ("部署蓝鲸", "phrase", ["- 部署蓝鲸系统 in March"]),
        ("蓝鲸 部署", "all", ["- 部署蓝鲸系统 in March"]),
        ("蓝鲸部署", "phrase", []),
        # no date parsing
        ("January", "any", []),
        # blank queries match nothing
        ("", "phrase", []),
        ("   ", "any", []),
    ],
)
def test_match_modes(query: str, mode: str | None, expected: list[str]) -> None:
    assert texts(query, mode) == expected


@pytest.mark.parametrize("bad", ["", "fuzzy", "PHRASE", 3])
def test_unknown_match_modes_are_errors(bad: object) -> None:
    with pytest.raises(ValueError, match="matchMode must be one of"):
        parse_match_mode(bad)


def test_structure_lines_are_records_for_literal_modes() -> None:
    assert texts("source: session=s", "phrase") == ["> source: session=s turns=1"]


def test_limit_caps_hits() -> None:
    many = files({"MEMORY.md": "\n".join(f"- tea fact {i}" for i in range(50))})
    assert len(texts("tea", "phrase", many, limit=7)) == 7
    assert len(texts("tea", "ranked", many, limit=7)) == 7


def test_ranked_is_best_first_with_each_distinct_line_once() -> None:
    source = files(
        {
            "MEMORY.md": "# Memory\n- User prefers green tea in the morning\n- User drinks coffee",
            "memory/2026-01-01.md": (
                "- user prefers green tea in the morning\n\n- green light\n\n- tea tea tea"
            ),
            "memory/2026-01-02.md": (
                "## Flush — tea green\n> source: session=tea turns=1\n- unrelated"
            ),
        }
    )
    hits = search_files(source, "green tea preferences", "ranked", 10)
    assert [h.text.casefold() for h in hits][:2] == [  # the two copies differ only in case
        "- user prefers green tea in the morning",
        "- tea tea tea",
    ]
    folded = [h.text.casefold() for h in hits]
    assert len(folded) == len(set(folded)) == 4  # the second copy of the line dropped
    assert all(not h.text.startswith(("## ", "> source")) for h in hits)
    assert hits == sorted(hits, key=lambda h: -h.score)


def test_ranked_scores_a_line_with_its_neighbours_in_the_same_block() -> None:
    source = files(
        {
            "MEMORY.md": (
                "# Memory\n- Caroline went to the LGBTQ support group\n"
                "- It was really powerful for her\n\n- The weather was powerful today"
            )
        }
    )
    hits = search_files(source, "LGBTQ support group", "ranked", 10)
    assert [h.text for h in hits] == [
        "- Caroline went to the LGBTQ support group",
        "- It was really powerful for her",  # found by its neighbour's words, ranked below
    ]
    alone = search_files(source, "powerful", "ranked", 10)
    assert {h.text for h in alone[:2]} == {  # the lines that say it, before their neighbour
        "- It was really powerful for her",
        "- The weather was powerful today",
    }


def test_ranked_stems_words_so_forms_of_a_word_meet() -> None:
    source = files({"MEMORY.md": "- Melanie is painting a sunrise\n\n- Jon runs a dance studio"})
    assert search_files(source, "what did Melanie paint", "ranked", 1)[0].text.startswith(
        "- Melanie is painting"
    )
    assert search_files(source, "running studios", "ranked", 1)[0].text == (
        "- Jon runs a dance studio"
    )


def test_ranked_handles_cjk_without_spaces() -> None:
    source = files({"MEMORY.md": "- 我喜欢绿茶\n- 我喜欢咖啡\n- 项目截止日期是周五"})
    assert search_files(source, "绿茶", "ranked", 5)[0].text == "- 我喜欢绿茶"
    assert search_files(source, "截止日期", "ranked", 5)[0].text == "- 项目截止日期是周五"


def test_the_cache_is_bounded() -> None:
    cache = MemoryIndexCache(max_bytes=1000)
    for n in range(10):
        cache.put(("u", f"f{n}", "e"), FileIndex.build("x" * 300))
    assert cache.get(("u", "f0", "e")) is None and cache.get(("u", "f9", "e")) is not None
