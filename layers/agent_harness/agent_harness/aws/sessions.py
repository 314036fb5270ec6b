"""The session items of the state table (the agent's hot path): the lease that serialises
calls on one (user, session), the turn counter, and the pause mark of a turn awaiting the
caller's tool results (docs/design.md#session-lease)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from agent_harness.aws.dynamo import DynamoItems, is_condition_failure, n_, plain, s_, session_state
from agent_harness.errors import ConflictError, SessionBusyError, SessionNotFoundError, StoreError

if TYPE_CHECKING:
    from agent_harness.ids import User
    from agent_harness.ports import PauseMark, SessionState

__all__ = ["DynamoSessionTable"]


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
                remaining_ms = int(held.get("lease_expires_ms", now_ms + 1000)) - now_ms
                retry_after = max(1, math.ceil(remaining_ms / 1000))
                raise SessionBusyError(
                    f"session {session_id} is busy with another call", retry_after=retry_after
                ) from exc
            raise StoreError("acquiring the session lease failed") from exc
        return session_state(item)

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
                ExpressionAttributeValues={":t": n_(turn), ":now": s_(now_iso), ":o": s_(owner)},
            )
        except ClientError as exc:
            if is_condition_failure(exc):
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
                    ":p": s_(mark.pause_id),
                    ":pt": n_(mark.turn),
                    ":t": n_(turn),
                    ":at": n_(mark.paused_at_ms),
                    ":o": s_(owner),
                },
            )
        except ClientError as exc:
            if is_condition_failure(exc):
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
        return session_state(plain(item)) if item else None
