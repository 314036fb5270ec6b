"""A long session over HTTP: the model input stays bounded while the thread log keeps
every message, and thread_search still finds the first turn."""

from __future__ import annotations

import json

from tests.e2e.conftest import FakeLLM, LocalStackProcess, wait_for

TURNS = 121


def test_a_long_session_keeps_everything_but_sends_a_bounded_context(
    local_stack: LocalStackProcess, fake_llm: FakeLLM
) -> None:
    dave = local_stack.client("e2e-dave")
    first_words = "The spare key is under the blue flowerpot"
    for n in range(1, TURNS + 1):
        text = first_words if n == 1 else f"long session message number {n}"
        response = dave.post("/v1/sessions/long/messages", json={"message": text})
        assert response.status_code == 200 and response.json()["turn"] == n

    sent = [
        r
        for r in fake_llm.requests
        if r["messages"][-1]["content"].startswith("long session message")
    ]
    sizes = [len(json.dumps(r["messages"])) for r in sent]
    counts = [len(r["messages"]) for r in sent]
    # system + MEMORY.md + summary + at most trigger (50) messages before compaction
    assert max(counts) <= 50 + 3
    assert max(sizes[60:]) < 1.5 * max(sizes[:60])  # bounded: not growing with history
    assert any("<conversation_summary" in json.dumps(r["messages"]) for r in sent)  # compacted
    assert first_words not in json.dumps(sent[-1]["messages"])  # turn 1 left the context...

    turns, after = [], 0
    while True:
        page = dave.get("/v1/sessions/long/messages", params={"after": after, "limit": 50}).json()
        turns += page["turns"]
        if page["next_after"] is None:
            break
        after = page["next_after"]
    assert [t["turn"] for t in turns] == list(range(1, TURNS + 1))  # ...but not the log
    assert sum(len(t["messages"]) for t in turns) == 2 * TURNS

    def first_turn_found() -> list:
        hits = dave.post(
            "/v1/sessions/search", json={"query": "blue flowerpot", "match_mode": "phrase"}
        ).json()["hits"]
        return [(h["session_id"], h["turn"], h["role"]) for h in hits]

    # the fake model echoes the message, so both sides of turn 1 hold the phrase
    assert wait_for(first_turn_found, timeout=60) == [("long", 1, "user"), ("long", 1, "assistant")]
