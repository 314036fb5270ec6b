"""no-lost-turn and session-lease (docs/design.md#invariants) over HTTP against the local
stack (real handlers, moto, a container per concurrent request as Lambda scales): concurrent
calls on one session never lose or interleave a turn; different sessions of one user run
side by side."""

from __future__ import annotations

import threading
import time
from collections import Counter

import httpx

from local_stack.lambdas import function_timeout
from local_stack.resources import load_template
from tests.e2e.conftest import FakeLLM, LocalStackProcess, wait_for

CALLS = 50
SESSIONS = 10
#: a client that gave up: not a server error, and the call may still complete
CLIENT_TIMEOUT = 598
#: the server bounds one invocation by the function's timeout (plus the lease wait, 0
#: here); the local stack runs the containers' cold starts one at a time, so on a slow
#: machine a request can queue that long once per container started before it
SERVER_BOUND = function_timeout(load_template(), "AgentCallFunction")


def fire(
    local_stack: LocalStackProcess,
    user: str,
    targets: list[tuple[str, str]],
    spans: dict[int, tuple[float, float]] | None = None,
):
    """All requests at once (a barrier), one client each; returns the responses. A call
    the client gave up on is ``CLIENT_TIMEOUT``; any other transport error is a 599.
    ``spans`` gets each call's (start, end) by ``time.monotonic()``."""
    barrier = threading.Barrier(len(targets))
    results: dict[int, httpx.Response] = {}
    spans = {} if spans is None else spans
    timeout = httpx.Timeout(SERVER_BOUND * 4, connect=SERVER_BOUND)

    def call(n: int, session: str, message: str) -> None:
        with local_stack.client(user, timeout=timeout) as client:
            barrier.wait()
            started = time.monotonic()
            try:
                results[n] = client.post(
                    f"/v1/sessions/{session}/messages", json={"message": message}
                )
            except httpx.TimeoutException:
                results[n] = httpx.Response(CLIENT_TIMEOUT, json={"error": {"code": "timeout"}})
            except httpx.HTTPError as exc:  # counted as a failure, not a crashed thread
                results[n] = httpx.Response(599, json={"error": {"code": type(exc).__name__}})
            spans[n] = (started, time.monotonic())

    threads = [
        threading.Thread(target=call, args=(n, session, message))
        for n, (session, message) in enumerate(targets)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def warm(local_stack: LocalStackProcess, containers: int) -> None:
    """Start up to ``containers`` agent containers before the test's own calls: as many
    health checks at once, which find no idle container while the first cold starts
    run, so each starts one (as Lambda scales out under a burst)."""
    barrier = threading.Barrier(containers)

    def one() -> None:
        barrier.wait()
        with local_stack.client(None, timeout=SERVER_BOUND * 4) as client:
            client.get("/health")

    threads = [threading.Thread(target=one) for _ in range(containers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most of the (start, end) intervals that were open at the same moment (one
    ending exactly when another starts does not overlap it)."""
    edges = sorted([(end, -1) for _, end in spans] + [(start, 1) for start, _ in spans])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def server_answered(local_stack: LocalStackProcess, path: str) -> int:
    """How many requests to ``path`` the local stack has answered (its request log)."""
    # the containers write to the same pipe: a line of theirs cut by the pipe's atomic
    # size can carry several of the stack's request lines
    return sum(line.count(f"POST {path} -> ") for line in list(local_stack.output))


def test_fifty_concurrent_calls_on_one_session_lose_and_interleave_nothing(
    local_stack: LocalStackProcess, fake_llm: FakeLLM, record
) -> None:
    user = "rel-carol"
    path = "/v1/sessions/race/messages"
    answered_before = server_answered(local_stack, path)
    warm(local_stack, CALLS)  # a container for each call, as Lambda would have scaled to
    # the winner's model call is held until every other call has been answered, so all
    # of them run while its lease is taken: the gate, not the order of arrival, decides
    fake_llm.held_release.clear()
    results: dict[int, httpx.Response] = {}
    firing = threading.Thread(
        target=lambda: results.update(
            fire(local_stack, user, [("race", f"[held] race message {n}") for n in range(CALLS)])
        )
    )
    firing.start()
    in_flight = lambda: server_answered(local_stack, path) - answered_before >= CALLS - 1  # noqa: E731
    try:
        wait_for(in_flight, SERVER_BOUND * 4)
    finally:
        fake_llm.held_release.set()
    firing.join()
    statuses = Counter(r.status_code for r in results.values())
    ok = {n: r.json() for n, r in results.items() if r.status_code == 200}
    busy = [r for r in results.values() if r.status_code == 409]
    gave_up = statuses[CLIENT_TIMEOUT]
    # a call the client gave up on still runs: read the log once the server answered all
    started = time.monotonic()
    wait_for(lambda: server_answered(local_stack, path) - answered_before >= CALLS, 600)
    waited = time.monotonic() - started

    with local_stack.client(user) as client:
        log = client.get("/v1/sessions/race/messages", params={"limit": 500}).json()["turns"]
    logged = [t["turn"] for t in log]
    answered = sorted(body["turn"] for body in ok.values())
    lost = set(answered) - set(logged)
    unseen = set(logged) - set(answered)  # completed for a client that had given up
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

    record(
        "session-lease",
        f"{CALLS} concurrent calls on one session: answered",
        statuses[200],
        "1",
        statuses[200] == 1,
    )
    record(
        "session-lease",
        "  ... refused 409 with Retry-After",
        len(busy),
        f"the other {CALLS - len(ok) - gave_up}",
        len(busy) == CALLS - len(ok) - gave_up,
    )
    record(
        "no-lost-turn",
        f"  ... client gave up after {SERVER_BOUND * 4} s (not a server error)",
        f"{gave_up} (their turns logged: {len(unseen)}; server done {waited:.0f} s later)",
        "any; each logged at most once",
        len(unseen) <= gave_up,
    )
    record(
        "no-lost-turn", "  ... answered turns missing from the thread log", len(lost), "0", not lost
    )
    record(
        "session-lease",
        "  ... turns whose model input was not exactly the turns before",
        interleaved,
        "0",
        interleaved == 0,
    )
    server_errors = sum(v for k, v in statuses.items() if k >= 500 and k != CLIENT_TIMEOUT)
    record("no-lost-turn", "  ... 5xx", server_errors, "0", server_errors == 0)

    assert statuses[200] == 1 and statuses[200] + statuses[409] + gave_up == CALLS
    assert all(
        r.headers.get("retry-after") and r.json()["error"]["code"] == "session_busy" for r in busy
    )
    assert logged == list(range(1, len(logged) + 1))
    assert not lost and len(unseen) <= gave_up and interleaved == 0


def test_sessions_of_one_user_run_in_parallel(
    local_stack: LocalStackProcess, fake_llm: FakeLLM, record
) -> None:
    # each turn's model call waits (up to the rendezvous' timeout) for another one to be
    # in flight: turns that run side by side meet, turns run one at a time never do
    fake_llm.together.reset(size=2)
    targets = [(f"parallel-{n}", f"[together] hello from session {n}") for n in range(SESSIONS)]
    client_spans: dict[int, tuple[float, float]] = {}
    results = fire(local_stack, "rel-dave", targets, client_spans)
    answered = sum(r.status_code == 200 for r in results.values())
    # the server side: when the fake model got and answered each session's call
    messages = {message for _, message in targets}
    model_spans = [(start, end) for text, start, end in fake_llm.spans if text in messages]
    clients_at_once = most_at_once(list(client_spans.values()))
    models_at_once = most_at_once(model_spans)
    record(
        "session-lease",
        f"{SESSIONS} sessions of one user at once: answered",
        answered,
        str(SESSIONS),
        answered == SESSIONS,
    )
    record(
        "session-lease",
        "  ... most calls in flight at once: client / model (server side)",
        f"{clients_at_once} / {models_at_once}",
        ">= 2 / >= 2",
        clients_at_once >= 2 and models_at_once >= 2,
    )
    assert answered == SESSIONS
    assert len(client_spans) == SESSIONS and clients_at_once >= 2, client_spans
    # every session's turn called the model once, and two of those calls overlapped
    assert len(model_spans) == SESSIONS, fake_llm.spans[-SESSIONS:]
    assert models_at_once >= 2 and fake_llm.together.peak >= 2, (model_spans, fake_llm.together)


def test_concurrent_turns_of_one_user_are_all_counted_in_their_usage(
    local_stack: LocalStackProcess, record
) -> None:
    targets = [(f"usage-{n}", f"counted turn {n}") for n in range(SESSIONS)]
    results = fire(local_stack, "rel-erin", targets)
    answered = [r.json() for r in results.values() if r.status_code == 200]
    with local_stack.client("rel-erin") as client:
        report = client.get("/v1/usage", params={"days": 1}).json()["totals"]
    agent = report["by_role"]["agent"]
    spent = sum(t["usage"]["by_role"]["agent"]["input_tokens"] for t in answered)
    spent_out = sum(t["usage"]["by_role"]["agent"]["output_tokens"] for t in answered)
    exact = (report["turns"], agent["input_tokens"], agent["output_tokens"]) == (
        len(answered),
        spent,
        spent_out,
    )
    record(
        "usage-exact",
        f"{SESSIONS} concurrent turns of one user: turns and agent tokens counted / answered",
        f"{report['turns']} turns, {agent['input_tokens']} tokens / {len(answered)}, {spent}",
        "equal",
        exact,
    )
    assert len(answered) == SESSIONS and exact, (report, len(answered), spent)
