"""Many users at once against the local stack, with the interpreter switching threads
every 10 microseconds (which changes no semantics, and makes any state two requests share
show at once): every request is answered with its own route, body and session, and no
user's words reach another user's memory. Lambda runs one invocation per container at a
time and shares nothing between containers; the local stack must too."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from local_stack.process import start_local_stack
from tests.e2e.conftest import LocalStackProcess, stop_stack, wait_for

USERS = 16
ROUNDS = 4
REQUESTS_A_ROUND = 10
BUCKET = "agent-harness-local-workspace"
#: a user's marker: ``mk<user>x<round>q``, one token for search, unique per request
MARKER = re.compile(r"mk(\d\d)x(\d+)q")


def marker(user: int, round_: int) -> str:
    return f"mk{user:02d}x{round_}q"


def user_id(user: int) -> str:
    return f"crowd-{user:02d}"


@pytest.fixture(scope="module")
def racy_stack() -> Iterator[LocalStackProcess]:
    stack = start_local_stack(
        {"HARNESS_MODEL": "offline", "LOCAL_SWITCH_INTERVAL": "0.00001"}, schedule_seconds=2
    )
    yield stack
    stop_stack(stack)


@dataclass
class Tally:
    """What went wrong, by kind, with the first few examples of each."""

    wrong: dict[str, list[str]] = field(default_factory=dict)
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, example: str) -> None:
        with self.lock:
            self.wrong.setdefault(kind, []).append(example[:300])

    def count(self) -> None:
        with self.lock:
            self.requests += 1


def foreign_markers(text: str, user: int) -> set[str]:
    return {m.group(0) for m in MARKER.finditer(text) if int(m.group(1)) != user}


def one_user(stack: LocalStackProcess, user: int, tally: Tally) -> None:
    """Turns, saves, an import, reads of several routes and a consolidation, each round;
    each answer checked against the request it answers."""
    today = datetime.now(UTC).strftime("%Y-%m-%d")

    def call(method: str, path: str, status: int, keys: set[str], **kwargs: Any) -> dict[str, Any]:
        tally.count()
        answer = client.request(method, path, **kwargs)
        what = f"{user_id(user)} {method} {path} -> {answer.status_code} {answer.text}"
        if answer.status_code != status:
            tally.add("unexpected status", what)
            return {}
        try:
            body = answer.json()
        except ValueError:
            tally.add("not JSON", what)
            return {}
        if not isinstance(body, dict) or not keys <= set(body):
            tally.add("another route's answer", what)
        if foreign := foreign_markers(answer.text, user):
            tally.add("another user's words", f"{sorted(foreign)} in {what}")
        return dict(body)

    turns: dict[str, int] = {}
    with stack.client(user_id(user), timeout=120) as client:
        for round_ in range(ROUNDS):
            mark = marker(user, round_)
            saved = call(
                "POST",
                "/v1/memory/save",
                200,
                {"saved", "held"},
                json={"content": f"- The user keeps a plant called {mark}."},
            )
            if saved and saved.get("saved") != 1:
                tally.add("another request's body", f"{user_id(user)} save -> {saved}")
            session = f"talk{round_ % 2}"
            turns[session] = turns.get(session, 0) + 1
            turn = call(
                "POST",
                f"/v1/sessions/{session}/messages",
                200,
                {"session_id", "turn", "reply", "usage"},
                json={"message": f"Remember that I painted my bike {mark} green."},
            )
            if turn and (got := (turn.get("session_id"), turn.get("turn"))) != (
                session,
                turns[session],
            ):
                tally.add("another session", f"{user_id(user)} {session}/{turns[session]}: {got}")
            imported = call(
                "POST",
                f"/v1/sessions/imported{round_}/import",
                200,
                {"session_id", "first_turn", "last_turn"},
                json={
                    "messages": [
                        {"role": "user", "content": f"I collect {mark} stamps."},
                        {"role": "assistant", "content": "Noted."},
                    ]
                },
            )
            if imported and imported.get("session_id") != f"imported{round_}":
                tally.add("another session", f"{user_id(user)} import -> {imported}")
            call("GET", "/v1/memory", 200, {"content", "etag"})
            ledger = call("GET", f"/v1/memory/ledger/{today}", 200, {"day", "content"})
            if ledger and (ledger.get("day") != today or mark not in str(ledger.get("content"))):
                tally.add("another request's answer", f"{user_id(user)} ledger: {ledger}")
            call("GET", "/v1/memory/ledger", 200, {"days"})
            found = call(
                "POST", "/v1/memory/search", 200, {"hits"}, json={"query": mark, "limit": 5}
            )
            if found and not any(mark in str(hit) for hit in found.get("hits", [])):
                tally.add("another request's answer", f"{user_id(user)} search {mark}: {found}")
            history = call("GET", f"/v1/sessions/{session}/messages", 200, {"session_id", "turns"})
            if history and history.get("session_id") != session:
                tally.add("another session", f"{user_id(user)} history of {session}: {history}")
            call("POST", "/v1/memory/consolidate", 202, set())
            call("GET", "/v1/usage", 200, {"totals", "days"}, params={"days": 1})


def stored_by_user(stack: LocalStackProcess) -> dict[str, str]:
    """Every current object under users/crowd-*/, as text, by key."""
    s3 = stack.s3()
    texts: dict[str, str] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="users/crowd-"):
        for item in page.get("Contents", []):
            body = s3.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read()
            texts[item["Key"]] = body.decode("utf-8", "replace")
    return texts


def test_concurrent_users_are_each_answered_with_their_own_request_and_memory(
    racy_stack: LocalStackProcess,
) -> None:
    tally = Tally()
    threads = [
        threading.Thread(target=one_user, args=(racy_stack, user, tally)) for user in range(USERS)
    ]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    assert tally.requests == USERS * ROUNDS * REQUESTS_A_ROUND, tally.requests
    assert not tally.wrong, (
        f"{sum(map(len, tally.wrong.values()))} of {tally.requests} requests went wrong "
        f"in {elapsed:.0f} s: {tally.wrong}"
    )

    # the post-turn jobs and consolidations finish: every user's MEMORY.md holds a marker
    def consolidated() -> dict[str, str] | None:
        texts = stored_by_user(racy_stack)
        ready = {k.split("/")[1] for k in texts if k.endswith("/MEMORY.md")}
        return texts if len(ready) == USERS else None

    texts = wait_for(consolidated, timeout=180, interval=2)
    # no user's words in another user's MEMORY.md, ledgers, sessions or indexes
    leaks = {
        key: sorted(foreign)
        for key, text in texts.items()
        if (foreign := foreign_markers(text, int(key.split("/")[1].removeprefix("crowd-"))))
    }
    assert not leaks, leaks
    for user in range(USERS):
        prefix = f"users/{user_id(user)}/"
        mine = "".join(text for key, text in texts.items() if key.startswith(prefix))
        assert all(marker(user, r) in mine for r in range(ROUNDS)), user
    assert any(k.endswith("/MEMORY.md") for k in texts) and any("/memory/" in k for k in texts)
    assert httpx.get(f"{racy_stack.url}/health").status_code == 200
