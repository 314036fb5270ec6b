"""Dead-letter queues, for operators: see what failed, send it back once it can work.

A job that fails ``maxReceiveCount`` times (FlushQueue 5, ConsolidationQueue 3) moves to
its queue's DLQ. The DLQ is found from the source queue's ``RedrivePolicy``, so nothing
more is configured. ``peek`` reads without taking (visibility 0); ``redrive`` sends each
message back to its source queue (for FIFO, in its message group, with a fresh
deduplication id) and deletes it from the DLQ only after the send succeeded, so a failed
redrive loses nothing. The jobs are idempotent, so a message redriven twice is harmless.
``drop_naming`` deletes the dead letters of one user (forgetting them: a failed job names
its user and may carry their session) and puts every other one back at once.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from agent_harness.errors import NotFoundError, StoreError

__all__ = ["DeadLetter", "dead_letter_queue", "drop_naming", "peek", "redrive"]


@dataclass(frozen=True)
class DeadLetter:
    message_id: str
    body: dict[str, Any] | str
    receives: int
    group: str | None
    sent_at: str | None


def dead_letter_queue(sqs: Any, source_url: str) -> str:
    """The URL of ``source_url``'s DLQ, from its RedrivePolicy."""
    try:
        attrs = sqs.get_queue_attributes(QueueUrl=source_url, AttributeNames=["RedrivePolicy"])
        policy = json.loads(attrs.get("Attributes", {}).get("RedrivePolicy") or "{}")
        arn = policy.get("deadLetterTargetArn")
        if not arn:
            raise NotFoundError(f"{source_url} has no dead-letter queue")
        name, account = arn.rsplit(":", 1)[-1], arn.split(":")[4]
        return str(sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)["QueueUrl"])
    except (ClientError, BotoCoreError) as exc:
        raise StoreError("finding the dead-letter queue failed") from exc


def _letter(message: dict[str, Any]) -> DeadLetter:
    attrs = message.get("Attributes", {})
    try:
        body: dict[str, Any] | str = json.loads(message["Body"])
    except ValueError:
        body = message["Body"]
    return DeadLetter(
        message_id=message["MessageId"],
        body=body,
        receives=int(attrs.get("ApproximateReceiveCount", 0)),
        group=attrs.get("MessageGroupId"),
        sent_at=attrs.get("SentTimestamp"),
    )


def peek(sqs: Any, dlq_url: str, limit: int = 10) -> list[DeadLetter]:
    """Up to ``limit`` dead letters, left in place (received with visibility 0)."""
    out: list[DeadLetter] = []
    seen: set[str] = set()
    try:
        while len(out) < limit:
            resp = sqs.receive_message(
                QueueUrl=dlq_url,
                MaxNumberOfMessages=min(10, limit - len(out)),
                VisibilityTimeout=0,
                AttributeNames=["All"],
                WaitTimeSeconds=0,
            )
            fresh = [m for m in resp.get("Messages", []) if m["MessageId"] not in seen]
            if not fresh:
                break
            for message in fresh:
                seen.add(message["MessageId"])
                out.append(_letter(message))
    except (ClientError, BotoCoreError) as exc:
        raise StoreError("reading the dead-letter queue failed") from exc
    return out


def redrive(sqs: Any, dlq_url: str, source_url: str, limit: int = 1000) -> int:
    """Move up to ``limit`` dead letters back to ``source_url``; returns how many."""
    fifo = source_url.endswith(".fifo")
    moved = 0
    try:
        while moved < limit:
            resp = sqs.receive_message(
                QueueUrl=dlq_url,
                MaxNumberOfMessages=min(10, limit - moved),
                VisibilityTimeout=60,
                AttributeNames=["All"],
                WaitTimeSeconds=0,
            )
            messages = resp.get("Messages", [])
            if not messages:
                break
            for message in messages:
                send: dict[str, Any] = {"QueueUrl": source_url, "MessageBody": message["Body"]}
                if fifo:
                    group = message.get("Attributes", {}).get("MessageGroupId") or "redrive"
                    send["MessageGroupId"] = group
                    send["MessageDeduplicationId"] = f"redrive-{uuid.uuid4().hex}"
                sqs.send_message(**send)
                sqs.delete_message(QueueUrl=dlq_url, ReceiptHandle=message["ReceiptHandle"])
                moved += 1
    except (ClientError, BotoCoreError) as exc:
        raise StoreError(f"redriving dead letters failed after {moved}") from exc
    return moved


#: dead letters one forget reads at most (a DLQ this full is an incident of its own)
MAX_SCANNED = 10_000


def drop_naming(sqs: Any, dlq_url: str, user_id: str) -> int:
    """Delete every dead letter whose job names ``user_id``; each other one is made
    visible again at once (visibility 0). Returns how many were deleted."""
    dropped = 0
    seen: set[str] = set()
    try:
        while len(seen) < MAX_SCANNED:
            resp = sqs.receive_message(
                QueueUrl=dlq_url,
                MaxNumberOfMessages=10,
                VisibilityTimeout=30,
                AttributeNames=["All"],
                WaitTimeSeconds=0,
            )
            messages = resp.get("Messages", [])
            fresh = [m for m in messages if m["MessageId"] not in seen]
            for message in messages:
                body = _letter(message).body
                theirs = isinstance(body, dict) and body.get("user_id") == user_id
                handle = message["ReceiptHandle"]
                if theirs and message in fresh:
                    sqs.delete_message(QueueUrl=dlq_url, ReceiptHandle=handle)
                    dropped += 1
                else:  # another user's (or met before): visible again at once
                    sqs.change_message_visibility(
                        QueueUrl=dlq_url, ReceiptHandle=handle, VisibilityTimeout=0
                    )
            seen.update(m["MessageId"] for m in fresh)
            if not fresh:
                break
    except (ClientError, BotoCoreError) as exc:
        raise StoreError(f"dropping a user's dead letters failed after {dropped}") from exc
    return dropped
