"""Poison jobs: a post-turn job that keeps failing lands in the DLQ after the queue's
maxReceiveCount (5, template.yaml), and does not block the user's later jobs forever;
the operator CLI lists it and, once the cause is fixed, redrives it, and it is then
processed like any job. On moto, with the real memory_flush handler."""

from __future__ import annotations

import json

from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

from agent_harness.cli import main
from agent_harness.errors import ModelUnavailableError
from agent_harness.models import ModelRegistry
from tests.conftest import load_event
from tests.fakes import ScriptedModel
from tests.integration.conftest import Stack

AGENT, FLUSH = "AgentCallFunction", "MemoryFlushFunction"


def deliver_until_empty(stack: Stack, flush) -> list[dict]:
    """Receive like Lambda's poller (visibility 0 here, so a failure is retried at once);
    returns every result. A record that fails is left for the next receive."""
    results = []
    for _ in range(20):
        messages = (
            stack.clients["sqs"]
            .receive_message(
                QueueUrl=stack.resolver.refs["FlushQueue"],
                MaxNumberOfMessages=10,
                VisibilityTimeout=0,
                AttributeNames=["All"],
            )
            .get("Messages", [])
        )
        if not messages:
            break
        try:
            result = stack.invoke(flush, stack.sqs_event("FlushQueue", messages), FLUSH)
        except BatchProcessingError:  # every record failed: Lambda fails the invocation
            result = {"batchItemFailures": [{"itemIdentifier": m["MessageId"]} for m in messages]}
        results.append(result)
        failed = {f["itemIdentifier"] for f in result["batchItemFailures"]}
        for m in messages:
            if m["MessageId"] not in failed:
                stack.clients["sqs"].delete_message(
                    QueueUrl=stack.resolver.refs["FlushQueue"], ReceiptHandle=m["ReceiptHandle"]
                )
    return results


def test_a_poison_job_reaches_the_dlq_and_is_redriven_by_the_cli(
    stack: Stack, tmp_path, capsys, record
) -> None:
    stack.invoke(stack.handler(AGENT), load_event("agent_call_post_message.json"), AGENT)
    flush = stack.handler(FLUSH)
    healthy = flush.runtime.models
    flush.runtime.models = ModelRegistry(
        flush.runtime.settings,
        overrides={"memory": ScriptedModel(*[ModelUnavailableError("provider down")] * 20)},
    )

    results = deliver_until_empty(stack, flush)
    receives = sum(len(r["batchItemFailures"]) for r in results)

    env_file = tmp_path / "env.json"
    env_file.write_text(json.dumps({"MemoryFlushFunction": stack.env(FLUSH)}))
    capsys.readouterr()
    assert main(["--env-file", str(env_file), "dlq", "list", "flush"]) == 0
    letters = json.loads(capsys.readouterr().out)

    flush.runtime.models = healthy  # the provider is back
    assert main(["--env-file", str(env_file), "dlq", "redrive", "flush"]) == 0
    redriven = json.loads(capsys.readouterr().out)["redriven"]
    deliver_until_empty(stack, flush)
    ledger = "".join(
        stack.text(k) or "" for k in stack.object_keys() if "/memory/" in k and k.endswith(".md")
    )
    capsys.readouterr()  # the handler's metric lines
    assert main(["--env-file", str(env_file), "dlq", "list", "flush"]) == 0
    left = json.loads(capsys.readouterr().out)

    record(
        "flush-once",
        "poison post-turn job: failed receives before the DLQ",
        receives,
        "5",
        receives == 5,
    )
    record(
        "flush-once", "  ... listed by `cli dlq list flush`", len(letters), "1", len(letters) == 1
    )
    record(
        "flush-once",
        "  ... redriven, then processed (fact in the ledger)",
        redriven,
        "1, and the fact lands",
        redriven == 1 and "window seats" in ledger,
    )

    assert receives == 5
    assert len(letters) == 1 and letters[0]["body"]["user_id"] == "alice"
    assert letters[0]["receives"] >= 5 and letters[0]["group"] == "alice"
    assert redriven == 1 and "I prefer window seats" in ledger and left == []
