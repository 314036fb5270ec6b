"""The other half of docs/design.md#session-lease: a crashed holder's session lease blocks
the session only until it expires (lease length > function timeout), then the next call
takes it over. On moto with the real agent_call handler."""

from __future__ import annotations

import time

from tests.conftest import load_event
from tests.integration.conftest import Stack

FN = "AgentCallFunction"


def test_a_crashed_holders_lease_is_taken_over_after_it_expires(stack: Stack, record) -> None:
    app = stack.handler(FN)
    event = load_event("agent_call_post_message.json")  # alice, session trip-planning
    now_ms = int(time.time() * 1000)
    key = {"pk": {"S": "U#alice"}, "sk": {"S": "S#trip-planning"}}

    def crashed_holder(expires_ms: int) -> None:
        stack.clients["dynamodb"].put_item(
            TableName=stack.table,
            Item={
                **key,
                "turn": {"N": "0"},
                "lease_owner": {"S": "a-crashed-container"},
                "lease_expires_ms": {"N": str(expires_ms)},
            },
        )

    crashed_holder(now_ms + 45_000)  # died 15 s into a 60 s lease
    held = stack.invoke(app, event, FN)
    crashed_holder(now_ms - 1)  # its lease has run out
    taken = stack.invoke(app, event, FN)

    retry_after = int(held["headers"]["Retry-After"])
    record(
        "session-lease",
        "session lease of a crashed holder, still valid: answer",
        held["statusCode"],
        "409 with Retry-After <= 5 s (the expected wait, not the lease's 45 s left)",
        held["statusCode"] == 409 and retry_after <= 5,
    )
    record(
        "session-lease",
        "  ... once expired: answer",
        taken["statusCode"],
        "200 (taken over)",
        taken["statusCode"] == 200,
    )
    assert held["statusCode"] == 409 and 1 <= retry_after <= 5
    assert taken["statusCode"] == 200
    item = stack.clients["dynamodb"].get_item(TableName=stack.table, Key=key)["Item"]
    assert item["turn"]["N"] == "1" and "lease_owner" not in item
