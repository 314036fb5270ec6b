"""The session items of the state table (the agent's hot path): the lease that serialises
calls on one (user, session), the turn counter, and the pause mark of a turn awaiting the
caller's tool results (docs/design.md#session-lease). A turn's admission, commit and
pause write the user's usage item (``aws/usage_items.py``) in the same transaction.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from agent_harness.aws.dynamo import DynamoItems, is_condition_failure, n_, plain, s_, session_state
from agent_harness.aws.place_items import place_item, place_key, place_of
from agent_harness.aws.usage_items import (
    LIMITS,
    admission_of,
    admission_update,
    budget_of,
    usage_update,
)
from agent_harness.errors import ConflictError, SessionBusyError, SessionNotFoundError, StoreError
from agent_harness.keys import BUDGET_SK, user_pk
from agent_harness.ports import (
    AdmissionCheck,
    Budget,
    LeaseAdmission,
    check_day,
    check_usage,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agent_harness.ids import User
    from agent_harness.ports import PauseMark, Place, SessionState, UsageDelta

__all__ = ["DynamoSessionTable"]


def _session_pin(expected: SessionState | None) -> tuple[str, dict[str, Any]]:
    """A condition true only when the session item is as ``expected`` in every attribute
    a turn reads (turn, pause mark, flush gate); None: no item."""
    if expected is None:
        return "attribute_not_exists(pk)", {}
    turn = "(attribute_not_exists(turn) OR turn = :t)" if expected.turn == 0 else "turn = :t"
    parts, values = ["attribute_exists(pk)", turn], {":t": n_(expected.turn)}
    if expected.pause is None:
        parts.append("attribute_not_exists(pause_id)")
    else:
        parts.append("pause_id = :pid")
        values[":pid"] = s_(expected.pause.pause_id)
    if expected.flush_gate_ms is None:
        parts.append("attribute_not_exists(flush_gate_ms)")
    else:
        parts.append("flush_gate_ms = :gate")
        values[":gate"] = n_(expected.flush_gate_ms)
    return " AND ".join(parts), values


def _override_pin(override: Budget | None) -> dict[str, Any]:
    """A ConditionCheck (but the table and key) true only when the stored override is
    ``override`` (None: no item)."""
    if override is None:
        return {"ConditionExpression": "attribute_not_exists(pk)"}
    parts, values, names = ["attribute_exists(pk)"], {}, {}
    for limit in LIMITS:
        value, names[f"#{limit}"] = getattr(override, limit), limit
        if value is None:
            parts.append(f"attribute_not_exists(#{limit})")
        else:
            parts.append(f"#{limit} = :{limit}")
            values[f":{limit}"] = n_(value)
    check: dict[str, Any] = {"ConditionExpression": " AND ".join(parts)}
    check["ExpressionAttributeNames"] = names
    if values:
        check["ExpressionAttributeValues"] = values
    return check


def _busy(session_id: str, held: dict[str, Any], now_ms: int) -> SessionBusyError:
    remaining_ms = int(held.get("lease_expires_ms", now_ms + 1000)) - now_ms
    return SessionBusyError(
        f"session {session_id} is busy with another call",
        retry_after=max(1, math.ceil(remaining_ms / 1000)),
    )


def _refusal(
    session_id: str, now_ms: int, reasons: list[dict[str, Any]], exc: ClientError
) -> LeaseAdmission:
    """What a cancelled lease_and_admit found, most decisive first: a changed override
    (the limits were wrong), the budget's refusal, a held lease, a changed session. A
    cancellation with no failed condition (conflicts, after ``_transact``'s tries) is a
    store error."""
    failed = [r.get("Code") == "ConditionalCheckFailed" for r in reasons]
    found = [plain(r.get("Item")) for r in reasons]
    if len(failed) > 1 and failed[1]:
        return LeaseAdmission(taken=False, override_changed=True, override=budget_of(found[1]))
    if len(failed) > 2 and failed[2]:
        return LeaseAdmission(taken=False, refused=admission_of(found[2], admitted=False))
    if failed[0]:
        held = found[0]
        if held.get("lease_owner") is not None and int(held.get("lease_expires_ms", 0)) >= now_ms:
            raise _busy(session_id, held, now_ms) from exc
        state = session_state(held) if held else None
        return LeaseAdmission(taken=False, session_changed=True, session=state)
    # no condition failed: conflicts outlasted ``_transact``'s tries, or another error
    raise StoreError("taking the session lease failed") from exc


class DynamoSessionTable(DynamoItems):
    """``SessionTable`` on the state table."""

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
            if is_condition_failure(exc):
                held = plain(exc.response.get("Item"))
                if not held:
                    raise SessionNotFoundError(f"session {session_id} has no turns") from exc
                raise _busy(session_id, held, now_ms) from exc
            raise StoreError("acquiring the session lease failed") from exc
        return session_state(item)

    def lease_and_admit(
        self,
        user: User,
        session_id: str,
        owner: str,
        now_ms: int,
        lease_ms: int,
        *,
        expected: SessionState | None,
        check: AdmissionCheck,
    ) -> LeaseAdmission:
        """One TransactWriteItems: the lease update conditioned on the session being as
        ``expected`` (every attribute a turn reads), a ConditionCheck of the override
        and, under limits, the admission update; each returns its item when it refuses."""
        check_day(check.day)
        free = "(attribute_not_exists(lease_owner) OR lease_expires_ms < :now)"
        pin, values = _session_pin(expected)
        lease = {
            "Key": self._session_key(user, session_id),
            "UpdateExpression": (
                "SET lease_owner = :o, lease_expires_ms = :exp, "
                "user_id = if_not_exists(user_id, :uid)"
            ),
            "ConditionExpression": f"{free} AND {pin}",
            "ExpressionAttributeValues": values
            | {":o": s_(owner), ":exp": n_(now_ms + lease_ms), ":now": n_(now_ms)}
            | {":uid": s_(user.id)},
        }
        budget = {"Key": {"pk": s_(user_pk(user.key)), "sk": s_(BUDGET_SK)}}
        items = [{"Update": lease}, {"ConditionCheck": budget | _override_pin(check.override)}]
        if check.admits:
            spend = {"Key": self._usage_key(user, check.day), **admission_update(check)}
            items.append({"Update": spend})
        for item in items:  # every part answers a refusal with the item it found
            for op in item.values():
                op |= {"TableName": self._table, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
        try:
            self._transact(items)
        except ClientError as exc:
            reasons = exc.response.get("CancellationReasons")
            if not reasons:
                raise StoreError("taking the session lease failed") from exc
            return _refusal(session_id, now_ms, reasons, exc)
        except BotoCoreError as exc:
            raise StoreError("taking the session lease failed") from exc
        return LeaseAdmission(taken=True)

    def commit_turn(
        self,
        user: User,
        session_id: str,
        owner: str,
        turn: int,
        now_iso: str,
        *,
        usage: UsageDelta | None = None,
        places: Sequence[Place] = (),
    ) -> None:
        """Record ``turn`` as the session's last turn, clear any pause mark and release the
        lease, atomically. With a non-empty ``usage`` or ``places``, one
        TransactWriteItems does that, adds the usage to the user's day and puts the
        places, so all happen or none (still one request; botocore's ClientRequestToken
        makes a retried transaction count once)."""
        if usage is not None:
            check_usage(usage)
        session = {
            "Key": self._session_key(user, session_id),
            "UpdateExpression": (
                "SET turn = :t, updated_at = :now "
                "REMOVE lease_owner, lease_expires_ms, pause_id, pause_turn, paused_at_ms"
            ),
            "ConditionExpression": "lease_owner = :o",
            "ExpressionAttributeValues": {":t": n_(turn), ":now": s_(now_iso), ":o": s_(owner)},
        }
        self._end_lease(user, session_id, session, usage, places, "committing the turn")

    def pause_turn(
        self,
        user: User,
        session_id: str,
        owner: str,
        mark: PauseMark,
        turn: int,
        *,
        usage: UsageDelta | None = None,
        places: Sequence[Place] = (),
    ) -> None:
        """Mark the session's turn paused for client tool results, record ``turn`` as its
        last completed turn, and release the lease, in one conditional write (with the
        pause's spend or places, one transaction): the pause is committed by this write."""
        if usage is not None:
            check_usage(usage)
        session = {
            "Key": self._session_key(user, session_id),
            "UpdateExpression": (
                "SET pause_id = :p, pause_turn = :pt, paused_at_ms = :at, turn = :t "
                "REMOVE lease_owner, lease_expires_ms"
            ),
            "ConditionExpression": "lease_owner = :o",
            "ExpressionAttributeValues": {
                ":p": s_(mark.pause_id),
                ":pt": n_(mark.turn),
                ":t": n_(turn),
                ":at": n_(mark.paused_at_ms),
                ":o": s_(owner),
            },
        }
        self._end_lease(user, session_id, session, usage, places, "pausing the turn")

    def _end_lease(
        self,
        user: User,
        session_id: str,
        session: dict[str, Any],
        usage: UsageDelta | None,
        places: Sequence[Place],
        what: str,
    ) -> None:
        """The session's update conditioned on the lease, alone or in one transaction with
        ``usage`` and ``places`` (all happen or none; botocore's ClientRequestToken makes
        a retried transaction count once)."""
        lost = f"the lease on session {session_id} was lost"
        spent = usage is not None and not usage.empty()
        if not spent and not places:
            try:
                self._update(**session)
            except ClientError as exc:
                if is_condition_failure(exc):
                    raise ConflictError(lost) from exc
                raise StoreError(f"{what} failed") from exc
            return
        items: list[dict[str, Any]] = [{"Update": {"TableName": self._table, **session}}]
        if usage is not None and spent:
            spend = {"Key": self._usage_key(user, usage.day), **usage_update(usage)}
            items.append({"Update": {"TableName": self._table, **spend}})
        items += [{"Put": {"TableName": self._table, "Item": place_item(user, p)}} for p in places]
        try:
            self._transact(items)
        except ClientError as exc:
            reasons = exc.response.get("CancellationReasons") or [{}]
            if reasons[0].get("Code") == "ConditionalCheckFailed":
                raise ConflictError(lost) from exc
            raise StoreError(f"{what} failed") from exc
        except BotoCoreError as exc:
            raise StoreError(f"{what} failed") from exc

    def release_session_lease(self, user: User, session_id: str, owner: str) -> None:
        self._release(self._session_key(user, session_id), "lease", owner, "session")

    def get_place(self, user: User, key: str) -> Place | None:
        try:
            resp = self._ddb.get_item(
                TableName=self._table, Key=place_key(user, key), ConsistentRead=True
            )
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("reading the conversation's place failed") from exc
        item = resp.get("Item")
        return place_of(key, item) if item else None

    def delete_place(self, user: User, key: str) -> bool:
        try:
            resp = self._ddb.delete_item(
                TableName=self._table, Key=place_key(user, key), ReturnValues="ALL_OLD"
            )
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("deleting the conversation's place failed") from exc
        return bool(resp.get("Attributes"))

    def get_session(self, user: User, session_id: str) -> SessionState | None:
        try:
            resp = self._ddb.get_item(
                TableName=self._table, Key=self._session_key(user, session_id), ConsistentRead=True
            )
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("reading the session failed") from exc
        item = resp.get("Item")
        return session_state(plain(item)) if item else None
