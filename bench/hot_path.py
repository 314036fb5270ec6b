"""AWS requests per agent turn (DESIGN §7: at most 7 without compaction), counted with
botocore event hooks on the real handler, on the embedded AWS (moto, in-process)."""

from __future__ import annotations

import json
import os
from typing import Any

import boto3
from moto import mock_aws

from local_stack.lambdas import context_for, http_event, import_handler
from local_stack.resources import create_resources, function_environment, load_template

FN = "AgentCallFunction"


def _post(app: Any, session: str, text: str) -> None:
    event = http_event(
        "POST",
        f"/v1/sessions/{session}/messages",
        headers={"x-user-id": "bench", "content-type": "application/json"},
        body=json.dumps({"message": text}).encode(),
    )
    response = app.lambda_handler(event, context_for(FN))
    assert response["statusCode"] == 200, response


def run() -> dict[str, object]:
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")  # read when flushing
    for key, value in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"}.items():
        os.environ.setdefault(key, value)  # the embedded AWS takes any credentials
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        clients = {n: boto3.client(n, region_name="us-east-1") for n in ("s3", "dynamodb", "sqs")}
        resolver = create_resources(load_template(), clients)
        env = function_environment(resolver, FN)
        env.update(
            HARNESS_AUTH_MODE="dev", TIKTOKEN_CACHE_DIR="", POWERTOOLS_METRICS_DISABLED="true"
        )
        env.pop("TIKTOKEN_CACHE_DIR")
        app = import_handler(resolver, FN, env)
        calls: list[str] = []
        for client in app.runtime.clients.values():
            client.meta.events.register(
                "before-parameter-build", lambda model, **kwargs: calls.append(model.name)
            )
        counts = {}
        for label, session in (("first turn of a new session", "s1"), ("later turn", "s1")):
            calls.clear()
            _post(app, session, "Remember that I prefer green tea.")
            counts[label] = {"requests": len(calls), "operations": sorted(calls)}
    return {"budget": 7, "turns": counts}


def report(result: dict[str, object]) -> str:
    lines = ["AWS requests per agent turn (no compaction, no tool calls):"]
    for label, row in result["turns"].items():  # type: ignore[union-attr]
        lines.append(f"  {label:<28} {row['requests']}   {', '.join(row['operations'])}")
    lines.append(f"  budget: <= {result['budget']} (DESIGN §7)")
    return "\n".join(lines)
