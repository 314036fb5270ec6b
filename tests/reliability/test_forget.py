"""docs/design.md#forget-removes-all: DELETE /v1/memory forgets a user entirely, on moto
with the real handlers: every object version and delete marker, every item (leases, cursors,
gates, watermark, idempotency records); another user untouched; queued jobs write
nothing."""

from __future__ import annotations

from tests.conftest import load_event
from tests.integration.conftest import Stack
from tests.integration.test_memory_handlers import (
    AGENT,
    CONSOLIDATE,
    FLUSH,
    drain_flush_queue,
)


def test_forget_removes_every_version_marker_and_item_of_the_user_only(
    stack: Stack, record
) -> None:
    """docs/design.md#forget-removes-all on moto: a user with turns, ledger, MEMORY.md
    snapshots, an archived day (a delete marker), cursors and leases is gone; another user
    is untouched; jobs still queued for the forgotten user write nothing."""
    agent, flush = stack.handler(AGENT), stack.handler(FLUSH)
    consolidate = stack.handler(CONSOLIDATE)
    for user in ("alice", "bob"):
        event = load_event("agent_call_post_message.json")
        event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = user
        stack.invoke(agent, event, AGENT)
    drain_flush_queue(stack, flush)
    for user in ("alice", "bob"):
        job = load_event("memory_consolidate_sqs.json")
        job["Records"][0]["body"] = job["Records"][0]["body"].replace("alice", user)
        stack.invoke(consolidate, job, CONSOLIDATE)
    s3 = stack.clients["s3"]
    s3.put_object(Bucket=stack.bucket, Key="users/alice/MEMORY.md", Body=b"# edited\n")
    old_note = "users/alice/memory/2020-01-01.md"
    s3.put_object(Bucket=stack.bucket, Key=old_note, Body=b"- an old fact\n")
    s3.delete_object(Bucket=stack.bucket, Key=old_note)  # a delete marker over a version
    listed = s3.list_object_versions(Bucket=stack.bucket, Prefix=old_note)
    assert listed.get("DeleteMarkers") and listed.get("Versions")
    queued_later = load_event("memory_flush_sqs.json")  # alice's job, delivered after

    response = stack.invoke(agent, load_event("agent_call_forget.json"), AGENT)

    assert response["statusCode"] == 204
    listed = s3.list_object_versions(Bucket=stack.bucket, Prefix="users/")
    left = {v["Key"] for v in [*listed.get("Versions", []), *listed.get("DeleteMarkers", [])]}
    assert left and all(key.startswith("users/bob/") for key in left)
    items_left = {i["pk"]["S"] for i in stack.items()}

    assert stack.invoke(flush, queued_later, FLUSH) == {"batchItemFailures": []}
    stack.invoke(consolidate, load_event("memory_consolidate_sqs.json"), CONSOLIDATE)
    listed = s3.list_object_versions(Bucket=stack.bucket, Prefix="users/alice/")
    after_jobs = len(listed.get("Versions", [])) + len(listed.get("DeleteMarkers", []))
    after_jobs += sum(i["pk"]["S"] == "U#alice" for i in stack.items())

    alice_left = sum(not key.startswith("users/bob/") for key in left)
    record(
        "forget-removes-all",
        "forget: object versions and delete markers of the user left",
        alice_left,
        "0",
        alice_left == 0,
    )
    record(
        "forget-removes-all",
        "  ... items of the user left",
        int("U#alice" in items_left),
        "0",
        "U#alice" not in items_left,
    )
    record(
        "forget-removes-all",
        "  ... another user's objects and items kept",
        "U#bob" in items_left,
        "True",
        "U#bob" in items_left and bool(left),
    )
    record(
        "forget-removes-all",
        "  ... left behind by the user's jobs still queued",
        after_jobs,
        "0",
        after_jobs == 0,
    )
    assert items_left == {"U#bob"} and after_jobs == 0
