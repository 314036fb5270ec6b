"""The membership items of the state table: who may use each shared memory scope.

A membership is two items written in one transaction, so neither side exists without
the other: ``pk = G#<scope>, sk = M#<user key>`` (the scope's members, one Query; the
check a request makes, one consistent GetItem) and ``pk = U#<user key>, sk = G#<scope>``
(the user's memberships, found by forgetting the user with the rest of their partition).
``pk = SCOPES, sk = G#<scope>`` lists the scopes that have had a member, and
``pk = U#<user key>, sk = W#<scope>`` the scopes whose memory names the user as a writer
(``since``: the first time), which forgetting them visits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from botocore.exceptions import BotoCoreError, ClientError

from agent_harness.aws.dynamo import DynamoItems, plain, s_
from agent_harness.errors import StoreError
from agent_harness.ids import User
from agent_harness.keys import (
    SCOPES_PK,
    member_sk,
    scope_of,
    scope_pk,
    user_pk,
    wrote_scope_of,
    wrote_sk,
)
from agent_harness.ports import Member

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["DynamoMembershipTable", "member_of"]


def member_of(item: dict[str, Any]) -> Member | None:
    """A membership from either of its items (plain values), or None."""
    if not item or item.get("role") not in ("member", "maintainer"):
        return None
    return Member(
        scope=str(item["scope"]),
        user_id=User.from_key(str(item["user_key"])).id,
        role=item["role"],
        added_at=str(item.get("added_at", "")),
    )


class DynamoMembershipTable(DynamoItems):
    """``MembershipTable`` on the state table."""

    def _keys(self, scope: str, user: User) -> tuple[dict[str, Any], dict[str, Any]]:
        return (
            {"pk": s_(scope_pk(scope)), "sk": s_(member_sk(user.key))},
            {"pk": s_(user_pk(user.key)), "sk": s_(scope_pk(scope))},
        )

    def put_member(
        self, scope: str, user: User, role: Literal["member", "maintainer"], at: str
    ) -> None:
        """One TransactWriteItems: both sides of the membership and the scope's listing."""
        forward, backward = self._keys(scope, user)
        body = {
            "scope": s_(scope),
            "user_key": s_(user.key),
            "role": s_(role),
            "added_at": s_(at),
        }
        listing = {"pk": s_(SCOPES_PK), "sk": s_(scope_pk(scope)), "scope": s_(scope)}
        try:
            self._transact(
                [
                    {"Put": {"TableName": self._table, "Item": forward | body}},
                    {"Put": {"TableName": self._table, "Item": backward | body}},
                    {"Put": {"TableName": self._table, "Item": listing}},
                ]
            )
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("writing the membership failed") from exc

    def delete_member(self, scope: str, user: User) -> bool:
        """One TransactWriteItems deleting both sides, on condition the membership
        exists (False, nothing written, when it does not)."""
        forward, backward = self._keys(scope, user)
        try:
            self._transact(
                [
                    {
                        "Delete": {
                            "TableName": self._table,
                            "Key": forward,
                            "ConditionExpression": "attribute_exists(pk)",
                        }
                    },
                    {"Delete": {"TableName": self._table, "Key": backward}},
                ]
            )
        except ClientError as exc:
            reasons = exc.response.get("CancellationReasons") or []
            if any(r.get("Code") == "ConditionalCheckFailed" for r in reasons):
                return False
            raise StoreError("removing the membership failed") from exc
        except BotoCoreError as exc:
            raise StoreError("removing the membership failed") from exc
        return True

    def get_member(self, scope: str, user: User) -> Member | None:
        """One consistent GetItem: a removal counts on the very next request."""
        forward, _ = self._keys(scope, user)
        try:
            resp = self._ddb.get_item(TableName=self._table, Key=forward, ConsistentRead=True)
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("reading the membership failed") from exc
        return member_of(plain(resp.get("Item")))

    def _query(self, pk: str, prefix: str) -> Iterator[dict[str, Any]]:
        try:
            pages = self._ddb.get_paginator("query").paginate(
                TableName=self._table,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
                ExpressionAttributeValues={":pk": s_(pk), ":p": s_(prefix)},
                ConsistentRead=True,
            )
            for page in pages:
                for item in page.get("Items", []):
                    yield plain(item)
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("reading memberships failed") from exc

    def list_members(self, scope: str) -> list[Member]:
        found = (member_of(i) for i in self._query(scope_pk(scope), member_sk("")))
        return [m for m in found if m is not None]

    def list_scopes(self) -> list[str]:
        return [scope_of(str(i["sk"])) for i in self._query(SCOPES_PK, scope_pk(""))]

    def scopes_of(self, user: User) -> list[Member]:
        found = (member_of(i) for i in self._query(user_pk(user.key), scope_pk("")))
        return [m for m in found if m is not None]

    def note_writer(self, scope: str, user: User, at: str) -> None:
        """One UpdateItem in the user's partition (gone with it), the first time kept."""
        key = {"pk": s_(user_pk(user.key)), "sk": s_(wrote_sk(scope))}
        try:
            self._ddb.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression="SET since = if_not_exists(since, :at), #s = :scope",
                ExpressionAttributeNames={"#s": "scope"},
                ExpressionAttributeValues={":at": s_(at), ":scope": s_(scope)},
            )
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("recording the scope's writer failed") from exc

    def written_by(self, user: User) -> dict[str, str]:
        items = self._query(user_pk(user.key), wrote_sk(""))
        return {wrote_scope_of(str(i["sk"])): str(i.get("since", "")) for i in items}

    def _forget_memberships(self, user: User) -> None:
        """The scopes' side of the user's memberships (their own partition's items go
        with the rest of it)."""
        for member in self.scopes_of(user):
            key = {"pk": s_(scope_pk(member.scope)), "sk": s_(member_sk(user.key))}
            try:
                self._ddb.delete_item(TableName=self._table, Key=key)
            except (ClientError, BotoCoreError) as exc:
                raise StoreError("forgetting the user's memberships failed") from exc
