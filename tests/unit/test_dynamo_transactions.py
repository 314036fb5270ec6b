"""The state table's transactions against DynamoDB's answers that moto never gives: a
transaction cancelled only by a conflicting one (another turn of the same user on its
day's usage item) is tried again after a jittered pause; a cancellation in which a
condition failed is the caller's answer, never retried. botocore's Stubber plays
DynamoDB (no AWS, no network)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from agent_harness.aws.state import DynamoStateTable
from agent_harness.errors import StoreError
from agent_harness.ids import User
from agent_harness.ports import AdmissionCheck, UsageDelta

ALICE = User.from_id("alice")
CHECK = AdmissionCheck("2026-11-30", 0, True, 5, 0, None)


def cancelled(*codes: str, item: dict[str, Any] | None = None) -> dict[str, Any]:
    """A TransactionCanceledException's modeled fields, one reason per item."""
    reasons: list[dict[str, Any]] = [{"Code": code} for code in codes]
    if item is not None:
        reasons[0]["Item"] = item
    return {"CancellationReasons": reasons}


def table(*answers: dict[str, Any] | None) -> tuple[DynamoStateTable, Stubber, list[float]]:
    """A table whose TransactWriteItems answers ``answers`` in turn: None succeeds, a
    dict of reasons cancels."""
    client = boto3.client(
        "dynamodb",
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )
    stub = Stubber(client)
    for answer in answers:
        if answer is None:
            stub.add_response("transact_write_items", {}, {"TransactItems": ANY})
        else:
            stub.add_client_error(
                "transact_write_items",
                service_error_code="TransactionCanceledException",
                service_message="Transaction cancelled",
                expected_params={"TransactItems": ANY},
                modeled_fields=answer,
            )
    stub.activate()
    slept: list[float] = []
    return DynamoStateTable(client, "state", sleep=slept.append), stub, slept


def lease(state: DynamoStateTable) -> Any:
    return state.lease_and_admit(ALICE, "s1", "me", 1_000_000, 60_000, expected=None, check=CHECK)


def test_a_transaction_cancelled_only_by_conflicts_is_tried_again_after_a_pause() -> None:
    conflict = cancelled("None", "None", "TransactionConflict")
    state, stub, slept = table(conflict, conflict, None)
    assert lease(state).taken
    stub.assert_no_pending_responses()
    assert len(slept) == 2 and all(0 <= s <= 0.04 for s in slept)


def test_conflicts_that_outlast_the_tries_are_a_store_error() -> None:
    conflict = cancelled("TransactionConflict", "None", "None")
    state, stub, slept = table(*[conflict] * 5)
    with pytest.raises(StoreError):
        lease(state)
    stub.assert_no_pending_responses()
    assert len(slept) == 4


def test_a_failed_condition_is_answered_at_once_never_retried() -> None:
    held = {"pk": {"S": "U#alice"}, "turn": {"N": "3"}}
    state, stub, slept = table(cancelled("ConditionalCheckFailed", "None", "None", item=held))
    found = lease(state)
    assert found.session_changed and found.session is not None and found.session.turn == 3
    assert slept == []
    stub.assert_no_pending_responses()


def test_a_commit_with_usage_waits_out_a_conflict_on_the_day_item() -> None:
    state, stub, slept = table(cancelled("None", "TransactionConflict"), None)
    usage = UsageDelta("2026-11-30", tokens={"agent": (10, 2)}, turns=1)
    state.commit_turn(ALICE, "s1", "me", 1, "2026-11-30T09:00:00Z", usage=usage)
    stub.assert_no_pending_responses()
    assert len(slept) == 1
