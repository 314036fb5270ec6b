"""Ranking terms: the light stemmer, irregular forms and the ranking stopwords."""

from __future__ import annotations

import pytest

from agent_harness.text import stem, terms, tokens


@pytest.mark.parametrize(
    "forms",
    [
        ("running", "runs", "run"),
        ("painted", "painting", "paints", "paint"),
        ("family", "families"),
        ("hike", "hiking", "hiked"),
        ("happy", "happiness", "happily"),
        ("studied", "studies", "study"),
        ("planned", "planning", "plan"),
        ("participated", "participating", "participate"),
        ("went", "go", "goes", "gone"),  # irregular forms as their base word
        ("bought", "buying", "buy"),
        ("made", "makes", "making", "make"),
        ("children", "child"),
        ("wrote", "written", "writing", "writes"),
    ],
)
def test_forms_of_a_word_get_one_term(forms: tuple[str, ...]) -> None:
    assert len({t for form in forms for t in terms(form)}) == 1, [terms(f) for f in forms]


def test_short_and_non_ascii_words_are_left_alone() -> None:
    assert stem("gym") == "gym"
    assert stem("café") == "café"
    assert stem("2023") == "2023"


def test_different_words_stay_apart() -> None:
    assert terms("recently") == terms("recent") == ["recent"]
    assert terms("family") != terms("famous")
    assert terms("painting") != terms("pain")
    assert terms("camping") != terms("cap")


def test_irregular_forms_meet_their_base_word_in_ranking_but_not_in_matching() -> None:
    assert terms("she went and bought it") == terms("she goes and buys it") == ["go", "buy"]
    assert tokens("she went") == ["she", "went"]  # phrase/all/any match the words typed
    assert terms("a rose") != terms("to rise")  # a form that is as often another word


def test_ranking_stopwords_are_dropped_from_terms_but_not_from_tokens() -> None:
    assert terms("what kind of music does she like") == ["music", "lik"]
    assert "kind" in tokens("what kind of music")


def test_cjk_runs_become_bigrams_in_terms_too() -> None:
    assert terms("项目截止日期") == ["项目", "目截", "截止", "止日", "日期"]
    assert terms("茶") == ["茶"]


def test_an_already_folded_text_gives_the_same_terms() -> None:
    from agent_harness.text import fold

    text = "Ä Caroline WENT Hiking"
    assert terms(fold(text), folded=True) == terms(text)
