"""The usage items of the state table: each user's per-day spend counters and the
admissions that budgets make of them, and the operator's budget override.

A usage item (``pk = U#<user key>``, ``sk = D#<day>``) holds ``<role>_in``,
``<role>_out`` and ``<role>_calls`` for each role of ``ROLES``, ``turns``, ``imported``,
``total`` (the running sum of every token added, so the item can be ranked without
adding it up) and ``day``; the budgets' counts ``admitted`` (turns admitted),
``turn_tokens`` and ``reserved`` (committed tokens plus running turns' estimates).
Every count is a DynamoDB ``ADD``, so concurrent writers never lose an update. A turn's
commit and pause add to it in the same transaction as the session item
(``aws/sessions.py``), with ``usage_update``.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from agent_harness.aws.dynamo import DynamoItems, is_condition_failure, n_, plain, s_
from agent_harness.errors import StoreError
from agent_harness.keys import BUDGET_SK, usage_day_of, usage_sk, user_key_of, user_pk
from agent_harness.ports import (
    ROLES,
    Admission,
    AdmissionCheck,
    Budget,
    DayUsage,
    ImportCheck,
    check_day,
    check_usage,
)

if TYPE_CHECKING:
    from agent_harness.ids import User
    from agent_harness.ports import UsageDelta

__all__ = [
    "LIMITS",
    "DynamoUsageTable",
    "admission_of",
    "admission_update",
    "budget_of",
    "day_usage",
    "usage_update",
]

#: every counter attribute of a usage item but ``total``
_COUNTERS = (*(f"{r}_{c}" for r in ROLES for c in ("in", "out", "calls")), "turns", "imported")


def usage_update(delta: UsageDelta) -> dict[str, Any]:
    """The UpdateItem arguments, all but the table and key, that add ``delta`` (checked,
    not empty) to its day's item: ADD of each count it has and of its tokens to
    ``total``, and SET of ``day``. Every attribute goes by an alias (DAY is reserved)."""
    counts = {"total": sum(i + o for i, o in delta.tokens.values()), "turns": delta.turns}
    # a turn budget counts committed agent and compaction tokens, and the reservation
    # moves from this turn's estimate to its real tokens
    counts["turn_tokens"] = delta.turn_tokens
    counts["reserved"] = delta.turn_tokens - delta.released
    counts["admitted"] = delta.unadmitted
    for role, (tokens_in, tokens_out) in delta.tokens.items():
        counts[f"{role}_in"], counts[f"{role}_out"] = tokens_in, tokens_out
    for role, calls in delta.model_calls.items():
        counts[f"{role}_calls"] = calls
    added = sorted(a for a, n in counts.items() if n or a == "total")  # total: always there
    values = {f":{a}": n_(counts[a]) for a in added}
    return {
        "UpdateExpression": "SET #day = :day ADD " + ", ".join(f"#{a} :{a}" for a in added),
        "ExpressionAttributeNames": {"#day": "day"} | {f"#{a}": a for a in added},
        "ExpressionAttributeValues": {":day": s_(delta.day)} | values,
    }


def day_usage(item: dict[str, Any]) -> DayUsage:
    """A usage item (plain), every role present."""
    return DayUsage(
        day=usage_day_of(str(item["sk"])),
        tokens={r: (int(item.get(f"{r}_in", 0)), int(item.get(f"{r}_out", 0))) for r in ROLES},
        model_calls={r: int(item.get(f"{r}_calls", 0)) for r in ROLES},
        turns=int(item.get("turns", 0)),
        imported=int(item.get("imported", 0)),
    )


#: the limits of a budget override, each an attribute of its item when set
LIMITS = ("tokens", "turns", "memory_tokens")


def budget_of(item: dict[str, Any]) -> Budget | None:
    """An override item (plain) as a Budget; None for no item."""
    if not item:
        return None
    return Budget(**{k: int(item[k]) if k in item else None for k in LIMITS})


def admission_of(item: dict[str, Any], *, admitted: bool) -> Admission:
    """A usage item's admission counts (plain; {} for none)."""
    return Admission(
        admitted,
        turns=int(item.get("admitted", 0)),
        turn_tokens=int(item.get("turn_tokens", 0)),
        reserved=int(item.get("reserved", 0)),
        imported=int(item.get("imported", 0)),
    )


def admission_update(check: AdmissionCheck) -> dict[str, Any]:
    """The admission's UpdateItem arguments but the table and key: ADD ``admitted``
    (when it counts a turn) and ``reserved``, conditioned on the limits (none: none)."""
    conditions, values = [], {":est": n_(check.estimate), ":one": n_(int(check.count_turn))}
    if check.count_turn and check.turn_limit > 0:
        conditions.append("(attribute_not_exists(admitted) OR admitted < :turns)")
        values[":turns"] = n_(check.turn_limit)
    if check.token_limit > 0:
        conditions.append("(attribute_not_exists(reserved) OR reserved < :tokens)")
        values[":tokens"] = n_(check.token_limit)
    request: dict[str, Any] = {
        "UpdateExpression": "SET #day = :day ADD admitted :one, reserved :est",
        "ExpressionAttributeNames": {"#day": "day"},
        "ExpressionAttributeValues": {":day": s_(check.day), **values},
    }
    if conditions:
        request["ConditionExpression"] = " AND ".join(conditions)
    return request


class DynamoUsageTable(DynamoItems):
    """``UsageTable`` on the state table."""

    def add_usage(self, user: User, delta: UsageDelta) -> None:
        """One UpdateItem adding ``delta`` to the user's day (creating its item); an empty
        delta makes no request. A retry after an unanswered request may count twice."""
        check_usage(delta)
        if delta.empty():
            return
        try:
            self._update(Key=self._usage_key(user, delta.day), **usage_update(delta))
        except ClientError as exc:
            raise StoreError("adding the usage failed") from exc

    def usage_days(self, user: User, first_day: str, last_day: str) -> list[DayUsage]:
        """One Query of the user's partition (every page, consistent), oldest day first."""
        check_day(first_day)
        check_day(last_day)
        if first_day > last_day:
            return []
        try:
            pages = self._ddb.get_paginator("query").paginate(
                TableName=self._table,
                KeyConditionExpression="pk = :pk AND sk BETWEEN :first AND :last",
                ExpressionAttributeValues={
                    ":pk": s_(user_pk(user.key)),
                    ":first": s_(usage_sk(first_day)),
                    ":last": s_(usage_sk(last_day)),
                },
                ConsistentRead=True,
            )
            return [day_usage(plain(raw)) for page in pages for raw in page.get("Items", [])]
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("reading the usage failed") from exc

    def top_users(self, day: str, limit: int) -> list[tuple[str, DayUsage]]:
        """The ``limit`` users with the highest ``total`` on ``day``, highest first, ties
        by key. A Scan of the whole table filtered on the day's sort key (every page,
        only the usage attributes returned): it reads every item, so it is an operator's
        command, never a hot path. At fleet scale a sharded GSI keyed by day (and sorted
        by total) would replace it, as ``due-index`` does for the due marks."""
        check_day(day)
        if limit < 1:
            return []
        names = {f"#{a}": a for a in ("pk", "sk", "total", *_COUNTERS)}
        try:
            pages = self._ddb.get_paginator("scan").paginate(
                TableName=self._table,
                FilterExpression="#sk = :sk",
                ProjectionExpression=", ".join(names),
                ExpressionAttributeNames=names,
                ExpressionAttributeValues={":sk": s_(usage_sk(day))},
                ConsistentRead=True,
            )
            items = [plain(raw) for page in pages for raw in page.get("Items", [])]
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("scanning the usage failed") from exc
        top = heapq.nsmallest(
            limit, items, key=lambda i: (-int(i.get("total", 0)), user_key_of(str(i["pk"])))
        )
        return [(user_key_of(str(i["pk"])), day_usage(i)) for i in top]

    def release_admission(self, user: User, day: str, *, estimate: int, count_turn: bool) -> None:
        """One UpdateItem giving the estimate (and the admitted turn) back."""
        check_day(day)
        try:
            self._update(
                Key=self._usage_key(user, day),
                UpdateExpression="ADD admitted :turn, reserved :est",
                ExpressionAttributeValues={
                    ":turn": n_(-1 if count_turn else 0),
                    ":est": n_(-estimate),
                },
            )
        except ClientError as exc:
            raise StoreError("releasing the admission failed") from exc

    def admit_imports(self, user: User, check: ImportCheck) -> Admission | None:
        """One conditional UpdateItem adding the import's turns; when a limit refuses, one
        consistent GetItem reads the counts that refused it."""
        check_day(check.day)
        conditions, values = [], {":day": s_(check.day), ":n": n_(check.turns)}
        if check.turn_limit > 0:
            conditions.append("(attribute_not_exists(admitted) OR admitted < :turns)")
            values[":turns"] = n_(check.turn_limit)
        if check.token_limit > 0:
            conditions.append("(attribute_not_exists(reserved) OR reserved < :tokens)")
            values[":tokens"] = n_(check.token_limit)
        if check.import_limit > 0:
            conditions.append("(attribute_not_exists(imported) OR imported <= :room)")
            values[":room"] = n_(check.import_limit - check.turns)
        request: dict[str, Any] = {
            "Key": self._usage_key(user, check.day),
            "UpdateExpression": "SET #day = :day ADD imported :n",
            "ExpressionAttributeNames": {"#day": "day"},
            "ExpressionAttributeValues": values,
        }
        if conditions:
            request["ConditionExpression"] = " AND ".join(conditions)
        try:
            self._update(**request)
            return None
        except ClientError as exc:
            if not is_condition_failure(exc):
                raise StoreError("admitting the import failed") from exc
        try:
            resp = self._ddb.get_item(
                TableName=self._table, Key=self._usage_key(user, check.day), ConsistentRead=True
            )
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("reading the usage failed") from exc
        return admission_of(plain(resp.get("Item") or {}), admitted=False)

    def release_imports(self, user: User, day: str, turns: int) -> None:
        """One UpdateItem giving the imported turns back."""
        check_day(day)
        try:
            self._update(
                Key=self._usage_key(user, day),
                UpdateExpression="ADD imported :n",
                ExpressionAttributeValues={":n": n_(-turns)},
            )
        except ClientError as exc:
            raise StoreError("releasing the import failed") from exc

    def get_budget(self, user: User) -> Budget | None:
        """One consistent GetItem of the user's override."""
        try:
            resp = self._ddb.get_item(
                TableName=self._table,
                Key={"pk": s_(user_pk(user.key)), "sk": s_(BUDGET_SK)},
                ConsistentRead=True,
            )
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("reading the budget failed") from exc
        return budget_of(plain(resp.get("Item") or {}))

    def set_budget(self, user: User, budget: Budget | None) -> None:
        """One PutItem (or DeleteItem for None)."""
        key = {"pk": s_(user_pk(user.key)), "sk": s_(BUDGET_SK)}
        try:
            if budget is None:
                self._ddb.delete_item(TableName=self._table, Key=key)
                return
            limits = {k: getattr(budget, k) for k in LIMITS}
            item = key | {k: n_(v) for k, v in limits.items() if v is not None}
            self._ddb.put_item(TableName=self._table, Item=item)
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("writing the budget failed") from exc
