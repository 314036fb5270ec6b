"""What only the adapters on moto show: an append losing a race to a real 412, the
requests a turn's commit makes and how its transaction fails, and the CLI and provider
keys reaching deployed resources. Every port's semantics are in the contract suites
(tests/contract), run on the adapters and on the fakes alike."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from agent_harness.aws.state import DynamoStateTable
from agent_harness.aws.workspace import S3WorkspaceStore
from agent_harness.errors import ConflictError, StoreError
from agent_harness.ids import User
from agent_harness.ports import UsageDelta
from tests.integration.conftest import Stack

ALICE = User.from_id("alice")


@pytest.fixture
def store(stack: Stack) -> S3WorkspaceStore:
    return S3WorkspaceStore(stack.clients["s3"], stack.bucket, sleep=lambda s: None)


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


def s3_requests(stack: Stack) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    stack.clients["s3"].meta.events.register(
        "before-parameter-build.s3.ListObjectsV2",
        lambda params, **kw: calls.append(dict(params)),
    )
    return calls


def test_two_neighbouring_folders_are_listed_in_one_request_when_their_size_is_known(
    stack: Stack, store: S3WorkspaceStore
) -> None:
    for p in ["index/threads/2026-11.jsonl", "memory/2026-11-30.md", "memory/2026-12-01.md"]:
        store.put(ALICE, p, "x")
    for n in range(50):  # what sorts after: a session's turns
        store.put(ALICE, f"sessions/s/turns/{n:08d}.json", "{}")
    calls = s3_requests(stack)

    together = store.list_together(ALICE, ("index/threads", "memory/"), expect=3 + 2)

    assert [len(v) for v in together.values()] == [1, 2]
    assert len(calls) == 1 and calls[0]["MaxKeys"] == 5  # a few turns' keys, not 50
    assert calls[0]["StartAfter"] == "users/alice/index/threads/"
    calls.clear()
    # more files than expected: the rest of each folder on its own, from where the page
    # ended, so no request brings the turns' keys
    assert store.list_together(ALICE, ("index/threads", "memory/"), expect=2) == together
    assert [(c["Prefix"], c.get("StartAfter")) for c in calls[1:]] == [
        ("users/alice/memory/", "users/alice/memory/2026-11-30.md")
    ]
    calls.clear()
    assert store.list_together(ALICE, ("index/threads", "memory/"), expect=1) == together
    assert [(c["Prefix"], c.get("StartAfter")) for c in calls[1:]] == [
        ("users/alice/index/threads/", "users/alice/index/threads/2026-11.jsonl"),
        ("users/alice/memory/", None),
    ]


SPEND = UsageDelta("2026-11-30", tokens={"agent": (100, 20)}, model_calls={"agent": 2}, turns=1)


def dynamo_requests(stack: Stack) -> list[str]:
    """The DynamoDB operations the stack's client (the adapter's) makes from now on."""
    calls: list[str] = []
    stack.clients["dynamodb"].meta.events.register(
        "before-parameter-build", lambda model, **kw: calls.append(model.name)
    )
    return calls


@pytest.fixture
def table(stack: Stack) -> DynamoStateTable:
    return DynamoStateTable(stack.clients["dynamodb"], stack.table, sleep=lambda s: None)


def test_a_commit_with_usage_is_one_request_and_without_it_one_update(
    stack: Stack, table: DynamoStateTable
) -> None:
    """The hot path's request count does not grow: the usage rides in the commit."""
    table.acquire_session_lease(ALICE, "s1", "a", 1_000, 60_000)
    calls = dynamo_requests(stack)
    table.commit_turn(ALICE, "s1", "a", 1, "2026-11-30T09:00:00Z", usage=SPEND)
    assert calls == ["TransactWriteItems"]

    table.acquire_session_lease(ALICE, "s1", "b", 2_000, 60_000)
    calls.clear()
    empty = UsageDelta("2026-11-30")
    table.commit_turn(ALICE, "s1", "b", 2, "2026-11-30T09:00:00Z", usage=empty)
    assert calls == ["UpdateItem"]  # an empty usage: the plain commit
    assert table.usage_days(ALICE, "2026-11-30", "2026-11-30")[0].turns == 1


def test_adding_usage_is_one_update_and_an_empty_delta_none(
    stack: Stack, table: DynamoStateTable
) -> None:
    calls = dynamo_requests(stack)
    table.add_usage(ALICE, SPEND)
    table.add_usage(ALICE, UsageDelta("2026-11-30", tokens={"memory": (0, 0)}))
    assert calls == ["UpdateItem"]


class FailingTransactions:
    """A DynamoDB client whose transactions fail with ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def transact_write_items(self, **kwargs: Any) -> None:
        raise self.error


def cancelled(*codes: str) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
            "CancellationReasons": [{"Code": c} for c in codes],
        },
        "TransactWriteItems",
    )


@pytest.mark.parametrize(
    ("error", "raised"),
    [
        (cancelled("ConditionalCheckFailed", "None"), ConflictError),
        (cancelled("None", "ValidationError"), StoreError),
        (cancelled("TransactionConflict", "None"), StoreError),
        (ClientError({"Error": {"Code": "ThrottlingException"}}, "TransactWriteItems"), StoreError),
        (EndpointConnectionError(endpoint_url="https://dynamodb"), StoreError),
    ],
    ids=["lease-lost", "usage-invalid", "conflict", "throttled", "unreachable"],
)
def test_a_failed_commit_transaction_is_a_conflict_only_when_the_lease_was_lost(
    error: Exception, raised: type[Exception]
) -> None:
    table = DynamoStateTable(FailingTransactions(error), "t")
    with pytest.raises(raised) as caught:
        table.commit_turn(ALICE, "s1", "a", 1, "2026-11-30T09:00:00Z", usage=SPEND)
    assert caught.type is raised
    if raised is ConflictError:
        assert str(caught.value) == "the lease on session s1 was lost"


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
