"""Integration tests: the real handlers on real-shaped events, AWS emulated by moto
in-process, resources created from template.yaml by the same code as the local stack."""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import boto3
import pytest
from moto import mock_aws

from agent_harness.tokens import DEFAULT_CACHE_DIR
from local_stack.lambdas import context_for, function_timeout, import_handler, sqs_record
from local_stack.resources import (
    LOCAL_NAMES,
    Resolver,
    create_resources,
    function_environment,
    load_template,
)

TEMPLATE = load_template()


@dataclass
class Stack:
    resolver: Resolver
    clients: dict[str, Any]

    @property
    def bucket(self) -> str:
        return LOCAL_NAMES["WorkspaceBucket"]

    @property
    def table(self) -> str:
        return LOCAL_NAMES["StateTable"]

    def env(self, function_id: str, **overrides: str) -> dict[str, str]:
        """The function's template variables, as the local stack gives them: no daily
        budgets (a test sets them), and DELETE /v1/memory forgetting in the agent's own
        process (the invocation of the forget function is a test of its own)."""
        env = function_environment(self.resolver, function_id)
        env["TIKTOKEN_CACHE_DIR"] = str(DEFAULT_CACHE_DIR)  # the layer's /opt path locally
        env.update(HARNESS_USER_DAILY_TOKENS="0", HARNESS_USER_DAILY_TURNS="0")
        env.pop("HARNESS_FORGET_FUNCTION", None)
        env.update(overrides)
        return env

    def handler(self, function_id: str, **overrides: str) -> ModuleType:
        return import_handler(self.resolver, function_id, self.env(function_id, **overrides))

    def invoke(
        self,
        module: ModuleType,
        event: dict[str, Any],
        function_id: str,
        *,
        timeout_seconds: int | None = None,
    ) -> dict[str, Any]:
        """Invoke with a context whose remaining time counts down from the function's
        Timeout in template.yaml (or ``timeout_seconds``)."""
        timeout = timeout_seconds or function_timeout(self.resolver.template, function_id)
        return module.lambda_handler(event, context_for(function_id, timeout))

    def text(self, key: str) -> str | None:
        try:
            return (
                self.clients["s3"].get_object(Bucket=self.bucket, Key=key)["Body"].read().decode()
            )
        except self.clients["s3"].exceptions.NoSuchKey:
            return None

    def object_keys(self) -> list[str]:
        listed = self.clients["s3"].list_objects_v2(Bucket=self.bucket)
        return sorted(o["Key"] for o in listed.get("Contents", []))

    def items(self) -> list[dict[str, Any]]:
        return self.clients["dynamodb"].scan(TableName=self.table)["Items"]

    def delete_item(self, key: dict[str, Any]) -> None:
        self.clients["dynamodb"].delete_item(TableName=self.table, Key=key)

    def receive(self, queue: str, *, max_messages: int = 10) -> list[dict[str, Any]]:
        url = self.resolver.refs[queue]
        resp = self.clients["sqs"].receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=max_messages,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
            WaitTimeSeconds=0,
        )
        return resp.get("Messages", [])

    def sqs_event(self, queue: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
        arn = self.resolver.attrs[(queue, "Arn")]
        return {"Records": [sqs_record(m, arn) for m in messages]}


@pytest.fixture
def stack() -> Stack:
    with mock_aws():
        clients = {n: boto3.client(n, region_name="us-east-1") for n in ("s3", "dynamodb", "sqs")}
        yield Stack(create_resources(TEMPLATE, clients), clients)


def body(response: dict[str, Any]) -> Any:
    return json.loads(response["body"])
