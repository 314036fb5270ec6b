"""The state table (DynamoDB): leases, counters, cursors and watermarks, all by
conditional writes, and the users' usage counters. One table; its item kinds (every key: ``keys``):

    pk = U#<user key>  sk = S#<session>   session: turn counter, flush and index cursors,
                                          lease, flush throttle gate, flush tail mark,
                                          pause mark (a turn awaiting client tool results)
    pk = U#<user key>  sk = USER          user: consolidation lease, watermark, due mark
    pk = U#<user key>  sk = D#<day>       usage: tokens and calls by role, turns, total
    pk = G#<scope>     sk = M#<user key>  a shared scope's member (``aws/member_items.py``)

The "due" marks are a sparse GSI (``due-index``: ``due_shard`` / ``due_at``): a flush
puts the user in one of N ``due#k`` shards; the scheduled tick queries the shards
(never scans) and fans out one consolidation job per due user. ``due_seq`` counts
marks, so a consolidation clears the mark only if no flush marked the user again while
it ran. A throttled flush puts its session in a ``flush#k`` shard with the time its
gate reopens, so the tick can send the session's trailing turns a flush of their own.

Each purpose has its own key: the flush throttle gate is ``flush_gate_ms`` on the
session item, the consolidation lease and gap live on the user item (the reference
shared one throttle key between the two).

The consolidation watermark is ``ledger_consumed``: a map of ledger day -> bytes already
merged into MEMORY.md. Ledgers are append-only, so "content newer than the watermark"
is exactly ``ledger[consumed:]``; appends that land during a run are never lost.

Usage counters (``aws/usage_items.py``) are added to with ``ADD``, by a turn's commit in the
same transaction and by the memory jobs after each model call. The operator's
``top_users`` is the table's one Scan (not a hot path).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from agent_harness.aws.dynamo import s_
from agent_harness.aws.member_items import DynamoMembershipTable
from agent_harness.aws.memory_items import DynamoConsolidationTable, DynamoFlushTable
from agent_harness.aws.sessions import DynamoSessionTable
from agent_harness.aws.usage_items import DynamoUsageTable
from agent_harness.errors import StoreError
from agent_harness.keys import user_pk

if TYPE_CHECKING:
    from agent_harness.ids import User

__all__ = ["DynamoStateTable"]


class DynamoStateTable(
    DynamoSessionTable,
    DynamoFlushTable,
    DynamoConsolidationTable,
    DynamoUsageTable,
    DynamoMembershipTable,
):
    """``StateTable`` on one DynamoDB table; the boto3 client is injected."""

    def purge_user(self, user: User) -> int:
        """Delete every item of the user (sessions, leases, cursors, gates, watermark,
        due marks, usage days, memberships): the scopes' side of each membership first,
        then one Query on the partition, BatchWriteItem in 25s."""
        self._forget_memberships(user)
        keys: list[dict[str, Any]] = []
        try:
            pages = self._ddb.get_paginator("query").paginate(
                TableName=self._table,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": s_(user_pk(user.key))},
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
                    self._sleep(min(1.0, 0.05 * 2**attempt))
                else:
                    raise StoreError("deleting the user's items failed: throttled")
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("deleting the user's items failed") from exc
        return len(keys)
