"""The state table (DynamoDB): leases, counters, cursors and watermarks, all by
conditional writes. One table, two item kinds:

    pk = U#<user key>  sk = S#<session>   session: turn counter, flush and index cursors,
                                          lease, flush throttle gate, flush tail mark,
                                          pause mark (a turn awaiting client tool results)
    pk = U#<user key>  sk = USER          user: consolidation lease, watermark, due mark

The "due" marks are a sparse GSI (``due-index``: ``due_shard`` / ``due_at``): a flush
puts the user in one of N ``due#k`` shards; the scheduled tick queries the shards
(never scans) and fans out one consolidation job per due user. ``due_seq`` counts
marks, so a consolidation clears the mark only if no flush marked the user again while
it ran. A throttled flush puts its session in a ``flush#k`` shard with the time its
gate reopens, so the tick can send the session's trailing turns a flush of their own.

Each purpose has its own key: the flush throttle gate is ``flush_gate_ms`` on the
session item, the consolidation lease and gap live on the user item (the reference
shared one throttle key between the two, §5 B1).

The consolidation watermark is ``ledger_consumed``: a map of ledger day -> bytes already
merged into MEMORY.md. Ledgers are append-only, so "content newer than the watermark"
is exactly ``ledger[consumed:]``; appends that land during a run are never lost.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import BotoCoreError, ClientError

from agent_harness.errors import (
    ConflictError,
    SessionBusyError,
    SessionNotFoundError,
    StoreError,
)

if TYPE_CHECKING:
    from agent_harness.ids import User

__all__ = [
    "DUE_INDEX",
    "DueUser",
    "DynamoStateTable",
    "FlushDue",
    "GateClaim",
    "PauseMark",
    "SessionState",
    "StateTable",
    "UserState",
    "due_shard",
]

DUE_INDEX = "due-index"
USER_SK = "USER"
_deserializer = TypeDeserializer()


@dataclass(frozen=True)
class PauseMark:
    """A turn paused for the caller's tool results: the commit point of the pause (the
    working context holds the turn itself under the same ``pause_id``)."""

    pause_id: str
    turn: int
    paused_at_ms: int


@dataclass(frozen=True)
class SessionState:
    turn: int = 0
    flush_cursor: int = 0
    index_cursor: int = 0
    #: the flush throttle gate: epoch ms of the last claimed flush slot
    flush_gate_ms: int | None = None
    pause: PauseMark | None = None


@dataclass(frozen=True)
class UserState:
    consumed: dict[str, int] = field(default_factory=dict)
    due_seq: int = 0
    is_due: bool = False
    last_consolidated_at: str | None = None


@dataclass(frozen=True)
class DueUser:
    user_key: str
    due_at: str
    last_consolidated_at: str | None


@dataclass(frozen=True)
class FlushDue:
    """A session whose trailing turns wait behind the flush throttle."""

    user_id: str
    session_id: str
    turn: int
    due_at: str


@dataclass(frozen=True)
class GateClaim:
    """The outcome of a throttle-gate claim: ``held_ms`` is the claim in force when
    ours lost; ``previous_ms`` is what ours replaced (to give it back on failure)."""

    claimed: bool
    claimed_ms: int
    previous_ms: int | None = None
    held_ms: int | None = None


def due_shard(user: User, shards: int, kind: str = "due") -> str:
    digest = int(hashlib.sha256(user.key.encode()).hexdigest()[:8], 16)
    return f"{kind}#{digest % shards}"


class StateTable(Protocol):
    def acquire_session_lease(
        self,
        user: User,
        session_id: str,
        owner: str,
        now_ms: int,
        lease_ms: int,
        *,
        must_exist: bool = False,
    ) -> SessionState: ...

    def commit_turn(
        self, user: User, session_id: str, owner: str, turn: int, now_iso: str
    ) -> None: ...

    def pause_turn(
        self, user: User, session_id: str, owner: str, mark: PauseMark, turn: int
    ) -> None: ...

    def release_session_lease(self, user: User, session_id: str, owner: str) -> None: ...

    def get_session(self, user: User, session_id: str) -> SessionState | None: ...

    def advance_flush_cursor(
        self, user: User, session_id: str, to_turn: int, now_iso: str, *, clear_due: bool = False
    ) -> bool: ...

    def claim_flush_gate(
        self, user: User, session_id: str, now_ms: int, gap_ms: int
    ) -> GateClaim: ...

    def release_flush_gate(self, user: User, session_id: str, claim: GateClaim) -> None: ...

    def mark_flush_due(self, user: User, session_id: str, due_at_iso: str, shards: int) -> None: ...

    def query_flush_due(self, shard: str, now_iso: str) -> list[FlushDue]: ...

    def clear_flush_due(self, user: User, session_id: str) -> None: ...

    def advance_index_cursor(self, user: User, session_id: str, to_turn: int) -> bool: ...

    def mark_consolidation_due(self, user: User, now_iso: str, shards: int) -> None: ...

    def get_user(self, user: User) -> UserState: ...

    def acquire_consolidation_lease(
        self, user: User, owner: str, now_ms: int, lease_ms: int
    ) -> UserState: ...

    def complete_consolidation(
        self, user: User, owner: str, consumed: dict[str, int], due_seq: int, now_iso: str
    ) -> bool: ...

    def release_consolidation_lease(self, user: User, owner: str) -> None: ...

    def query_due(self, shard: str) -> list[DueUser]: ...

    def abandon_consolidation(self, user: User, owner: str) -> bool: ...

    def purge_user(self, user: User) -> int: ...


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _plain(item: dict[str, Any] | None) -> dict[str, Any]:
    return {k: _deserializer.deserialize(v) for k, v in (item or {}).items()}


def _session_state(item: dict[str, Any]) -> SessionState:
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


def _user_state(item: dict[str, Any]) -> UserState:
    return UserState(
        consumed={k: int(v) for k, v in (item.get("ledger_consumed") or {}).items()},
        due_seq=int(item.get("due_seq", 0)),
        is_due="due_shard" in item,
        last_consolidated_at=item.get("last_consolidated_at"),
    )


def _is_condition_failure(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


class DynamoStateTable:
    """``StateTable`` on one DynamoDB table; the boto3 client is injected."""

    def __init__(self, dynamodb_client: Any, table_name: str) -> None:
        self._ddb = dynamodb_client
        self._table = table_name

    @staticmethod
    def _session_key(user: User, session_id: str) -> dict[str, Any]:
        return {"pk": _s(f"U#{user.key}"), "sk": _s(f"S#{session_id}")}

    @staticmethod
    def _user_key(user: User) -> dict[str, Any]:
        return {"pk": _s(f"U#{user.key}"), "sk": _s(USER_SK)}

    def _update(self, **kwargs: Any) -> dict[str, Any]:
        try:
            return self._ddb.update_item(TableName=self._table, **kwargs)  # type: ignore[no-any-return]
        except BotoCoreError as exc:
            raise StoreError("state table update failed") from exc

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
                ":o": _s(owner),
                ":exp": _n(now_ms + lease_ms),
                ":now": _n(now_ms),
                ":uid": _s(user.id),
            },
            ReturnValues="ALL_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        return _plain(resp.get("Attributes"))

    def _release(self, key: dict[str, Any], prefix: str, owner: str, what: str) -> None:
        """Give a lease back if we still hold it (an expired one may be someone else's)."""
        try:
            self._update(
                Key=key,
                UpdateExpression=f"REMOVE {prefix}_owner, {prefix}_expires_ms",
                ConditionExpression=f"{prefix}_owner = :o",
                ExpressionAttributeValues={":o": _s(owner)},
            )
        except ClientError as exc:
            if not _is_condition_failure(exc):
                raise StoreError(f"releasing the {what} lease failed") from exc

    # sessions -------------------------------------------------------------
    def acquire_session_lease(
        self,
        user: User,
        session_id: str,
        owner: str,
        now_ms: int,
        lease_ms: int,
        *,
        must_exist: bool = False,
    ) -> SessionState:
        """Take the session lease or raise ``SessionBusyError`` with a Retry-After;
        ``must_exist``: ``SessionNotFoundError`` for a session never written (no item is made)."""
        try:
            item = self._acquire(
                self._session_key(user, session_id),
                "lease",
                user,
                owner,
                now_ms,
                lease_ms,
                must_exist=must_exist,
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                held = _plain(exc.response.get("Item"))
                if not held:
                    raise SessionNotFoundError(f"session {session_id} has no turns") from exc
                remaining_ms = int(held.get("lease_expires_ms", now_ms + 1000)) - now_ms
                retry_after = max(1, math.ceil(remaining_ms / 1000))
                raise SessionBusyError(
                    f"session {session_id} is busy with another call", retry_after=retry_after
                ) from exc
            raise StoreError("acquiring the session lease failed") from exc
        return _session_state(item)

    def commit_turn(self, user: User, session_id: str, owner: str, turn: int, now_iso: str) -> None:
        """Record ``turn`` as the session's last turn, clear any pause mark and release the
        lease, atomically."""
        try:
            self._update(
                Key=self._session_key(user, session_id),
                UpdateExpression=(
                    "SET turn = :t, updated_at = :now "
                    "REMOVE lease_owner, lease_expires_ms, pause_id, pause_turn, paused_at_ms"
                ),
                ConditionExpression="lease_owner = :o",
                ExpressionAttributeValues={":t": _n(turn), ":now": _s(now_iso), ":o": _s(owner)},
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                raise ConflictError(f"the lease on session {session_id} was lost") from exc
            raise StoreError("committing the turn failed") from exc

    def pause_turn(
        self, user: User, session_id: str, owner: str, mark: PauseMark, turn: int
    ) -> None:
        """Mark the session's turn paused for client tool results, record ``turn`` as its
        last completed turn, and release the lease, in one conditional write: the pause is
        committed by this write."""
        try:
            self._update(
                Key=self._session_key(user, session_id),
                UpdateExpression=(
                    "SET pause_id = :p, pause_turn = :pt, paused_at_ms = :at, turn = :t "
                    "REMOVE lease_owner, lease_expires_ms"
                ),
                ConditionExpression="lease_owner = :o",
                ExpressionAttributeValues={
                    ":p": _s(mark.pause_id),
                    ":pt": _n(mark.turn),
                    ":t": _n(turn),
                    ":at": _n(mark.paused_at_ms),
                    ":o": _s(owner),
                },
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                raise ConflictError(f"the lease on session {session_id} was lost") from exc
            raise StoreError("pausing the turn failed") from exc

    def release_session_lease(self, user: User, session_id: str, owner: str) -> None:
        self._release(self._session_key(user, session_id), "lease", owner, "session")

    def get_session(self, user: User, session_id: str) -> SessionState | None:
        try:
            resp = self._ddb.get_item(
                TableName=self._table, Key=self._session_key(user, session_id), ConsistentRead=True
            )
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("reading the session failed") from exc
        item = resp.get("Item")
        return _session_state(_plain(item)) if item else None

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
        values = {":t": _n(to_turn)} | ({":now": _s(now_iso)} if now_iso else {})
        try:
            self._update(
                Key=self._session_key(user, session_id),
                UpdateExpression=update,
                ConditionExpression=f"attribute_not_exists({cursor}) OR {cursor} < :t",
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                return False
            raise StoreError(f"advancing the {cursor.replace('_', ' ')} failed") from exc
        return True

    # the flush throttle gate and the tail marks ---------------------------
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
                ExpressionAttributeValues={":now": _n(now_ms), ":cutoff": _n(now_ms - gap_ms)},
                ReturnValues="UPDATED_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                held = _plain(exc.response.get("Item")).get("flush_gate_ms")
                return GateClaim(False, now_ms, held_ms=int(held) if held is not None else None)
            raise StoreError("claiming the flush gate failed") from exc
        previous = _plain(resp.get("Attributes")).get("flush_gate_ms")
        return GateClaim(True, now_ms, previous_ms=int(previous) if previous is not None else None)

    def release_flush_gate(self, user: User, session_id: str, claim: GateClaim) -> None:
        """Give back a claim whose flush failed, so its retry is not throttled by it."""
        if claim.previous_ms is None:
            update, values = "REMOVE flush_gate_ms", {":mine": _n(claim.claimed_ms)}
        else:
            update = "SET flush_gate_ms = :prev"
            values = {":mine": _n(claim.claimed_ms), ":prev": _n(claim.previous_ms)}
        try:
            self._update(
                Key=self._session_key(user, session_id),
                UpdateExpression=update,
                ConditionExpression="flush_gate_ms = :mine",
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if not _is_condition_failure(exc):
                raise StoreError("releasing the flush gate failed") from exc

    def mark_flush_due(self, user: User, session_id: str, due_at_iso: str, shards: int) -> None:
        try:
            self._update(
                Key=self._session_key(user, session_id),
                UpdateExpression="SET due_shard = :shard, due_at = :due, user_id = :uid",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues={
                    ":shard": _s(due_shard(user, shards, "flush")),
                    ":due": _s(due_at_iso),
                    ":uid": _s(user.id),
                },
            )
        except ClientError as exc:
            if not _is_condition_failure(exc):  # the session is gone (forgotten)
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
            if not _is_condition_failure(exc):
                raise StoreError("clearing the session's flush mark failed") from exc

    def query_flush_due(self, shard: str, now_iso: str) -> list[FlushDue]:
        return [
            FlushDue(
                user_id=str(item["user_id"]),
                session_id=str(item["sk"]).removeprefix("S#"),
                turn=int(item.get("turn", 0)),
                due_at=str(item["due_at"]),
            )
            for item in self._query_due_index(
                "due_shard = :s AND due_at <= :now", {":s": _s(shard), ":now": _s(now_iso)}
            )
        ]

    def _query_due_index(self, condition: str, values: dict[str, Any]) -> list[dict[str, Any]]:
        """Every item of one shard of the sparse due-index (all pages), as plain dicts."""
        try:
            pages = self._ddb.get_paginator("query").paginate(
                TableName=self._table,
                IndexName=DUE_INDEX,
                KeyConditionExpression=condition,
                ExpressionAttributeValues=values,
            )
            return [_plain(raw) for page in pages for raw in page.get("Items", [])]
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("querying the due index failed") from exc

    # users ----------------------------------------------------------------
    def mark_consolidation_due(self, user: User, now_iso: str, shards: int) -> None:
        try:
            self._update(
                Key=self._user_key(user),
                UpdateExpression=(
                    "SET user_id = :uid, due_shard = :shard, due_at = if_not_exists(due_at, :now) "
                    "ADD due_seq :one"
                ),
                ExpressionAttributeValues={
                    ":uid": _s(user.id),
                    ":shard": _s(due_shard(user, shards)),
                    ":now": _s(now_iso),
                    ":one": _n(1),
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
        return _user_state(_plain(resp.get("Item")))

    def acquire_consolidation_lease(
        self, user: User, owner: str, now_ms: int, lease_ms: int
    ) -> UserState:
        try:
            item = self._acquire(self._user_key(user), "cons", user, owner, now_ms, lease_ms)
        except ClientError as exc:
            if _is_condition_failure(exc):
                raise ConflictError("a consolidation of this user is already running") from exc
            raise StoreError("acquiring the consolidation lease failed") from exc
        return _user_state(item)

    def complete_consolidation(
        self, user: User, owner: str, consumed: dict[str, int], due_seq: int, now_iso: str
    ) -> bool:
        """Advance the watermark and release the lease; clear the due mark unless a flush
        marked the user again meanwhile. Returns True when the due mark was cleared."""
        values = {
            ":c": {"M": {day: _n(n) for day, n in consumed.items()}},
            ":now": _s(now_iso),
            ":o": _s(owner),
        }
        base = (
            "SET ledger_consumed = :c, last_consolidated_at = :now "
            "REMOVE cons_owner, cons_expires_ms"
        )
        try:
            self._update(
                Key=self._user_key(user),
                UpdateExpression=base + ", due_shard, due_at",
                ConditionExpression=(
                    "cons_owner = :o AND (attribute_not_exists(due_seq) OR due_seq = :seq)"
                ),
                ExpressionAttributeValues={**values, ":seq": _n(due_seq)},
            )
            return True
        except ClientError as exc:
            if not _is_condition_failure(exc):
                raise StoreError("completing the consolidation failed") from exc
        try:
            self._update(
                Key=self._user_key(user),
                UpdateExpression=base,
                ConditionExpression="cons_owner = :o",
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                raise ConflictError("the consolidation lease was lost") from exc
            raise StoreError("completing the consolidation failed") from exc
        return False

    def release_consolidation_lease(self, user: User, owner: str) -> None:
        self._release(self._user_key(user), "cons", owner, "consolidation")

    def query_due(self, shard: str) -> list[DueUser]:
        return [
            DueUser(
                user_key=str(item["pk"]).removeprefix("U#"),
                due_at=str(item.get("due_at", "")),
                last_consolidated_at=item.get("last_consolidated_at"),
            )
            for item in self._query_due_index("due_shard = :s", {":s": _s(shard)})
        ]

    # forgetting -------------------------------------------------------------
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
                ExpressionAttributeValues={":o": _s(owner)},
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                return False
            raise StoreError("removing an empty user item failed") from exc
        except BotoCoreError as exc:
            raise StoreError("removing an empty user item failed") from exc
        return True

    def purge_user(self, user: User) -> int:
        """Delete every item of the user (sessions, leases, cursors, gates, watermark,
        due marks): one Query on the partition, BatchWriteItem in 25s."""
        keys: list[dict[str, Any]] = []
        try:
            pages = self._ddb.get_paginator("query").paginate(
                TableName=self._table,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": _s(f"U#{user.key}")},
                ProjectionExpression="pk, sk",
                ConsistentRead=True,
            )
            for page in pages:
                keys.extend({"pk": i["pk"], "sk": i["sk"]} for i in page.get("Items", []))
            for start in range(0, len(keys), 25):
                requests = [{"DeleteRequest": {"Key": k}} for k in keys[start : start + 25]]
                for attempt in range(8):
                    resp = self._ddb.batch_write_item(RequestItems={self._table: requests})
                    requests = resp.get("UnprocessedItems", {}).get(self._table, [])
                    if not requests:
                        break
                    time.sleep(min(1.0, 0.05 * 2**attempt))
                else:
                    raise StoreError("deleting the user's items failed: throttled")
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("deleting the user's items failed") from exc
        return len(keys)
