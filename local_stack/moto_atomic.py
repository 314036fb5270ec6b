"""One lock around moto's DynamoDB requests, so each is atomic as in DynamoDB.

moto applies a request in Python, sharing its tables between the server's threads with no
lock. A TransactWriteItems first deep-copies every table it touches and, if any of its
parts fails, puts the copies back whole: a transaction that failed while another one
committed undid that commit (the local stack lost a concurrent turn's usage this way),
and the copy itself fails when another thread changes the table meanwhile (a 500). Real
DynamoDB makes each request atomic and isolated; serialising moto's requests in this
process gives the same, at the price of parallelism the local stack does not need.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["serialise_dynamodb"]

_LOCK = threading.RLock()


def serialise_dynamodb() -> None:
    """Make every DynamoDB request of moto's server in this process run alone (idempotent)."""
    from moto.dynamodb.responses import DynamoHandler

    if getattr(DynamoHandler.call_action, "serialised", False):
        return
    original = DynamoHandler.call_action

    def call_action(self: DynamoHandler) -> Any:
        with _LOCK:
            return original(self)

    call_action.serialised = True  # type: ignore[attr-defined]
    DynamoHandler.call_action = call_action  # type: ignore[method-assign]
