"""The memory jobs' items of the state table: flush cursors, the flush throttle gate and
its due marks (``FlushTable``); the user's consolidation lease, watermark and due mark
(``ConsolidationTable``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from agent_harness.aws.dynamo import DynamoItems, is_condition_failure, n_, plain, s_, user_state
from agent_harness.errors import ConflictError, StoreError
from agent_harness.keys import EXPIRY_SK, due_shard, session_id_of, user_key_of, user_pk
from agent_harness.ports import DueUser, FlushDue, GateClaim

if TYPE_CHECKING:
    from agent_harness.ids import User
    from agent_harness.ports import UserState

__all__ = ["DynamoConsolidationTable", "DynamoFlushTable"]


class DynamoFlushTable(DynamoItems):
    """``FlushTable`` on the state table."""

    def advance_flush_cursor(
        self, user: User, session_id: str, to_turn: int, now_iso: str, *, clear_due: bool = False
    ) -> bool:
        """Move the flush cursor forward to ``to_turn``; never backwards. True if moved.
        ``clear_due`` also removes the session's tail mark (its turns are all flushed)."""
        return self._advance(user, session_id, "flush_cursor", to_turn, now_iso, clear_due)

    def advance_index_cursor(self, user: User, session_id: str, to_turn: int) -> bool:
        """The thread-search index cursor, same rule."""
        return self._advance(user, session_id, "index_cursor", to_turn, None)

    def _advance(
        self,
        user: User,
        session_id: str,
        cursor: str,
        to_turn: int,
        now_iso: str | None,
        clear_due: bool = False,
    ) -> bool:
        # last_flush_at is for people reading the item; the throttle uses flush_gate_ms
        update = f"SET {cursor} = :t" + (", last_flush_at = :now" if now_iso else "")
        if clear_due:
            update += " REMOVE due_shard, due_at"
        values = {":t": n_(to_turn)} | ({":now": s_(now_iso)} if now_iso else {})
        try:
            self._update(
                Key=self._session_key(user, session_id),
                UpdateExpression=update,
                ConditionExpression=f"attribute_not_exists({cursor}) OR {cursor} < :t",
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                return False
            raise StoreError(f"advancing the {cursor.replace('_', ' ')} failed") from exc
        return True

    def claim_flush_gate(self, user: User, session_id: str, now_ms: int, gap_ms: int) -> GateClaim:
        """Claim the session's flush slot if the last claim is ``gap_ms`` old (the first
        claim always wins). A conditional write, so two replicas never both win."""
        try:
            resp = self._update(
                Key=self._session_key(user, session_id),
                UpdateExpression="SET flush_gate_ms = :now",
                ConditionExpression=(
                    "attribute_exists(pk) AND "
                    "(attribute_not_exists(flush_gate_ms) OR flush_gate_ms <= :cutoff)"
                ),
                ExpressionAttributeValues={":now": n_(now_ms), ":cutoff": n_(now_ms - gap_ms)},
                ReturnValues="UPDATED_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                held = plain(exc.response.get("Item")).get("flush_gate_ms")
                return GateClaim(False, now_ms, held_ms=int(held) if held is not None else None)
            raise StoreError("claiming the flush gate failed") from exc
        previous = plain(resp.get("Attributes")).get("flush_gate_ms")
        return GateClaim(True, now_ms, previous_ms=int(previous) if previous is not None else None)

    def release_flush_gate(self, user: User, session_id: str, claim: GateClaim) -> None:
        """Give back a claim whose flush failed, so its retry is not throttled by it."""
        if claim.previous_ms is None:
            update, values = "REMOVE flush_gate_ms", {":mine": n_(claim.claimed_ms)}
        else:
            update = "SET flush_gate_ms = :prev"
            values = {":mine": n_(claim.claimed_ms), ":prev": n_(claim.previous_ms)}
        try:
            self._update(
                Key=self._session_key(user, session_id),
                UpdateExpression=update,
                ConditionExpression="flush_gate_ms = :mine",
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if not is_condition_failure(exc):
                raise StoreError("releasing the flush gate failed") from exc

    def mark_flush_due(self, user: User, session_id: str, due_at_iso: str, shards: int) -> None:
        try:
            self._update(
                Key=self._session_key(user, session_id),
                UpdateExpression="SET due_shard = :shard, due_at = :due, user_id = :uid",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues={
                    ":shard": s_(due_shard(user.key, shards, "flush")),
                    ":due": s_(due_at_iso),
                    ":uid": s_(user.id),
                },
            )
        except ClientError as exc:
            if not is_condition_failure(exc):  # the session is gone (forgotten)
                raise StoreError("marking the session's flush due failed") from exc

    def clear_flush_due(self, user: User, session_id: str) -> None:
        """Remove a tail mark that no flush will clear (nothing left, or no extraction)."""
        try:
            self._update(
                Key=self._session_key(user, session_id),
                UpdateExpression="REMOVE due_shard, due_at",
                ConditionExpression="attribute_exists(pk)",
            )
        except ClientError as exc:
            if not is_condition_failure(exc):
                raise StoreError("clearing the session's flush mark failed") from exc

    def query_flush_due(self, shard: str, now_iso: str) -> list[FlushDue]:
        return [
            FlushDue(
                user_id=str(item["user_id"]),
                session_id=session_id_of(str(item["sk"])),
                turn=int(item.get("turn", 0)),
                due_at=str(item["due_at"]),
            )
            for item in self._query_due_index(
                "due_shard = :s AND due_at <= :now", {":s": s_(shard), ":now": s_(now_iso)}
            )
        ]


class DynamoConsolidationTable(DynamoItems):
    """``ConsolidationTable`` on the state table."""

    def mark_expiry_due(self, user: User, due_at_iso: str, shards: int) -> None:
        try:
            self._ddb.put_item(
                TableName=self._table,
                Item={
                    "pk": s_(user_pk(user.key)),
                    "sk": s_(EXPIRY_SK),
                    "user_id": s_(user.id),
                    "due_shard": s_(due_shard(user.key, shards, "expire")),
                    "due_at": s_(due_at_iso),
                },
            )
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("marking the user's next expiry failed") from exc

    def clear_expiry_due(self, user: User) -> None:
        try:
            self._ddb.delete_item(
                TableName=self._table, Key={"pk": s_(user_pk(user.key)), "sk": s_(EXPIRY_SK)}
            )
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("clearing the user's expiry mark failed") from exc

    def query_expiry_due(self, shard: str, now_iso: str) -> list[DueUser]:
        return [
            DueUser(user_key_of(str(item["pk"])), str(item["due_at"]), None)
            for item in self._query_due_index(
                "due_shard = :s AND due_at <= :now", {":s": s_(shard), ":now": s_(now_iso)}
            )
        ]

    def mark_consolidation_due(self, user: User, now_iso: str, shards: int) -> None:
        try:
            self._update(
                Key=self._user_key(user),
                UpdateExpression=(
                    "SET user_id = :uid, due_shard = :shard, due_at = if_not_exists(due_at, :now) "
                    "ADD due_seq :one"
                ),
                ExpressionAttributeValues={
                    ":uid": s_(user.id),
                    ":shard": s_(due_shard(user.key, shards)),
                    ":now": s_(now_iso),
                    ":one": n_(1),
                },
            )
        except ClientError as exc:
            raise StoreError("marking the user due failed") from exc

    def get_user(self, user: User) -> UserState:
        try:
            resp = self._ddb.get_item(
                TableName=self._table, Key=self._user_key(user), ConsistentRead=True
            )
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("reading the user failed") from exc
        return user_state(plain(resp.get("Item")))

    def acquire_consolidation_lease(
        self, user: User, owner: str, now_ms: int, lease_ms: int
    ) -> UserState:
        try:
            item = self._acquire(self._user_key(user), "cons", user, owner, now_ms, lease_ms)
        except ClientError as exc:
            if is_condition_failure(exc):
                raise ConflictError("a consolidation of this user is already running") from exc
            raise StoreError("acquiring the consolidation lease failed") from exc
        return user_state(item)

    def complete_consolidation(
        self, user: User, owner: str, consumed: dict[str, int], due_seq: int, now_iso: str
    ) -> bool:
        """Advance the watermark and release the lease; clear the due mark unless a flush
        marked the user again meanwhile. Returns True when the due mark was cleared."""
        values = {
            ":c": {"M": {day: n_(n) for day, n in consumed.items()}},
            ":now": s_(now_iso),
            ":o": s_(owner),
        }
        base = (
            "SET ledger_consumed = :c, last_consolidated_at = :now "
            "REMOVE cons_owner, cons_expires_ms, cons_failures, cons_failed_at, cons_error"
        )
        try:
            self._update(
                Key=self._user_key(user),
                UpdateExpression=base + ", due_shard, due_at",
                ConditionExpression=(
                    "cons_owner = :o AND (attribute_not_exists(due_seq) OR due_seq = :seq)"
                ),
                ExpressionAttributeValues={**values, ":seq": n_(due_seq)},
            )
            return True
        except ClientError as exc:
            if not is_condition_failure(exc):
                raise StoreError("completing the consolidation failed") from exc
        try:
            self._update(
                Key=self._user_key(user),
                UpdateExpression=base,
                ConditionExpression="cons_owner = :o",
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                raise ConflictError("the consolidation lease was lost") from exc
            raise StoreError("completing the consolidation failed") from exc
        return False

    def release_consolidation_lease(self, user: User, owner: str) -> None:
        self._release(self._user_key(user), "cons", owner, "consolidation")

    def fail_consolidation(
        self, user: User, owner: str, error: str, now_iso: str, retry_at_iso: str, shards: int
    ) -> None:
        try:
            self._update(
                Key=self._user_key(user),
                UpdateExpression=(
                    "SET cons_failed_at = :now, cons_error = :e, user_id = :uid, "
                    "due_shard = :shard, due_at = :retry "
                    "ADD cons_failures :one REMOVE cons_owner, cons_expires_ms"
                ),
                ConditionExpression="cons_owner = :o",
                ExpressionAttributeValues={
                    ":now": s_(now_iso),
                    ":e": s_(error[:1000]),
                    ":uid": s_(user.id),
                    ":shard": s_(due_shard(user.key, shards)),
                    ":retry": s_(retry_at_iso),
                    ":one": n_(1),
                    ":o": s_(owner),
                },
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                return  # the lease was lost: the run that holds it records its own outcome
            raise StoreError("recording the failed consolidation failed") from exc

    def query_due(self, shard: str) -> list[DueUser]:
        return [
            DueUser(
                user_key=user_key_of(str(item["pk"])),
                due_at=str(item.get("due_at", "")),
                last_consolidated_at=item.get("last_consolidated_at"),
            )
            for item in self._query_due_index("due_shard = :s", {":s": s_(shard)})
        ]

    def abandon_consolidation(self, user: User, owner: str) -> bool:
        """Remove a user item that only our lease created (a job for a user with nothing,
        e.g. one forgotten since it was queued), so no trace is left behind."""
        try:
            self._ddb.delete_item(
                TableName=self._table,
                Key=self._user_key(user),
                ConditionExpression=(
                    "cons_owner = :o AND attribute_not_exists(due_seq) "
                    "AND attribute_not_exists(ledger_consumed) "
                    "AND attribute_not_exists(last_consolidated_at)"
                ),
                ExpressionAttributeValues={":o": s_(owner)},
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                return False
            raise StoreError("removing an empty user item failed") from exc
        except BotoCoreError as exc:
            raise StoreError("removing an empty user item failed") from exc
        return True
