"""The restore drill of docs/operations.md#restore-after-a-stack-replacement, on moto: a
stack is replaced (its bucket and table kept, as the template's Retain says; the new
stack has new, empty ones), then the operator CLI brings a user's memory back from the
kept bucket's versions and the table's point-in-time recovery, as it stood before a bad
edit, and the new stack's handlers serve it: MEMORY.md, the ledgers, search, the session
(its next turn is the next number) and the user's usage."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

from agent_harness.cli import main, runtime_from
from agent_harness.ids import User
from agent_harness.memory.jobs.consolidate import consolidate
from agent_harness.memory.jobs.schedule import forced_job
from local_stack.resources import _create_bucket, _create_table
from tests.conftest import load_event
from tests.integration.conftest import TEMPLATE, Stack, body
from tests.integration.test_memory_handlers import (
    AGENT,
    CONSOLIDATE,
    FLUSH,
    drain_flush_queue,
    post,
)

NEW_BUCKET, NEW_TABLE = "agent-harness-replaced-workspace", "agent-harness-replaced-state"


def get(stack: Stack, app, path: str) -> dict:
    event = load_event("agent_call_get_memory.json")
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = "GET"
    response = stack.invoke(app, event, AGENT)
    assert response["statusCode"] == 200, response
    return body(response)


def search(stack: Stack, app, query: str) -> list[dict]:
    event = load_event("agent_call_memory_search.json")
    event["isBase64Encoded"] = False
    event["body"] = json.dumps({"query": query, "match_mode": "ranked"})
    response = stack.invoke(app, event, AGENT)
    assert response["statusCode"] == 200, response
    return list(body(response)["hits"])


def test_a_users_memory_comes_back_after_a_stack_replacement(stack: Stack, capsys) -> None:
    agent, flush = stack.handler(AGENT), stack.handler(FLUSH)
    post(stack, agent, "trip", "Remember that I prefer window seats on long flights.")
    post(stack, agent, "trip", "Remember that my sister Ana lives in Porto.")
    drain_flush_queue(stack, flush)
    merger = stack.handler(CONSOLIDATE).runtime
    consolidate(merger, forced_job(merger, User.from_id("alice")))
    before = get(stack, agent, "/v1/memory")
    assert "window seats" in before["content"]
    usage_before = get(stack, agent, "/v1/usage")["totals"]
    good = datetime.now(UTC)
    time.sleep(1.1)  # S3 times versions to the second: the bad edit must be a later one

    # a bad edit after the good state: the restore goes back to before it
    stack.clients["s3"].put_object(
        Bucket=stack.bucket, Key="users/alice/MEMORY.md", Body=b"# Memory\n\n- [user] wrong\n"
    )

    # the stack is replaced: the old bucket and table stay; the new stack's are empty
    _create_bucket(
        stack.clients["s3"], NEW_BUCKET, TEMPLATE["Resources"]["WorkspaceBucket"]["Properties"]
    )
    _create_table(
        stack.clients["dynamodb"], NEW_TABLE, TEMPLATE["Resources"]["StateTable"]["Properties"]
    )
    stack.clients["dynamodb"].restore_table_to_point_in_time(
        SourceTableName=stack.table, TargetTableName="agent-harness-pitr", RestoreDateTime=good
    )
    replaced = {"HARNESS_BUCKET": NEW_BUCKET, "HARNESS_TABLE": NEW_TABLE}
    new_agent = stack.handler(AGENT, **replaced)
    assert get(stack, new_agent, "/v1/memory")["content"] == ""  # nothing yet

    env = stack.env(CONSOLIDATE, **replaced)
    capsys.readouterr()
    argv = ["restore", "--from-bucket", stack.bucket, "--from-table", "agent-harness-pitr"]
    argv += ["--as-of", good.isoformat(), "--user", "alice"]

    assert main(argv, runtime=runtime_from(env)) == 2  # no --yes: nothing done
    assert get(stack, new_agent, "/v1/memory")["content"] == ""
    capsys.readouterr()
    assert main([*argv, "--yes"], runtime=runtime_from(env)) == 0
    restored = json.loads(capsys.readouterr().out)
    assert restored["objects"] >= 5 and restored["items"] >= 2, restored

    fresh = stack.handler(AGENT, **replaced)  # a new container of the new stack
    after = get(stack, fresh, "/v1/memory")
    assert after["content"] == before["content"] and "wrong" not in after["content"]
    hits = search(stack, fresh, "sister Porto")
    assert any("Porto" in hit["text"] for hit in hits), (hits, after)
    assert get(stack, fresh, "/v1/usage")["totals"] == usage_before
    turns = get(stack, fresh, "/v1/sessions/trip/messages")["turns"]
    assert [t["turn"] for t in turns] == [1, 2]
    assert post(stack, fresh, "trip", "And I like tea.")["turn"] == 3
