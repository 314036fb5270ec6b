"""docs/design.md#flush-once under SQS's at-least-once delivery: every post-turn job delivered three
times, in a shuffled order across sessions, through the real memory_flush handler on
moto. Facts land once, thread-search segments hold each message once, cursors never
move backwards. Run twice: with Powertools Idempotency (the first line), and with its
records gone before every delivery (the cursor and source lines alone)."""

from __future__ import annotations

import json
import random

import pytest

from agent_harness.jobs import PostTurnJob
from agent_harness.memory.jobs.flush import run_post_turn_job
from tests.integration.conftest import Stack
from tests.integration.test_memory_handlers import post

AGENT, FLUSH = "AgentCallFunction", "MemoryFlushFunction"
SESSIONS, TURNS, COPIES = 3, 4, 3


def cursors(stack: Stack) -> dict[str, int]:
    return {
        item["sk"]["S"]: int(item.get("flush_cursor", {"N": "0"})["N"])
        for item in stack.items()
        if item["sk"]["S"].startswith("S#")
    }


@pytest.mark.parametrize("line", ["idempotency records", "cursor and source lines only"])
def test_every_job_three_times_out_of_order_writes_everything_once(
    stack: Stack, record, line: str
) -> None:
    agent, flush = stack.handler(AGENT), stack.handler(FLUSH)
    facts = []
    for s in range(SESSIONS):
        for n in range(TURNS):
            fact = f"I like fruit number {s}{n}"
            facts.append(fact)
            post(stack, agent, f"orchard-{s}", f"Remember that {fact}.")
    messages = []
    while batch := stack.receive("FlushQueue"):
        messages += batch
        for m in batch:
            stack.clients["sqs"].delete_message(
                QueueUrl=stack.resolver.refs["FlushQueue"], ReceiptHandle=m["ReceiptHandle"]
            )
    assert len(messages) == SESSIONS * TURNS
    deliveries = messages * COPIES
    random.Random(7).shuffle(deliveries)

    backwards = 0
    seen = cursors(stack)
    for message in deliveries:
        if line == "idempotency records":
            result = stack.invoke(flush, stack.sqs_event("FlushQueue", [message]), FLUSH)
            assert result == {"batchItemFailures": []}
        else:
            run_post_turn_job(flush.runtime, PostTurnJob.model_validate_json(message["Body"]))
        now = cursors(stack)
        backwards += sum(now[k] < seen.get(k, 0) for k in now)
        seen = now

    ledger = "".join(
        stack.text(k) or "" for k in stack.object_keys() if "/memory/" in k and k.endswith(".md")
    )
    counts = {fact: ledger.count(fact) for fact in facts}
    duplicated = sum(c > 1 for c in counts.values())
    lost = sum(c == 0 for c in counts.values())
    entries = [
        json.loads(line)
        for key in stack.object_keys()
        if "/index/threads/" in key
        for line in (stack.text(key) or "").splitlines()
    ]
    keys = [(e["s"], e["t"], e["i"]) for e in entries]
    segment_duplicates = len(keys) - len(set(keys))

    what = f"{len(deliveries)} deliveries ({SESSIONS * TURNS} jobs x {COPIES}, shuffled), {line}"
    record("flush-once", what + ": facts lost", lost, "0", lost == 0)
    record(
        "flush-once", "  ... facts in the ledger more than once", duplicated, "0", duplicated == 0
    )
    record(
        "flush-once",
        "  ... duplicate thread-search entries",
        segment_duplicates,
        "0",
        segment_duplicates == 0,
    )
    record(
        "flush-once", "  ... times a flush cursor moved backwards", backwards, "0", backwards == 0
    )

    assert lost == duplicated == segment_duplicates == backwards == 0
    assert len(entries) == SESSIONS * TURNS * 2  # the user message and the reply of each
    assert set(cursors(stack).values()) == {TURNS}
