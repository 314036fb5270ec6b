"""Queues (SQS): the post-turn FIFO queue and the consolidation queue.

FlushQueue is FIFO with MessageGroupId = user, so one user's post-turn jobs run in
order while different users run in parallel (SQS high-throughput FIFO). The
deduplication id is derived from (user, session, turn): a retried send of the same
turn is dropped by SQS within its five-minute window, and the flush cursor makes any
later duplicate a no-op. An index job (a write outside a turn) rides the same queue in
its owner's group, after the writes before it; each has its own deduplication id (two
saves a minute apart are two jobs, the second finding less to do).
"""

from __future__ import annotations

import hashlib
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from agent_harness.errors import StoreError

if TYPE_CHECKING:
    from agent_harness.ids import User
    from agent_harness.jobs import ConsolidationJob, IndexJob, PostTurnJob

__all__ = ["SEND_WORKERS", "SqsJobQueue", "message_group_id"]

#: concurrent SendMessageBatch calls of a fan-out (boto3 clients are thread-safe)
SEND_WORKERS = 8


def message_group_id(user: User) -> str:
    """SQS allows 128 characters; longer encoded ids use their hash."""
    if len(user.key) <= 128:
        return user.key
    return "h-" + hashlib.sha256(user.key.encode()).hexdigest()


class SqsJobQueue:
    def __init__(
        self,
        sqs_client: Any,
        flush_queue_url: str,
        consolidation_queue_url: str,
        dead_letter_urls: tuple[str, ...] = (),
    ) -> None:
        self._sqs = sqs_client
        self._flush_url = flush_queue_url
        self._consolidation_url = consolidation_queue_url
        self._dead_letter_urls = tuple(u for u in dead_letter_urls if u)

    def drop_dead_letters(self, user: User) -> int:
        """The user's failed jobs deleted from the dead-letter queues (aws.dlq)."""
        from agent_harness.aws.dlq import drop_naming

        return sum(drop_naming(self._sqs, url, user.id) for url in self._dead_letter_urls)

    def send_post_turn(self, user: User, job: PostTurnJob) -> None:
        dedup = hashlib.sha256(
            f"{user.key}|{job.session_id}|{job.turn}|{job.reason}|{job.after}".encode()
        ).hexdigest()
        try:
            self._sqs.send_message(
                QueueUrl=self._flush_url,
                MessageBody=job.model_dump_json(),
                MessageGroupId=message_group_id(user),
                MessageDeduplicationId=dedup,
            )
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("queueing the post-turn job failed") from exc

    def send_index(self, owner: User, job: IndexJob) -> None:
        try:
            self._sqs.send_message(
                QueueUrl=self._flush_url,
                MessageBody=job.model_dump_json(exclude_none=True),
                MessageGroupId=message_group_id(owner),
                MessageDeduplicationId=uuid.uuid4().hex,
            )
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("queueing the index job failed") from exc

    def send_consolidation(self, jobs: list[ConsolidationJob]) -> None:
        """SendMessageBatch in tens, ``SEND_WORKERS`` batches in flight: 10,000 due users
        are 1,000 requests, a few seconds, well inside the tick's timeout."""
        chunks = [jobs[i : i + 10] for i in range(0, len(jobs), 10)]
        if len(chunks) <= 1:
            for chunk in chunks:
                self._send_batch(chunk)
            return
        with ThreadPoolExecutor(max_workers=SEND_WORKERS) as pool:
            list(pool.map(self._send_batch, chunks))  # re-raises the first failure

    def _send_batch(self, chunk: list[ConsolidationJob]) -> None:
        entries = [
            {"Id": str(i), "MessageBody": job.model_dump_json(exclude_none=True)}
            for i, job in enumerate(chunk)
        ]
        try:
            resp = self._sqs.send_message_batch(QueueUrl=self._consolidation_url, Entries=entries)
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("queueing consolidation jobs failed") from exc
        if resp.get("Failed"):
            raise StoreError(f"queueing {len(resp['Failed'])} consolidation jobs failed")
