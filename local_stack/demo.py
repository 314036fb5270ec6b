"""`make demo`: two sessions against the local stack; the second is answered from what
the first said. Uses a running `make dev` on 127.0.0.1:3000, or starts one for itself.

    session 1 --facts--> ledger (post-turn flush) --consolidate--> MEMORY.md
    session 2 --question--> reply from MEMORY.md (injected as reference data)
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from typing import Any

import httpx

from local_stack.stack import LocalStack, LocalStackConfig

PORT = int(os.environ.get("LOCAL_HTTP_PORT", 3000))
SESSION_1 = [
    "Hi! Please remember that I prefer window seats, and that I'm allergic to peanuts.",
    "We decided to fly to Lisbon in March for the product launch.",
]
SESSION_2 = ["Which seat do I prefer?", "Am I allergic to anything?"]


def wait_for(check: Any, what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.5)
    raise SystemExit(f"timed out waiting for {what}")


def section(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 70 - len(title)))


def run(base_url: str) -> int:
    user = f"demo-{uuid.uuid4().hex[:8]}"
    client = httpx.Client(base_url=base_url, headers={"X-User-Id": user}, timeout=60)

    section(f"session 1 (user {user})")
    for text in SESSION_1:
        reply = client.post("/v1/sessions/planning/messages", json={"message": text}).json()
        print(f"you:   {text}\nagent: {reply['reply']}")
        print(f"       [turn {reply['turn']}, flush {reply['flush']}]")

    def ledger_has_everything() -> str | None:
        days = client.get("/v1/memory/ledger").json()["days"]
        text = "".join(client.get(f"/v1/memory/ledger/{d['day']}").json()["content"] for d in days)
        return text if text.count("## Flush") >= 2 else None

    ledger = wait_for(ledger_has_everything, "the post-turn flushes")
    section("daily ledger (layer 1), written by the post-turn job")
    print(ledger.strip())

    client.post("/v1/memory/consolidate")
    memory = wait_for(
        lambda: (doc := client.get("/v1/memory").json())["content"] and doc, "consolidation"
    )
    section("MEMORY.md (layer 2), written by consolidation")
    print(memory["content"].strip())

    section("session 2: a new session, same user")
    answered = 0
    for text, fact in zip(SESSION_2, ("window seats", "peanuts"), strict=True):
        reply = client.post("/v1/sessions/booking/messages", json={"message": text}).json()
        print(f"you:   {text}\nagent: {reply['reply']}")
        print(f"       [MEMORY.md injected: {reply['usage']['memory_tokens']} tokens]")
        answered += fact in reply["reply"]

    ok = answered == len(SESSION_2)
    section("result")
    print(
        "session 2 was answered from what session 1 said"
        if ok
        else "session 2 did NOT recall session 1 (with a real model, check its answers above)"
    )
    return 0 if ok or os.environ.get("HARNESS_MODEL", "offline") != "offline" else 1


def main() -> int:
    base_url = f"http://127.0.0.1:{PORT}"
    try:
        httpx.get(f"{base_url}/health", timeout=2).raise_for_status()
        print(f"using the local stack at {base_url}")
        return run(base_url)
    except httpx.HTTPError:
        pass
    print(
        f"no local stack at {base_url}: starting one for this demo (`make dev` keeps one running)"
    )
    stack = LocalStack(LocalStackConfig(http_port=PORT, schedule_seconds=5, verbose=False))
    stack.start()
    try:
        return run(base_url)
    finally:
        stack.stop()


if __name__ == "__main__":
    sys.exit(main())
