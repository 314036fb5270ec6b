"""The local stack's moto server keeps DynamoDB's promise that each request is atomic:
concurrent transactions on one item all count, and none fails for another's sake."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import boto3
import pytest
from botocore.config import Config

from local_stack.moto_atomic import serialise_dynamodb
from local_stack.process import free_port

if TYPE_CHECKING:
    from collections.abc import Iterator

THREADS, EACH = 8, 25


@pytest.fixture
def endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    serialise_dynamodb()
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def client(endpoint: str):  # type: ignore[no-untyped-def]
    return boto3.client(
        "dynamodb",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
        # no retries: a request moto failed must show, not be sent again
        config=Config(retries={"mode": "standard", "total_max_attempts": 1}),
    )


def test_concurrent_transactions_on_one_item_all_count(endpoint: str) -> None:
    ddb = client(endpoint)
    keys = [{"AttributeName": n, "KeyType": t} for n, t in (("pk", "HASH"), ("sk", "RANGE"))]
    ddb.create_table(
        TableName="state",
        KeySchema=keys,
        AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in ("pk", "sk")],
        BillingMode="PAY_PER_REQUEST",
    )

    def turns(worker: int) -> None:
        own = client(endpoint)
        for n in range(EACH):
            session = {"pk": {"S": "U#erin"}, "sk": {"S": f"S#{worker}-{n}"}}
            day = {"pk": {"S": "U#erin"}, "sk": {"S": "D#2026-12-01"}}
            one = {":one": {"N": "1"}}
            own.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": "state",
                            "Key": session,
                            "UpdateExpression": "SET turn = :one",
                            "ExpressionAttributeValues": one,
                        }
                    },
                    {
                        "Update": {
                            "TableName": "state",
                            "Key": day,
                            "UpdateExpression": "ADD turns :one",
                            "ExpressionAttributeValues": one,
                        }
                    },
                ]
            )

    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(turns, range(THREADS)))  # re-raises a request moto failed
    item = ddb.get_item(TableName="state", Key={"pk": {"S": "U#erin"}, "sk": {"S": "D#2026-12-01"}})
    assert item["Item"]["turns"] == {"N": str(THREADS * EACH)}
