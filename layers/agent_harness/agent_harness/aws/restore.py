"""Bring users' memory back into a stack from a bucket and a table it kept, for operators
(docs/operations.md#restore-after-a-stack-replacement).

The template keeps the workspace bucket and the state table when a stack is deleted or
replaced (``DeletionPolicy: Retain``). A stack created again has a new, empty bucket
and table; ``restore`` copies into them:

    S3        every key under users/ and scopes/ (or one user's prefix): the version that
              was current at ``as_of`` (default: now), server-side (CopyObject), so memory
              text never passes through the operator's machine; keys deleted by then stay
              deleted. The old versions stay in the kept bucket.
    DynamoDB  every item (or one user's partition) of a table: the kept one, or the one
              point-in-time recovery restored from it (RestoreTableToPointInTime)

Idempotent: run again, the same objects and items are written again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from agent_harness.errors import StoreError
from agent_harness.keys import user_pk

if TYPE_CHECKING:
    from datetime import datetime

    from agent_harness.ids import User

__all__ = ["Restored", "restore"]

#: the prefixes that hold memory; anything else in a bucket is not ours to copy
_ROOTS = ("users/", "scopes/")


@dataclass(frozen=True)
class Restored:
    objects: int
    items: int


def restore(
    s3: Any,
    ddb: Any,
    *,
    from_bucket: str,
    to_bucket: str,
    from_table: str,
    to_table: str,
    as_of: datetime | None = None,
    user: User | None = None,
) -> Restored:
    """Copy the memory of every user (or ``user`` alone) from the kept bucket and table
    into this stack's; returns what was copied."""
    try:
        objects = _copy_objects(s3, from_bucket, to_bucket, as_of, user)
        items = _copy_items(ddb, from_table, to_table, user)
    except (ClientError, BotoCoreError) as exc:
        raise StoreError(f"restoring failed: {exc}") from exc
    return Restored(objects, items)


def _copy_objects(
    s3: Any, source: str, target: str, as_of: datetime | None, user: User | None
) -> int:
    prefixes = [f"users/{user.key}/"] if user is not None else list(_ROOTS)
    copied = 0
    for prefix in prefixes:
        for key, version in _current_versions(s3, source, prefix, as_of).items():
            s3.copy_object(
                Bucket=target,
                Key=key,
                CopySource={"Bucket": source, "Key": key, "VersionId": version},
                MetadataDirective="COPY",
            )
            copied += 1
    return copied


def _current_versions(s3: Any, bucket: str, prefix: str, as_of: datetime | None) -> dict[str, str]:
    """Each key's version id as it stood at ``as_of`` (latest by default); a key whose
    newest entry by then is a delete marker, or that did not exist yet, is left out."""
    newest: dict[str, tuple[datetime, str | None]] = {}
    pages = s3.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix)
    for page in pages:
        entries = [(v, v["VersionId"]) for v in page.get("Versions", [])]
        entries += [(m, None) for m in page.get("DeleteMarkers", [])]
        for entry, version in entries:
            at = entry["LastModified"]
            if as_of is not None and at > as_of:
                continue
            if as_of is None and not entry.get("IsLatest"):
                continue
            known = newest.get(entry["Key"])
            if known is None or at >= known[0]:
                newest[entry["Key"]] = (at, version)
    return {key: version for key, (_, version) in newest.items() if version is not None}


def _copy_items(ddb: Any, source: str, target: str, user: User | None) -> int:
    if user is not None:
        paginator = ddb.get_paginator("query")
        pages = paginator.paginate(
            TableName=source,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": user_pk(user.key)}},
            ConsistentRead=True,
        )
    else:
        pages = ddb.get_paginator("scan").paginate(TableName=source, ConsistentRead=True)
    copied = 0
    for page in pages:
        items = page.get("Items", [])
        for start in range(0, len(items), 25):
            requests = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
            _write_all(ddb, target, requests)
            copied += len(requests)
    return copied


def _write_all(ddb: Any, table: str, requests: list[dict[str, Any]]) -> None:
    """BatchWriteItem until nothing is left unprocessed (a few tries, then an error)."""
    pending = {table: requests}
    for _ in range(8):
        answer = ddb.batch_write_item(RequestItems=pending)
        pending = answer.get("UnprocessedItems") or {}
        if not pending:
            return
    raise StoreError("restoring items failed: the table kept refusing some of them")
