"""The ``JobQueue`` contract: ``RecordingQueue`` (the fake) and ``SqsJobQueue`` on moto's
FlushQueue (FIFO, deduplication per message group, group = user) and ConsolidationQueue
(standard) must agree on what is delivered.

The observable outcome is what a consumer receives: on moto the queues are drained (each
message received and deleted, so a FIFO group is never blocked by one in flight); on
the fake it is what was recorded. Message groups themselves are not modelled by the
fake (one ordered list, which trivially keeps every user's order); on moto each
message's group is checked to be the user's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from agent_harness.aws.queues import SqsJobQueue, message_group_id
from agent_harness.ids import User
from agent_harness.jobs import ConsolidationJob, PostTurnJob
from agent_harness.ports import JobQueue
from tests.fakes import RecordingQueue

ALICE = User.from_id("alice")
BOB = User.from_id("bob@example.com")  # id and key differ: "bob%40example.com"
NOW = "2026-11-30T09:00:00Z"


@dataclass
class Delivered:
    """A queue and what its consumers got so far (each call returns everything so far)."""

    queue: JobQueue
    post_turn: Callable[[], list[PostTurnJob]]
    consolidation: Callable[[], list[ConsolidationJob]]


def drain(sqs: Any, url: str, into: list[dict[str, Any]]) -> None:
    """Receive and delete until the queue answers empty."""
    while True:
        resp = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], WaitTimeSeconds=0
        )
        messages = resp.get("Messages", [])
        if not messages:
            return
        for m in messages:
            into.append(m)
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def moto_queues(stack: Any) -> Delivered:
    sqs = stack.clients["sqs"]
    flush_url = stack.resolver.refs["FlushQueue"]
    consolidation_url = stack.resolver.refs["ConsolidationQueue"]
    flush: list[dict[str, Any]] = []
    consolidation: list[dict[str, Any]] = []

    def post_turn() -> list[PostTurnJob]:
        drain(sqs, flush_url, flush)
        jobs = [PostTurnJob.model_validate_json(m["Body"]) for m in flush]
        for m, job in zip(flush, jobs, strict=True):  # one group per user
            assert m["Attributes"]["MessageGroupId"] == message_group_id(User.from_id(job.user_id))
        return jobs

    def consolidate() -> list[ConsolidationJob]:
        drain(sqs, consolidation_url, consolidation)
        return [ConsolidationJob.model_validate_json(m["Body"]) for m in consolidation]

    return Delivered(SqsJobQueue(sqs, flush_url, consolidation_url), post_turn, consolidate)


@dataclass
class FakeQueues:
    fake: RecordingQueue = field(default_factory=RecordingQueue)

    def delivered(self) -> Delivered:
        return Delivered(
            self.fake, lambda: list(self.fake.post_turn), lambda: list(self.fake.consolidation)
        )


@pytest.fixture
def queues(backend: str, request: pytest.FixtureRequest) -> Delivered:
    if backend == "fake":
        return FakeQueues().delivered()
    return moto_queues(request.getfixturevalue("stack"))


def post_turn(user: User, session: str = "s1", turn: int = 1, **kw: Any) -> PostTurnJob:
    return PostTurnJob(user_id=user.id, session_id=session, turn=turn, queued_at=NOW, **kw)


def consolidation_jobs(n: int) -> list[ConsolidationJob]:
    return [ConsolidationJob(user_id=f"user-{i:03d}", requested_at=NOW) for i in range(n)]


# -- the post-turn queue (FIFO) ------------------------------------------------------------


def test_a_post_turn_job_is_delivered_as_sent(queues: Delivered) -> None:
    job = post_turn(BOB, "s-1", 3, reason="compaction", after=2)
    queues.queue.send_post_turn(BOB, job)
    assert queues.post_turn() == [job]
    assert queues.consolidation() == []


def test_a_resent_post_turn_job_is_delivered_once(queues: Delivered) -> None:
    job = post_turn(ALICE, turn=1)
    queues.queue.send_post_turn(ALICE, job)
    queues.queue.send_post_turn(ALICE, job)  # a retried send of the same turn
    queues.queue.send_post_turn(ALICE, post_turn(ALICE, turn=2))
    retried_later = job.model_copy(update={"queued_at": "2026-11-30T09:00:30Z"})
    queues.queue.send_post_turn(ALICE, retried_later)  # a retry re-stamps queued_at
    assert [j.turn for j in queues.post_turn()] == [1, 2]


def test_post_turn_jobs_that_differ_in_session_turn_reason_or_after_are_all_delivered(
    queues: Delivered,
) -> None:
    jobs = [
        post_turn(ALICE, "s1", 1),
        post_turn(ALICE, "s1", 2),
        post_turn(ALICE, "s2", 1),
        post_turn(ALICE, "s1", 1, reason="compaction"),
        post_turn(ALICE, "s1", 1, reason="import", after=40),
        post_turn(ALICE, "s1", 1, reason="import", after=80),
    ]
    for job in jobs:
        queues.queue.send_post_turn(ALICE, job)
    assert queues.post_turn() == jobs


def test_the_same_turn_of_two_users_is_delivered_for_each(queues: Delivered) -> None:
    queues.queue.send_post_turn(ALICE, post_turn(ALICE))
    queues.queue.send_post_turn(BOB, post_turn(BOB))
    assert sorted(j.user_id for j in queues.post_turn()) == sorted([ALICE.id, BOB.id])


def test_one_users_post_turn_jobs_are_delivered_in_the_order_sent(queues: Delivered) -> None:
    for turn in range(1, 13):  # more than one receive's worth, two users interleaved
        queues.queue.send_post_turn(ALICE, post_turn(ALICE, turn=turn))
        queues.queue.send_post_turn(BOB, post_turn(BOB, turn=turn))
    delivered = queues.post_turn()
    assert len(delivered) == 24
    for user in (ALICE, BOB):
        assert [j.turn for j in delivered if j.user_id == user.id] == list(range(1, 13))


# -- the consolidation queue (standard, batched sends) -------------------------------------


@pytest.mark.parametrize("count", [1, 10, 11, 25])
def test_every_consolidation_job_is_delivered_once_however_many_batches(
    queues: Delivered, count: int
) -> None:
    """SendMessageBatch takes at most ten entries: more jobs than that must be split, or
    SQS refuses the whole batch."""
    jobs = consolidation_jobs(count)
    queues.queue.send_consolidation(jobs)
    delivered = queues.consolidation()
    assert sorted(delivered, key=lambda j: j.user_id) == jobs
    assert queues.post_turn() == []


def test_sending_no_consolidation_jobs_sends_nothing(queues: Delivered) -> None:
    queues.queue.send_consolidation([])
    assert queues.consolidation() == []


def test_consolidation_jobs_are_not_deduplicated(queues: Delivered) -> None:
    """A standard queue keeps duplicates (the consolidation lease makes them harmless)."""
    job = ConsolidationJob(user_id=ALICE.id, force=True, requested_at=NOW)
    queues.queue.send_consolidation([job, job])
    queues.queue.send_consolidation([job])
    assert queues.consolidation() == [job, job, job]
