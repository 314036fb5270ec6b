"""What the DynamoDB adapters share: attribute values, item decoding, the generic
conditional lease and the due-index query."""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import BotoCoreError, ClientError

from agent_harness.errors import StoreError
from agent_harness.keys import DUE_INDEX, USER_SK, session_sk, usage_sk, user_pk
from agent_harness.ports import PauseMark, SessionState, UserState

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_harness.ids import User

__all__ = [
    "DynamoItems",
    "is_condition_failure",
    "n_",
    "plain",
    "s_",
    "session_state",
    "user_state",
]

_deserializer = TypeDeserializer()
#: tries of a transaction that only conflicting transactions cancel
CONFLICT_TRIES = 5


def n_(value: int) -> dict[str, str]:
    return {"N": str(value)}


def s_(value: str) -> dict[str, str]:
    return {"S": value}


def plain(item: dict[str, Any] | None) -> dict[str, Any]:
    return {k: _deserializer.deserialize(v) for k, v in (item or {}).items()}


def session_state(item: dict[str, Any]) -> SessionState:
    pause = None
    if "pause_id" in item:
        pause = PauseMark(
            str(item["pause_id"]), int(item.get("pause_turn", 0)), int(item.get("paused_at_ms", 0))
        )
    return SessionState(
        turn=int(item.get("turn", 0)),
        flush_cursor=int(item.get("flush_cursor", 0)),
        index_cursor=int(item.get("index_cursor", 0)),
        flush_gate_ms=int(item["flush_gate_ms"]) if "flush_gate_ms" in item else None,
        pause=pause,
    )


def user_state(item: dict[str, Any]) -> UserState:
    return UserState(
        consumed={k: int(v) for k, v in (item.get("ledger_consumed") or {}).items()},
        due_seq=int(item.get("due_seq", 0)),
        is_due="due_shard" in item,
        last_consolidated_at=item.get("last_consolidated_at"),
        failures=int(item.get("cons_failures", 0)),
        failed_at=item.get("cons_failed_at"),
        last_error=item.get("cons_error"),
        retry_at=item.get("due_at") if item.get("cons_failures") else None,
    )


def is_condition_failure(exc: ClientError) -> bool:
    code: str | None = exc.response.get("Error", {}).get("Code")
    return code == "ConditionalCheckFailedException"


class DynamoItems:
    """The client, the table and the conditional primitives every adapter here uses."""

    def __init__(
        self, dynamodb_client: Any, table_name: str, *, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self._ddb = dynamodb_client
        self._table = table_name
        self._sleep = sleep

    @staticmethod
    def _session_key(user: User, session_id: str) -> dict[str, Any]:
        return {"pk": s_(user_pk(user.key)), "sk": s_(session_sk(session_id))}

    @staticmethod
    def _user_key(user: User) -> dict[str, Any]:
        return {"pk": s_(user_pk(user.key)), "sk": s_(USER_SK)}

    @staticmethod
    def _usage_key(user: User, day: str) -> dict[str, Any]:
        return {"pk": s_(user_pk(user.key)), "sk": s_(usage_sk(day))}

    def _transact(self, items: list[dict[str, Any]]) -> None:
        """One TransactWriteItems, tried again (jittered backoff) while it is cancelled
        only because another transaction held one of its items: nothing was written and
        no condition failed. A user's concurrent turns meet on their day's usage item."""
        for attempt in range(CONFLICT_TRIES):
            try:
                self._ddb.transact_write_items(TransactItems=items)
                return
            except ClientError as exc:
                reasons = exc.response.get("CancellationReasons") or []
                codes = {r.get("Code") for r in reasons} - {None, "None"}
                if codes != {"TransactionConflict"} or attempt == CONFLICT_TRIES - 1:
                    raise
                self._sleep(random.uniform(0, 0.02 * 2**attempt))

    def _update(self, **kwargs: Any) -> dict[str, Any]:
        try:
            response: dict[str, Any] = self._ddb.update_item(TableName=self._table, **kwargs)
        except BotoCoreError as exc:
            raise StoreError("state table update failed") from exc
        return response

    def _acquire(
        self,
        key: dict[str, Any],
        prefix: str,
        user: User,
        owner: str,
        now_ms: int,
        lease_ms: int,
        *,
        must_exist: bool = False,
    ) -> dict[str, Any]:
        """Take the lease ``<prefix>_owner``/``<prefix>_expires_ms`` of one item if it is
        free or expired (and, with ``must_exist``, only if the item exists) and return the
        item; ClientError when another holder has it or the item is missing."""
        free = f"(attribute_not_exists({prefix}_owner) OR {prefix}_expires_ms < :now)"
        resp = self._update(
            Key=key,
            UpdateExpression=(
                f"SET {prefix}_owner = :o, {prefix}_expires_ms = :exp, "
                "user_id = if_not_exists(user_id, :uid)"
            ),
            ConditionExpression=f"attribute_exists(pk) AND {free}" if must_exist else free,
            ExpressionAttributeValues={
                ":o": s_(owner),
                ":exp": n_(now_ms + lease_ms),
                ":now": n_(now_ms),
                ":uid": s_(user.id),
            },
            ReturnValues="ALL_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        return plain(resp.get("Attributes"))

    def _release(self, key: dict[str, Any], prefix: str, owner: str, what: str) -> None:
        """Give a lease back if we still hold it (an expired one may be someone else's)."""
        try:
            self._update(
                Key=key,
                UpdateExpression=f"REMOVE {prefix}_owner, {prefix}_expires_ms",
                ConditionExpression=f"{prefix}_owner = :o",
                ExpressionAttributeValues={":o": s_(owner)},
            )
        except ClientError as exc:
            if not is_condition_failure(exc):
                raise StoreError(f"releasing the {what} lease failed") from exc

    def _query_due_index(self, condition: str, values: dict[str, Any]) -> list[dict[str, Any]]:
        """Every item of one shard of the sparse due-index (all pages), as plain dicts."""
        try:
            pages = self._ddb.get_paginator("query").paginate(
                TableName=self._table,
                IndexName=DUE_INDEX,
                KeyConditionExpression=condition,
                ExpressionAttributeValues=values,
            )
            return [plain(raw) for page in pages for raw in page.get("Items", [])]
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("querying the due index failed") from exc
