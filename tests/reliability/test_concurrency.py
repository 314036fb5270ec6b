"""Invariants 1 and 2 over HTTP against the local stack (real handlers, moto, a
container per concurrent request as Lambda scales): concurrent calls on one session
never lose or interleave a turn; different sessions of one user run side by side."""

from __future__ import annotations

import threading
from collections import Counter

import httpx

from tests.e2e.conftest import FakeLLM, LocalStackProcess

CALLS = 50
SESSIONS = 10


def fire(local_stack: LocalStackProcess, user: str, targets: list[tuple[str, str]]):
    """All requests at once (a barrier), one client each; returns the responses."""
    barrier = threading.Barrier(len(targets))
    results: dict[int, httpx.Response] = {}

    def call(n: int, session: str, message: str) -> None:
        with local_stack.client(user) as client:
            barrier.wait()
            try:
                results[n] = client.post(
                    f"/v1/sessions/{session}/messages", json={"message": message}
                )
            except httpx.HTTPError as exc:  # counted as a failure, not a crashed thread
                results[n] = httpx.Response(599, json={"error": {"code": type(exc).__name__}})

    threads = [
        threading.Thread(target=call, args=(n, session, message))
        for n, (session, message) in enumerate(targets)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return results


def test_fifty_concurrent_calls_on_one_session_lose_and_interleave_nothing(
    local_stack: LocalStackProcess, fake_llm: FakeLLM, record
) -> None:
    user = "rel-carol"
    results = fire(local_stack, user, [("race", f"race message {n}") for n in range(CALLS)])
    statuses = Counter(r.status_code for r in results.values())
    ok = {n: r.json() for n, r in results.items() if r.status_code == 200}
    busy = [r for r in results.values() if r.status_code == 409]

    with local_stack.client(user) as client:
        log = client.get("/v1/sessions/race/messages", params={"limit": 500}).json()["turns"]
    logged = [t["turn"] for t in log]
    answered = sorted(body["turn"] for body in ok.values())
    lost = set(answered) - set(logged)
    # no interleaving: the model input of turn n holds its own message after the messages
    # of the turns before it, contiguous and in order (compaction may have summarised the
    # oldest ones away, so a suffix of them), and no message of any other turn
    by_turn = {t["turn"]: t["messages"][0]["content"] for t in log}
    interleaved = 0
    for turn, text in by_turn.items():
        [request] = fake_llm.requests_for(text)
        seen = [m["content"] for m in request["messages"] if m["content"] in by_turn.values()]
        before = [by_turn[n] for n in sorted(by_turn) if n <= turn]
        interleaved += not seen or seen != before[len(before) - len(seen) :]

    record("1,2", f"{CALLS} concurrent calls on one session: answered", statuses[200], ">= 1", ok)
    record(
        "2",
        "  ... refused 409 with Retry-After",
        len(busy),
        f"the other {CALLS - len(ok)}",
        len(busy) == CALLS - len(ok),
    )
    record("1", "  ... answered turns missing from the thread log", len(lost), "0", not lost)
    record(
        "2",
        "  ... turns whose model input was not exactly the turns before",
        interleaved,
        "0",
        interleaved == 0,
    )
    record(
        "1",
        "  ... 5xx",
        sum(v for k, v in statuses.items() if k >= 500),
        "0",
        not any(k >= 500 for k in statuses),
    )

    assert statuses[200] >= 1 and statuses[200] + statuses[409] == CALLS
    assert all(
        r.headers.get("retry-after") and r.json()["error"]["code"] == "session_busy" for r in busy
    )
    assert logged == list(range(1, len(logged) + 1)) and answered == logged
    assert not lost and interleaved == 0


def test_sessions_of_one_user_run_in_parallel(local_stack: LocalStackProcess, record) -> None:
    targets = [(f"parallel-{n}", f"hello from session {n}") for n in range(SESSIONS)]
    results = fire(local_stack, "rel-dave", targets)
    answered = sum(r.status_code == 200 for r in results.values())
    record(
        "2",
        f"{SESSIONS} sessions of one user at once: answered",
        answered,
        str(SESSIONS),
        answered == SESSIONS,
    )
    assert answered == SESSIONS
