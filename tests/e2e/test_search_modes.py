"""The default match mode over HTTP against the local stack: a search route called without
``match_mode`` (or with null) looks for the phrase first and, when no line holds it, ranks
instead, and says which it did.

"部署 蓝鲸" (two words, apart in the line) is not a phrase of "部署决定：使用蓝鲸方案": the
default answers it ranked, marks the response and every hit ``ranked``, and puts the line
first. An explicit ``phrase`` stays literal and finds nothing. A phrase the line does
contain ("蓝鲸方案") is answered as a phrase search."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import LocalStackProcess, wait_for

pytestmark = pytest.mark.e2e

DECISION = "部署决定：使用蓝鲸方案"
#: both words are in DECISION, but not next to each other
APART = "部署 蓝鲸"
#: a phrase DECISION does contain
PHRASE = "蓝鲸方案"


def search(http: httpx.Client, route: str, **body: Any) -> dict[str, Any]:
    response = http.post(route, json=body)
    assert response.status_code == 200, response.text
    return response.json()


def remember_the_decision(http: httpx.Client, route: str) -> None:
    """Put DECISION where ``route`` searches: MEMORY.md (and today's ledger) for memory
    search, a turn's message (indexed by the post-turn job) for session search."""
    if route == "/v1/memory/search":
        saved = http.post("/v1/memory/save", json={"content": f"- {DECISION}"})
        assert saved.status_code == 200 and saved.json() == {"saved": 1, "held": 0}, saved.text
    else:
        said = http.post("/v1/sessions/decisions/messages", json={"message": DECISION})
        assert said.status_code == 200, said.text
    # searchable once "all" finds it (the session's turn is indexed in the background)
    wait_for(lambda: search(http, route, query=APART, match_mode="all")["hits"])


@pytest.mark.parametrize("route", ["/v1/memory/search", "/v1/sessions/search"])
def test_a_search_without_match_mode_ranks_when_no_line_holds_the_phrase_and_says_so(
    offline_stack: LocalStackProcess, route: str
) -> None:
    with offline_stack.client(f"e2e-modes-{uuid.uuid4().hex[:8]}") as http:
        remember_the_decision(http, route)

        for by_default in (
            search(http, route, query=APART),
            search(http, route, query=APART, match_mode=None),
        ):
            assert by_default["match_mode"] == "ranked"
            assert by_default["hits"] and DECISION in by_default["hits"][0]["text"]
            assert all(h["match_mode"] == "ranked" for h in by_default["hits"])

        literal = search(http, route, query=APART, match_mode="phrase")
        assert literal == {"hits": [], "match_mode": "phrase"}

        every_word = search(http, route, query=APART, match_mode="all")
        assert every_word["match_mode"] == "all"
        assert every_word["hits"] and all(DECISION in h["text"] for h in every_word["hits"])

        # the default does search: the phrase the line contains is found
        phrase = search(http, route, query=PHRASE)
        assert phrase["match_mode"] == "phrase"
        assert [h["text"] for h in phrase["hits"]] == [h["text"] for h in every_word["hits"]]
