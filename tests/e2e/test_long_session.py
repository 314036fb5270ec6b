"""A long session over HTTP with the offline model: the model input stays bounded while
the thread log keeps every message, and thread_search still finds the first turn."""

from __future__ import annotations

from tests.e2e.conftest import LocalStackProcess, wait_for

TURNS = 121


def test_a_long_session_keeps_everything_but_sends_a_bounded_context(
    offline_stack: LocalStackProcess,
) -> None:
    dave = offline_stack.client("e2e-dave")
    replies = []
    for n in range(1, TURNS + 1):
        text = (
            "The spare key is under the blue flowerpot"
            if n == 1
            else f"long session message number {n}"
        )
        response = dave.post("/v1/sessions/long/messages", json={"message": text})
        assert response.status_code == 200 and response.json()["turn"] == n
        replies.append(response.json())

    # the offline model reports the tokens it was sent: flat, not growing with history
    inputs = [r["usage"]["input_tokens"] for r in replies]
    assert max(inputs[60:]) < 1.5 * max(inputs[:60])
    assert inputs[-1] < 10 * inputs[0]
    assert sum(r["compacted"] for r in replies) >= 2  # compacted, more than once

    turns, after = [], 0
    while True:
        page = dave.get("/v1/sessions/long/messages", params={"after": after, "limit": 50}).json()
        turns += page["turns"]
        if page["next_after"] is None:
            break
        after = page["next_after"]
    assert [t["turn"] for t in turns] == list(range(1, TURNS + 1))  # the log keeps everything
    assert sum(len(t["messages"]) for t in turns) == 2 * TURNS

    def first_turn_found() -> list:
        hits = dave.post(
            "/v1/sessions/search", json={"query": "blue flowerpot", "match_mode": "phrase"}
        ).json()["hits"]
        return [(h["session_id"], h["turn"], h["role"]) for h in hits]

    assert wait_for(first_turn_found, timeout=60) == [("long", 1, "user")]
