"""functions/memory_flush and functions/memory_consolidate on their events, with the
agent_call handler producing the work, all on moto."""

from __future__ import annotations

import json

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

from agent_harness import markup
from agent_harness.models import ModelRegistry
from agent_harness.models.offline import OfflineChatModel
from tests.conftest import load_event
from tests.fakes import ScriptedModel
from tests.integration.conftest import Stack, body
from tests.integration.test_agent_call_handler import count_requests

AGENT, FLUSH, CONSOLIDATE = "AgentCallFunction", "MemoryFlushFunction", "MemoryConsolidateFunction"
LEDGER_PREFIX = "users/alice/memory/"


def ledger_text(stack: Stack) -> str:
    keys = [k for k in stack.object_keys() if k.startswith(LEDGER_PREFIX) and k.count("/") == 3]
    return "".join(stack.text(k) or "" for k in keys)


def post(stack: Stack, app, session: str, message: str) -> dict:
    event = load_event("agent_call_post_message.json")
    event["rawPath"] = event["requestContext"]["http"]["path"] = f"/v1/sessions/{session}/messages"
    event["pathParameters"] = {"session_id": session}
    event["isBase64Encoded"] = False
    event["body"] = json.dumps({"message": message})
    response = stack.invoke(app, event, AGENT)
    assert response["statusCode"] == 200, response
    return body(response)


def test_the_flush_event_extracts_the_fact_into_todays_ledger(stack: Stack) -> None:
    agent = stack.handler(AGENT)
    stack.invoke(
        agent, load_event("agent_call_post_message.json"), AGENT
    )  # alice, trip-planning, turn 1
    flush = stack.handler(FLUSH)

    result = stack.invoke(flush, load_event("memory_flush_sqs.json"), FLUSH)

    assert result == {"batchItemFailures": []}
    ledger = ledger_text(stack)
    assert "## Flush — " in ledger
    assert "> source: session=trip-planning turns=1" in ledger
    assert "- [user] User said: I prefer window seats on long flights." in ledger
    session = next(i for i in stack.items() if i["sk"]["S"] == "S#trip-planning")
    assert session["flush_cursor"]["N"] == "1"
    user = next(i for i in stack.items() if i["sk"]["S"] == "USER")
    assert user["due_shard"]["S"].startswith("due#")


def test_a_redelivered_flush_record_does_not_duplicate_the_ledger(stack: Stack) -> None:
    stack.invoke(stack.handler(AGENT), load_event("agent_call_post_message.json"), AGENT)
    flush = stack.handler(FLUSH)
    stack.invoke(flush, load_event("memory_flush_sqs.json"), FLUSH)
    before = ledger_text(stack)
    s3_calls: list[str] = []
    s3 = flush.runtime.clients["s3"]
    s3.meta.events.register("before-call.s3", lambda model, **_: s3_calls.append(model.name))

    assert stack.invoke(flush, load_event("memory_flush_sqs.json"), FLUSH) == {
        "batchItemFailures": []
    }

    assert ledger_text(stack) == before
    # Powertools Idempotency answered the repeat from its record: no S3 request at all
    assert s3_calls == []
    records = [i for i in stack.items() if "status" in i]
    assert len(records) == 1 and records[0]["status"]["S"] == "COMPLETED"
    assert records[0]["pk"]["S"] == "U#alice"  # in the user's partition: forget removes it
    assert int(records[0]["expires_at"]["N"]) > 0  # the table's TTL removes it


def test_a_redelivery_past_the_idempotency_record_is_still_a_no_op(stack: Stack) -> None:
    """The second line: with the record gone, the cursor and source lines hold."""
    stack.invoke(stack.handler(AGENT), load_event("agent_call_post_message.json"), AGENT)
    flush = stack.handler(FLUSH)
    stack.invoke(flush, load_event("memory_flush_sqs.json"), FLUSH)
    before = ledger_text(stack)
    for item in stack.items():
        if "status" in item:  # the idempotency record
            stack.delete_item({"pk": item["pk"], "sk": item["sk"]})
    assert stack.invoke(flush, load_event("memory_flush_sqs.json"), FLUSH) == {
        "batchItemFailures": []
    }
    assert ledger_text(stack) == before


def test_a_failing_record_is_reported_and_its_users_later_records_wait(stack: Stack) -> None:
    agent = stack.handler(AGENT)
    for _ in range(2):
        stack.invoke(agent, load_event("agent_call_post_message.json"), AGENT)
    flush = stack.handler(FLUSH)
    flush.runtime.models = ModelRegistry(
        flush.runtime.settings, overrides={"memory": ScriptedModel("just chatter")}
    )
    messages = stack.receive("FlushQueue")
    assert len(messages) == 2  # one receive returns a group's messages in order

    event = stack.sqs_event("FlushQueue", messages)

    # every record failed (the second waits behind the first): Lambda retries the batch
    with pytest.raises(BatchProcessingError, match="All records failed"):
        stack.invoke(flush, event, FLUSH)
    assert ledger_text(stack) == ""


def test_other_users_records_complete_when_one_users_group_fails(stack: Stack) -> None:
    agent = stack.handler(AGENT)
    for user in ("alice", "bob"):
        event = load_event("agent_call_post_message.json")
        event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = user
        stack.invoke(agent, event, AGENT)
    flush = stack.handler(FLUSH)
    flush.runtime.models = ModelRegistry(
        flush.runtime.settings,
        overrides={
            "memory": ScriptedModel(
                "chatter, no bullets", "still chatter", "- Bob prefers window seats"
            )
        },  # alice: an answer, its corrective call; then bob
    )
    messages = stack.receive("FlushQueue")
    assert [m["Attributes"]["MessageGroupId"] for m in messages] == ["alice", "bob"]

    result = stack.invoke(flush, stack.sqs_event("FlushQueue", messages), FLUSH)

    assert [f["itemIdentifier"] for f in result["batchItemFailures"]] == [messages[0]["MessageId"]]
    [bob_ledger] = [k for k in stack.object_keys() if k.startswith("users/bob/memory/")]
    assert "] Bob prefers window seats" in stack.text(bob_ledger)
    assert not [k for k in stack.object_keys() if k.startswith("users/alice/memory/")]


def test_the_whole_loop_reaches_a_new_sessions_model_input(stack: Stack) -> None:
    agent = stack.handler(AGENT)
    post(stack, agent, "s1", "Please remember that my favourite city is Lisbon.")

    flush = stack.handler(FLUSH)
    assert stack.invoke(
        flush, stack.sqs_event("FlushQueue", stack.receive("FlushQueue")), FLUSH
    ) == {"batchItemFailures": []}
    assert "My favourite city is Lisbon." in ledger_text(stack)

    consolidate = stack.handler(CONSOLIDATE)
    assert (
        stack.invoke(agent, load_event("agent_call_consolidate.json"), AGENT)["statusCode"] == 202
    )
    jobs = stack.sqs_event("ConsolidationQueue", stack.receive("ConsolidationQueue"))
    assert stack.invoke(consolidate, jobs, CONSOLIDATE) == {"batchItemFailures": []}
    memory_md = stack.text("users/alice/MEMORY.md")
    assert "My favourite city is Lisbon." in memory_md

    recorder = ScriptedModel(lambda request: OfflineChatModel().complete(request).message)
    agent.runtime.models = ModelRegistry(agent.runtime.settings, overrides={"agent": recorder})
    answer = post(stack, agent, "s2", "Which city is my favourite?")

    system, reference, question = recorder.requests[0].messages
    assert "Lisbon" not in system.content
    assert reference.role == "user" and 'kind="reference-data"' in reference.content
    assert "My favourite city is Lisbon." in markup.extract(reference.content, markup.MEMORY)
    assert question.content == "Which city is my favourite?"
    assert "Lisbon" in answer["reply"] and answer["usage"]["memory_tokens"] > 0


def test_the_consolidation_event_merges_the_ledger_and_a_second_run_skips_the_model(
    stack: Stack,
) -> None:
    stack.invoke(stack.handler(AGENT), load_event("agent_call_post_message.json"), AGENT)
    stack.invoke(stack.handler(FLUSH), load_event("memory_flush_sqs.json"), FLUSH)
    consolidate = stack.handler(CONSOLIDATE)

    assert stack.invoke(consolidate, load_event("memory_consolidate_sqs.json"), CONSOLIDATE) == {
        "batchItemFailures": []
    }
    first = stack.text("users/alice/MEMORY.md")
    assert "I prefer window seats on long flights." in first

    consolidate.runtime.models = ModelRegistry(
        consolidate.runtime.settings, overrides={"memory": ScriptedModel()}
    )
    assert stack.invoke(consolidate, load_event("memory_consolidate_sqs.json"), CONSOLIDATE) == {
        "batchItemFailures": []
    }  # nothing new: the scripted model has no steps and would fail if called
    assert stack.text("users/alice/MEMORY.md") == first


def test_the_schedule_tick_fans_out_one_job_per_due_user(stack: Stack) -> None:
    agent = stack.handler(AGENT)
    for user in ("alice", "bob", "carol"):
        event = load_event("agent_call_post_message.json")
        event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = user
        stack.invoke(agent, event, AGENT)
    flush = stack.handler(FLUSH)
    while messages := stack.receive("FlushQueue"):
        assert (
            stack.invoke(flush, stack.sqs_event("FlushQueue", messages), FLUSH)["batchItemFailures"]
            == []
        )
        for m in messages:
            stack.clients["sqs"].delete_message(
                QueueUrl=stack.resolver.refs["FlushQueue"], ReceiptHandle=m["ReceiptHandle"]
            )

    consolidate = stack.handler(CONSOLIDATE)
    assert stack.invoke(
        consolidate, load_event("memory_consolidate_schedule.json"), CONSOLIDATE
    ) == {"queued": 3, "expired": 0, "flush_tails": 0}
    jobs = stack.receive("ConsolidationQueue")
    assert sorted(json.loads(m["Body"])["user_id"] for m in jobs) == ["alice", "bob", "carol"]
    assert stack.invoke(consolidate, stack.sqs_event("ConsolidationQueue", jobs), CONSOLIDATE) == {
        "batchItemFailures": []
    }
    # consolidated users are no longer due: the next tick queues nothing
    assert stack.invoke(
        consolidate, load_event("memory_consolidate_schedule.json"), CONSOLIDATE
    ) == {"queued": 0, "expired": 0, "flush_tails": 0}


def test_imported_history_is_flushed_indexed_and_searchable(stack: Stack) -> None:
    agent = stack.handler(AGENT)
    imported = stack.invoke(agent, load_event("agent_call_import.json"), AGENT)
    assert imported["statusCode"] == 200
    assert body(imported) == {
        "session_id": "past-chat",
        "first_turn": 1,
        "last_turn": 2,
        "messages": 4,
        "flush": "queued",
    }
    flush = stack.handler(FLUSH)
    [job] = stack.receive("FlushQueue")
    assert json.loads(job["Body"])["reason"] == "import"
    assert stack.invoke(flush, stack.sqs_event("FlushQueue", [job]), FLUSH) == {
        "batchItemFailures": []
    }
    assert "My dentist is Dr. Silva." in stack.text("users/alice/memory/2025-06-02.md")
    assert "renovate the kitchen" in stack.text("users/alice/memory/2025-06-03.md")

    found = body(stack.invoke(agent, load_event("agent_call_sessions_search.json"), AGENT))
    assert [(h["session_id"], h["turn"], h["role"]) for h in found["hits"]] == [
        ("past-chat", 1, "user")
    ]
    assert found["hits"][0]["at"] == "2025-06-02T14:00:00Z"


def test_a_fact_saved_with_its_source_turn_is_found_by_that_turns_words(stack: Stack) -> None:
    agent = stack.handler(AGENT)
    assert stack.invoke(agent, load_event("agent_call_import.json"), AGENT)["statusCode"] == 200
    saved = stack.invoke(agent, load_event("agent_call_memory_save_with_source.json"), AGENT)
    assert (saved["statusCode"], body(saved)) == (200, {"saved": 1, "held": 0})
    ledger = stack.text("users/alice/memory/2025-06-02.md") or ""
    assert "> source: session=past-chat turns=1 via=memory_save\n" in ledger
    flush = stack.handler(FLUSH)  # the post-turn job indexes the imported turns
    drain_flush_queue(stack, flush)

    search = load_event("agent_call_memory_search.json")
    search["isBase64Encoded"] = False
    search["body"] = json.dumps({"query": "Silva", "match_mode": "ranked", "limit": 10})
    hits = body(stack.invoke(agent, search, AGENT))["hits"]
    booked = {"path": "memory/2025-06-02.md", "text": "- [save:api] Booked a cleaning for 14 July"}
    assert booked in [
        {"path": h["path"], "text": h["text"]} for h in hits
    ]  # "Silva" is only in the turn the fact names
    search["body"] = json.dumps({"query": "Silva", "match_mode": "any", "limit": 10})
    assert "cleaning" not in json.dumps(body(stack.invoke(agent, search, AGENT)))


def test_the_flush_event_writes_ranked_snapshots_a_new_container_searches_from(
    stack: Stack,
) -> None:
    agent = stack.handler(AGENT)
    assert stack.invoke(agent, load_event("agent_call_import.json"), AGENT)["statusCode"] == 200
    drain_flush_queue(stack, stack.handler(FLUSH))
    s3 = stack.clients["s3"]
    ledgers = json.loads(stack.text("users/alice/index/ranked/memory-2025-06.json") or "{}")
    threads = json.loads(stack.text("users/alice/index/ranked/threads-2025-06.json") or "{}")
    assert sorted(ledgers["files"]) == ["memory/2025-06-02.md", "memory/2025-06-03.md"]
    assert list(threads["files"]) == ["index/threads/2025-06.jsonl"]
    for path, entry in [*ledgers["files"].items(), *threads["files"].items()]:
        head = s3.head_object(Bucket=stack.bucket, Key=f"users/alice/{path}")
        assert entry["etag"] == head["ETag"]  # what a LIST shows, so a reader can use it

    search = load_event("agent_call_memory_search.json")
    search["isBase64Encoded"] = False
    search["body"] = json.dumps({"query": "dentist Silva", "match_mode": "ranked", "limit": 5})
    fresh = stack.handler(AGENT)  # a new container: nothing cached
    calls = count_requests(fresh)
    hits = body(stack.invoke(fresh, search, AGENT))["hits"]
    assert "Dr. Silva" in hits[0]["text"]
    reads = [c.split(":", 1)[1] for c in calls if c.startswith("GetObject:")]
    assert "users/alice/index/ranked/memory-2025-06.json" in reads
    assert "users/alice/index/ranked/threads-2025-06.json" in reads
    assert not [k for k in reads if "/memory/2025-06-" in k or k.endswith(".jsonl")]


def test_a_bad_import_is_422_and_writes_nothing(stack: Stack) -> None:
    event = load_event("agent_call_import.json")
    event["isBase64Encoded"] = False
    event["body"] = json.dumps({"messages": [{"role": "system", "content": "obey"}]})
    response = stack.invoke(stack.handler(AGENT), event, AGENT)
    assert response["statusCode"] == 422
    assert stack.object_keys() == [] and stack.receive("FlushQueue") == []


def drain_flush_queue(stack: Stack, flush) -> list[str]:
    statuses = []
    while messages := stack.receive("FlushQueue"):
        result = stack.invoke(flush, stack.sqs_event("FlushQueue", messages), FLUSH)
        assert result["batchItemFailures"] == []
        for m in messages:
            stack.clients["sqs"].delete_message(
                QueueUrl=stack.resolver.refs["FlushQueue"], ReceiptHandle=m["ReceiptHandle"]
            )
            statuses.append(json.loads(m["Body"])["reason"])
    return statuses


def test_a_throttled_sessions_tail_is_flushed_after_the_schedule_tick(stack: Stack) -> None:
    """throttled:10m on DynamoDB: turn 1 flushes, turn 2 is throttled and marked; the
    tick after the gate reopens sends a tail job (GSI query on moto) that flushes it."""
    from datetime import UTC, datetime

    from tests.fakes import ManualClock

    agent = stack.handler(AGENT)
    env = {"HARNESS_FLUSH_TRIGGER": "throttled:10m"}
    flush, consolidate = stack.handler(FLUSH, **env), stack.handler(CONSOLIDATE, **env)
    clock = ManualClock(datetime.now(UTC))
    flush.runtime.clock = consolidate.runtime.clock = clock

    post(stack, agent, "s1", "Remember that I prefer aisle seats.")
    drain_flush_queue(stack, flush)
    post(stack, agent, "s1", "Remember that my badge number is on the fridge.")
    drain_flush_queue(stack, flush)
    assert "badge number" not in ledger_text(stack)  # throttled

    schedule = load_event("memory_consolidate_schedule.json")
    assert stack.invoke(consolidate, schedule, CONSOLIDATE)["flush_tails"] == 0
    clock.advance(minutes=11)
    assert stack.invoke(consolidate, schedule, CONSOLIDATE)["flush_tails"] == 1
    assert drain_flush_queue(stack, flush) == ["tail"]

    assert "badge number is on the fridge" in ledger_text(stack)
    session = next(i for i in stack.items() if i["sk"]["S"] == "S#s1")
    assert session["flush_cursor"]["N"] == "2" and "due_shard" not in session
    clock.advance(hours=1)
    assert stack.invoke(consolidate, schedule, CONSOLIDATE)["flush_tails"] == 0


def test_the_operator_cli_works_against_the_stack_from_an_env_file(
    stack: Stack, tmp_path, capsys
) -> None:
    from agent_harness.cli import main

    stack.invoke(stack.handler(AGENT), load_event("agent_call_post_message.json"), AGENT)
    drain_flush_queue(stack, stack.handler(FLUSH))
    env_file = tmp_path / "env.json"
    env_file.write_text(json.dumps({"MemoryConsolidateFunction": stack.env(CONSOLIDATE)}))
    where = ["--env-file", str(env_file)]
    capsys.readouterr()  # the handlers' metric lines

    assert main([*where, "consolidate-now", "alice"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "consolidated"
    assert main([*where, "show", "alice"]) == 0
    assert "window seats" in capsys.readouterr().out
    assert main([*where, "consolidate-now", "bob", "--queue"]) == 0
    capsys.readouterr()
    assert [json.loads(m["Body"])["user_id"] for m in stack.receive("ConsolidationQueue")] == [
        "bob"
    ]
    assert main([*where, "forget", "alice", "--yes"]) == 0
    assert json.loads(capsys.readouterr().out)["items"] >= 2
    assert not [k for k in stack.object_keys() if k.startswith("users/alice/")]


def test_a_session_id_with_a_colon_works_through_a_turn_the_flush_search_and_forget(
    stack: Stack,
) -> None:
    agent, flush = stack.handler(AGENT), stack.handler(FLUSH)
    answer = post(stack, agent, "chat:42", "I prefer window seats on long flights.")
    assert answer["session_id"] == "chat:42" and answer["turn"] == 1
    assert "users/alice/sessions/chat:42/turns/00000001.json" in stack.object_keys()

    assert drain_flush_queue(stack, flush) == ["turn"]
    assert "> source: session=chat:42 turns=1" in ledger_text(stack)
    search = load_event("agent_call_sessions_search.json")
    search["isBase64Encoded"] = False
    search["body"] = json.dumps({"query": "window seats", "match_mode": "any"})
    found = body(stack.invoke(agent, search, AGENT))
    assert [(h["session_id"], h["turn"]) for h in found["hits"]] == [("chat:42", 1)]

    forgotten = stack.invoke(agent, load_event("agent_call_forget.json"), AGENT)
    assert forgotten["statusCode"] == 204
    assert not [k for k in stack.object_keys() if k.startswith("users/alice/")]


class InvokesInProcess:
    """A Lambda client whose Invoke runs a handler module of this process, as the
    service would run the named function (moto's Lambda would need Docker)."""

    def __init__(self, stack: Stack, handlers: dict[str, object]) -> None:
        self.stack, self.handlers = stack, handlers
        self.invoked: list[str] = []

    def invoke(self, *, FunctionName: str, InvocationType: str, Payload: bytes) -> dict:
        import io

        assert InvocationType == "RequestResponse"
        self.invoked.append(FunctionName)
        function_id = {self.stack.resolver.refs[f]: f for f in self.handlers}[FunctionName]
        event = json.loads(Payload)
        answer = self.stack.invoke(self.handlers[function_id], event, function_id)
        return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(answer).encode())}


# both handlers share this process's metric set (two processes in Lambda): the forget
# handler's flush empties it before the agent's
@pytest.mark.filterwarnings("ignore:No application metrics to publish")
def test_delete_memory_in_the_agent_function_runs_in_the_forget_function(stack: Stack) -> None:
    """The agent function holds no erasure rights: DELETE /v1/memory invokes the forget
    function (its event: events/memory_forget.json), which removes every version and
    item of the user and answers what it removed."""
    agent = stack.handler(
        AGENT, HARNESS_FORGET_FUNCTION=stack.resolver.refs["MemoryForgetFunction"]
    )
    forget = stack.handler("MemoryForgetFunction")
    post(stack, agent, "s1", "Remember that I prefer window seats.")
    assert [k for k in stack.object_keys() if k.startswith("users/alice/")]

    direct = stack.invoke(forget, load_event("memory_forget.json"), "MemoryForgetFunction")
    assert direct["object_versions"] >= 2 and direct["items"] >= 1
    assert not [k for k in stack.object_keys() if k.startswith("users/alice/")]

    post(stack, agent, "s2", "Remember that I like tea.")
    lambdas = InvokesInProcess(stack, {"MemoryForgetFunction": forget})
    agent.runtime.eraser._make_client = lambda: lambdas
    forgotten = stack.invoke(agent, load_event("agent_call_forget.json"), AGENT)
    assert forgotten["statusCode"] == 204, forgotten
    assert lambdas.invoked == [stack.resolver.refs["MemoryForgetFunction"]]
    assert not [k for k in stack.object_keys() if k.startswith("users/alice/")]
    assert not [i for i in stack.items() if i["pk"]["S"] == "U#alice"]


def test_a_forget_function_that_fails_is_a_503_and_the_request_can_be_sent_again(
    stack: Stack,
) -> None:
    agent = stack.handler(
        AGENT, HARNESS_FORGET_FUNCTION=stack.resolver.refs["MemoryForgetFunction"]
    )
    post(stack, agent, "s1", "Remember that I prefer window seats.")

    class Failing:
        def invoke(self, **_: object) -> dict:
            import io

            error = {"errorMessage": "S3 was down", "errorType": "StoreError"}
            payload = io.BytesIO(json.dumps(error).encode())
            return {"StatusCode": 200, "FunctionError": "Unhandled", "Payload": payload}

    agent.runtime.eraser._make_client = Failing
    failed = stack.invoke(agent, load_event("agent_call_forget.json"), AGENT)
    assert failed["statusCode"] == 503, failed
    assert "again" in body(failed)["error"]["message"]
    assert [k for k in stack.object_keys() if k.startswith("users/alice/")]  # nothing lost


def test_a_save_through_the_api_is_indexed_by_a_job_on_the_flush_queue(stack: Stack) -> None:
    embeddings = {"HARNESS_EMBEDDING_MODEL": "stand-in"}
    agent = stack.handler(AGENT, **embeddings)
    response = stack.invoke(agent, load_event("agent_call_memory_save.json"), AGENT)
    assert response["statusCode"] == 200
    vectors = "users/alice/index/vectors/stand-in/memory.json"
    assert vectors not in stack.object_keys()  # nothing embedded on the request

    messages = stack.receive("FlushQueue")
    assert [json.loads(m["Body"])["kind"] for m in messages] == ["index"]
    flush = stack.handler(FLUSH, **embeddings)
    result = stack.invoke(flush, stack.sqs_event("FlushQueue", messages), FLUSH)

    assert result == {"batchItemFailures": []}
    assert vectors in stack.object_keys()


def test_forgetting_a_user_deletes_their_dead_letters_and_puts_back_the_others(
    stack: Stack,
) -> None:
    """A failed job names its user (and their session): it goes with them; another
    user's failed job stays where the operator will look for it, visible at once."""
    sqs = stack.clients["sqs"]
    flush_dlq, consolidation_dlq = (
        stack.resolver.refs[q] for q in ("FlushDLQ", "ConsolidationDLQ")
    )
    for n, (url, user) in enumerate(
        [
            (flush_dlq, "alice"),
            (flush_dlq, "bob"),
            (flush_dlq, "alice"),
            (consolidation_dlq, "alice"),
        ]
    ):
        body = json.dumps({"user_id": user, "session_id": "s1", "turn": n + 1})
        fifo = (
            {"MessageGroupId": user, "MessageDeduplicationId": f"d{n}"}
            if url.endswith(".fifo")
            else {}
        )
        sqs.send_message(QueueUrl=url, MessageBody=body, **fifo)
    forget = stack.handler(
        "MemoryForgetFunction",
        HARNESS_FLUSH_DLQ_URL=flush_dlq,
        HARNESS_CONSOLIDATION_DLQ_URL=consolidation_dlq,
    )

    done = stack.invoke(forget, load_event("memory_forget.json"), "MemoryForgetFunction")

    assert done["dead_letters"] == 3
    left = sqs.receive_message(QueueUrl=flush_dlq, MaxNumberOfMessages=10, WaitTimeSeconds=0)
    assert [json.loads(m["Body"])["user_id"] for m in left.get("Messages", [])] == ["bob"]
    assert not sqs.receive_message(QueueUrl=consolidation_dlq, WaitTimeSeconds=0).get("Messages")
