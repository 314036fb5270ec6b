"""The S3, DynamoDB and SQS adapters on moto: the conditional semantics the services rely on."""

from __future__ import annotations

import json

import pytest

from agent_harness.aws.queues import SqsJobQueue
from agent_harness.aws.state import DynamoStateTable
from agent_harness.aws.workspace import S3WorkspaceStore
from agent_harness.errors import ConflictError, PreconditionFailedError, SessionBusyError
from agent_harness.ids import User
from agent_harness.jobs import PostTurnJob
from agent_harness.keys import due_shard
from tests.integration.conftest import Stack

ALICE = User.from_id("alice")


@pytest.fixture
def store(stack: Stack) -> S3WorkspaceStore:
    return S3WorkspaceStore(stack.clients["s3"], stack.bucket, sleep=lambda s: None)


@pytest.fixture
def table(stack: Stack) -> DynamoStateTable:
    return DynamoStateTable(stack.clients["dynamodb"], stack.table)


def test_an_append_that_loses_a_race_is_retried_on_fresh_content(store: S3WorkspaceStore) -> None:
    """docs/design.md#append-never-lost against S3 semantics: a competing append lands
    between our GET and our conditional PUT; our PUT gets 412, we re-read, and both appends
    survive."""
    store.put(ALICE, "memory/2026-11-30.md", "- first\n", create_only=True)
    seen: list[str] = []

    def build(existing: str) -> str:
        seen.append(existing)
        if len(seen) == 1:  # the competitor writes after our read
            store.append(ALICE, "memory/2026-11-30.md", lambda e: "- competitor\n")
        return "- ours\n"

    store.append(ALICE, "memory/2026-11-30.md", build)

    assert seen == ["- first\n", "- first\n- competitor\n"]
    assert store.get(ALICE, "memory/2026-11-30.md").content == "- first\n- competitor\n- ours\n"


def test_creating_a_ledger_that_appeared_meanwhile_appends_to_it(store: S3WorkspaceStore) -> None:
    calls: list[str] = []

    def build(existing: str) -> str:
        calls.append(existing)
        if len(calls) == 1:  # absent at our read, created before our If-None-Match PUT
            store.put(ALICE, "memory/2026-12-01.md", "- theirs\n", create_only=True)
        return "- ours\n"

    store.append(ALICE, "memory/2026-12-01.md", build)
    assert store.get(ALICE, "memory/2026-12-01.md").content == "- theirs\n- ours\n"


def test_create_only_and_if_match_writes(store: S3WorkspaceStore) -> None:
    etag = store.put(ALICE, "MEMORY.md", "v1", create_only=True)
    with pytest.raises(PreconditionFailedError):
        store.put(ALICE, "MEMORY.md", "v2", create_only=True)
    new = store.put(ALICE, "MEMORY.md", "v2", if_match=etag)
    with pytest.raises(PreconditionFailedError):
        store.put(ALICE, "MEMORY.md", "v3", if_match=etag)  # stale
    with pytest.raises(PreconditionFailedError):
        store.put(ALICE, "nothing-here.md", "x", if_match=new)  # missing
    assert store.get(ALICE, "MEMORY.md").content == "v2"
    versions = store.list_versions(ALICE, "MEMORY.md")
    assert [v.is_latest for v in versions] == [True, False]
    assert store.get_version(ALICE, "MEMORY.md", versions[1].version_id).content == "v1"
    assert store.get_version(ALICE, "MEMORY.md", "no-such-version") is None


def test_reading_from_an_offset(store: S3WorkspaceStore) -> None:
    store.put(ALICE, "memory/2026-11-30.md", "héllo world\n", create_only=True)
    size = len("héllo world\n".encode())
    tail = store.get_from(ALICE, "memory/2026-11-30.md", 7)
    assert tail.content == "world\n" and tail.size == size
    at_end = store.get_from(ALICE, "memory/2026-11-30.md", size)
    assert at_end.content == "" and at_end.size == size
    assert store.get_from(ALICE, "memory/2099-01-01.md", 3) is None


def test_listing_is_confined_to_the_user(store: S3WorkspaceStore) -> None:
    bob = User.from_id("bob")
    store.put(ALICE, "memory/2026-11-30.md", "a")
    store.put(ALICE, "memory/archive/2026-01-01.md", "old")
    store.put(bob, "memory/2026-11-30.md", "b")
    assert [o.path for o in store.list(ALICE, "memory", recursive=False)] == [
        "memory/2026-11-30.md"
    ]
    assert len(store.list(ALICE, "memory")) == 2
    many = store.get_many(ALICE, ["memory/2026-11-30.md", "missing.md"])
    assert list(many) == ["memory/2026-11-30.md"]


def test_the_session_lease_serialises_and_expires(table: DynamoStateTable) -> None:
    state = table.acquire_session_lease(ALICE, "s1", "a", now_ms=1_000_000, lease_ms=60_000)
    assert state.turn == 0
    with pytest.raises(SessionBusyError) as busy:
        table.acquire_session_lease(ALICE, "s1", "b", now_ms=1_010_000, lease_ms=60_000)
    assert busy.value.retry_after == 50
    table.commit_turn(ALICE, "s1", "a", 1, "2026-11-30T09:00:00Z")
    state = table.acquire_session_lease(ALICE, "s1", "b", now_ms=1_020_000, lease_ms=60_000)
    assert state.turn == 1
    with pytest.raises(ConflictError):
        table.commit_turn(ALICE, "s1", "a", 2, "2026-11-30T09:00:01Z")  # not the holder
    table.release_session_lease(ALICE, "s1", "b")
    table.release_session_lease(ALICE, "s1", "b")  # releasing twice is harmless
    state = table.acquire_session_lease(ALICE, "s1", "b", now_ms=1_030_000, lease_ms=60_000)
    table.release_session_lease(ALICE, "s1", "a")  # not the holder: changes nothing
    with pytest.raises(SessionBusyError):
        table.acquire_session_lease(ALICE, "s1", "c", now_ms=1_031_000, lease_ms=60_000)
    # b crashes without releasing: the lease expires
    assert table.acquire_session_lease(ALICE, "s1", "c", now_ms=1_091_000, lease_ms=60_000)


@pytest.mark.parametrize("kind", ["dynamodb", "fake"])
def test_a_pause_mark_is_committed_with_the_release_and_cleared_by_the_commit(
    stack: Stack, kind: str
) -> None:
    from agent_harness.errors import SessionNotFoundError
    from agent_harness.ports import PauseMark
    from tests.fakes import MemoryTable

    table = (
        DynamoStateTable(stack.clients["dynamodb"], stack.table)
        if kind == "dynamodb"
        else (MemoryTable())
    )
    with pytest.raises(SessionNotFoundError):  # results for a session never written
        table.acquire_session_lease(ALICE, "s1", "a", 1_000, 60_000, must_exist=True)
    assert table.get_session(ALICE, "s1") is None  # and no item was made for it

    table.acquire_session_lease(ALICE, "s1", "a", 1_000, 60_000)
    mark = PauseMark("p-1", turn=1, paused_at_ms=1_500)
    table.pause_turn(ALICE, "s1", "a", mark, 0)
    with pytest.raises(ConflictError):  # no longer the holder
        table.pause_turn(ALICE, "s1", "a", mark, 0)
    state = table.acquire_session_lease(ALICE, "s1", "b", 2_000, 60_000, must_exist=True)
    assert state.pause == mark and state.turn == 0  # released, and the mark is there

    table.commit_turn(ALICE, "s1", "b", 1, "2026-11-30T09:00:00Z")
    state = table.acquire_session_lease(ALICE, "s1", "c", 3_000, 60_000)
    assert state.pause is None and state.turn == 1


def test_the_flush_cursor_never_moves_backwards(table: DynamoStateTable) -> None:
    table.acquire_session_lease(ALICE, "s1", "a", 0, 1)
    assert table.advance_flush_cursor(ALICE, "s1", 3, "t")
    assert not table.advance_flush_cursor(ALICE, "s1", 2, "t")
    assert table.get_session(ALICE, "s1").flush_cursor == 3


def test_consolidation_state_and_the_due_index(table: DynamoStateTable) -> None:
    table.mark_consolidation_due(ALICE, "2026-11-30T09:00:00Z", shards=4)
    shard = due_shard(ALICE.key, 4)
    assert [d.user_key for d in table.query_due(shard)] == ["alice"]

    state = table.acquire_consolidation_lease(ALICE, "run-1", now_ms=0, lease_ms=60_000)
    assert state.is_due and state.due_seq == 1
    with pytest.raises(ConflictError):
        table.acquire_consolidation_lease(ALICE, "run-2", now_ms=1_000, lease_ms=60_000)
    table.mark_consolidation_due(ALICE, "2026-11-30T09:01:00Z", shards=4)  # a flush meanwhile
    assert not table.complete_consolidation(
        ALICE, "run-1", {"2026-11-30": 120}, state.due_seq, "2026-11-30T09:02:00Z"
    )
    after = table.get_user(ALICE)
    assert after.consumed == {"2026-11-30": 120} and after.is_due
    assert after.last_consolidated_at == "2026-11-30T09:02:00Z"

    state = table.acquire_consolidation_lease(ALICE, "run-3", now_ms=2_000, lease_ms=60_000)
    assert table.complete_consolidation(ALICE, "run-3", {"2026-11-30": 200}, state.due_seq, "t")
    assert table.query_due(shard) == []
    with pytest.raises(ConflictError):
        table.complete_consolidation(ALICE, "run-3", {}, 0, "t")  # lease already released


def test_post_turn_jobs_are_fifo_per_user_and_deduplicated(stack: Stack) -> None:
    queue = SqsJobQueue(
        stack.clients["sqs"],
        stack.resolver.refs["FlushQueue"],
        stack.resolver.refs["ConsolidationQueue"],
    )
    job = PostTurnJob(user_id="alice", session_id="s1", turn=1, queued_at="t")
    queue.send_post_turn(ALICE, job)
    queue.send_post_turn(ALICE, job)  # a retried send of the same turn
    messages = stack.receive("FlushQueue")
    assert len(messages) == 1
    assert messages[0]["Attributes"]["MessageGroupId"] == "alice"
    assert json.loads(messages[0]["Body"])["turn"] == 1


def test_the_cli_finds_a_deployed_stack_through_its_outputs() -> None:
    """`--stack NAME`: bucket, table and queues from the stack's CloudFormation outputs."""
    import json as _json

    import boto3
    from moto import mock_aws

    from agent_harness.cli import stack_environment

    outputs = {
        "WorkspaceBucketName": "prod-workspace",
        "StateTableName": "prod-state",
        "FlushQueueUrl": "https://sqs.us-east-1.amazonaws.com/1/prod-flush.fifo",
        "ConsolidationQueueUrl": "https://sqs.us-east-1.amazonaws.com/1/prod-consolidation",
    }
    template = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {name: {"Value": value} for name, value in outputs.items()},
    }
    with mock_aws():
        boto3.client("cloudformation", region_name="us-east-1").create_stack(
            StackName="agent-harness", TemplateBody=_json.dumps(template)
        )
        env = stack_environment(None, "agent-harness")
    assert (env["HARNESS_BUCKET"], env["HARNESS_TABLE"]) == ("prod-workspace", "prod-state")
    assert env["HARNESS_FLUSH_QUEUE_URL"].endswith("prod-flush.fifo")
    assert env["HARNESS_CONSOLIDATION_QUEUE_URL"].endswith("prod-consolidation")


@pytest.mark.parametrize("store", ["ssm", "secretsmanager"])
def test_provider_keys_come_from_ssm_or_secrets_manager_and_are_never_logged(
    store: str, caplog
) -> None:
    """Keys of a deployed stack: read through Powertools Parameters (cached), sent only
    in the provider's auth header, absent from every log line."""
    import json as _json
    import logging

    import boto3
    import httpx
    from moto import mock_aws

    from agent_harness.models import ModelRegistry
    from agent_harness.models.base import ChatRequest, Message
    from agent_harness.settings import Settings

    key = f"sk-proj-{store}-secret-value-0123456789"
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(
            200,
            json={
                "choices": [{"message": {"role": "assistant", "content": "hi"}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1},
            },
        )

    with mock_aws():
        if store == "ssm":
            name = "/agent-harness/test/openai-key"
            boto3.client("ssm", region_name="us-east-1").put_parameter(
                Name=name, Value=key, Type="SecureString"
            )
            settings = Settings(agent_model="openai:gpt-4.1-mini", openai_api_key_parameter=name)
        else:
            name = "agent-harness/test/openai"
            boto3.client("secretsmanager", region_name="us-east-1").create_secret(
                Name=name, SecretString=_json.dumps({"api_key": key})
            )
            settings = Settings(agent_model="openai:gpt-4.1-mini", openai_api_key_secret=name)
        registry = ModelRegistry(
            settings, http_client=httpx.Client(transport=httpx.MockTransport(handler))
        )
        with caplog.at_level(logging.DEBUG):
            registry.for_role("agent").complete(
                ChatRequest(messages=[Message(role="user", content="hello")])
            )
    assert seen[0].headers["authorization"] == f"Bearer {key}"
    ours = [r for r in caplog.records if not r.name.startswith(("botocore", "urllib3"))]
    assert ours and not any(key in r.getMessage() or key in str(r.__dict__) for r in ours)
