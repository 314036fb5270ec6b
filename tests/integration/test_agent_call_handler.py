"""functions/agent_call on the events in events/, with moto behind it."""

from __future__ import annotations

import base64
import json
import threading

import pytest

from agent_harness.models import ModelRegistry
from tests.conftest import load_event
from tests.fakes import ScriptedModel
from tests.integration.conftest import Stack, body

FN = "AgentCallFunction"


def with_body(event: dict, payload: object) -> dict:
    event = dict(event)
    event["body"] = base64.b64encode(json.dumps(payload).encode()).decode()
    event["isBase64Encoded"] = True
    return event


def as_user(event: dict, sub: str) -> dict:
    event = json.loads(json.dumps(event))
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = sub
    return event


def test_health_needs_no_identity(stack: Stack) -> None:
    app = stack.handler(FN)
    response = stack.invoke(app, load_event("agent_call_health.json"), FN)
    assert response["statusCode"] == 200 and body(response) == {"status": "ok"}


def test_a_message_is_answered_logged_and_queued_for_flush(stack: Stack) -> None:
    app = stack.handler(FN)

    response = stack.invoke(app, load_event("agent_call_post_message.json"), FN)

    assert response["statusCode"] == 200
    reply = body(response)
    assert set(reply) >= {"session_id", "turn", "reply", "usage", "compacted", "flush"}
    assert set(reply["usage"]) == {"input_tokens", "output_tokens", "memory_tokens", "by_role"}
    by_role = reply["usage"]["by_role"]
    assert by_role["agent"]["input_tokens"] == reply["usage"]["input_tokens"] > 0
    assert by_role["compaction"] == {"input_tokens": 0, "output_tokens": 0}
    assert (reply["session_id"], reply["turn"], reply["flush"]) == ("trip-planning", 1, "queued")
    assert reply["reply"].startswith("[offline model]")
    record = json.loads(stack.text("users/alice/sessions/trip-planning/turns/00000001.json"))
    assert record["messages"][0]["content"].startswith("Hi! Please remember")
    [message] = stack.receive("FlushQueue")
    assert message["Attributes"]["MessageGroupId"] == "alice"
    assert json.loads(message["Body"])["turn"] == 1


def count_requests(app) -> list[str]:
    """Count AWS requests with botocore event hooks on the handler's own clients."""
    calls: list[str] = []
    for client in app.runtime.clients.values():
        client.meta.events.register(
            "before-parameter-build",  # once per API call, with the call's parameters
            lambda params, model, **kw: calls.append(f"{model.name}:{params.get('Key', '')}"),
        )
    return calls


HOT_PATH = [
    "UpdateItem",  # the session lease
    "GetObject",  # MEMORY.md
    "GetObject",  # the working context
    "ListObjectsV2",  # memory/ and index/threads/, for automatic recall (files cached)
    "PutObject",  # the turn's log object
    "PutObject",  # the working context
    "TransactWriteItems",  # commit and release, with the user's usage counted
    "SendMessage",  # the post-turn job
]


def test_the_hot_path_makes_at_most_eight_aws_requests_when_warm(stack: Stack) -> None:
    stack.clients["s3"].put_object(
        Bucket=stack.bucket,
        Key="users/alice/memory/2026-11-29.md",
        Body=b"## Flush\n- Alice flies to Lisbon in June and prefers aisle seats\n",
    )
    app = stack.handler(FN, HARNESS_RECALL_LISTING_SECONDS="0")  # the worst case: LIST each turn
    stack.invoke(app, load_event("agent_call_post_message.json"), FN)  # reads the ledger once
    calls = count_requests(app)

    response = stack.invoke(app, load_event("agent_call_post_message.json"), FN)

    assert response["statusCode"] == 200
    assert sorted(c.split(":")[0] for c in calls) == sorted(HOT_PATH)
    assert not any("memory/2026-11-29.md" in c for c in calls)  # revalidated, not re-read


@pytest.mark.parametrize(
    "settings",
    [
        {},  # the default: a listing is reused for 30 s, so a turn soon after needs none
        {"HARNESS_RECALL_MAX_TOKENS": "0"},  # recall off: no listing at all
    ],
    ids=["listing-reused", "recall-off"],
)
def test_a_second_turn_needs_no_ledger_listing_so_seven_requests(
    stack: Stack, settings: dict[str, str]
) -> None:
    app = stack.handler(FN, **settings)
    stack.invoke(app, load_event("agent_call_post_message.json"), FN)
    calls = count_requests(app)

    response = stack.invoke(app, load_event("agent_call_post_message.json"), FN)

    assert response["statusCode"] == 200
    assert sorted(c.split(":")[0] for c in calls) == sorted(
        c for c in HOT_PATH if c != "ListObjectsV2"
    )


BUDGETS = {"HARNESS_USER_DAILY_TURNS": "5", "HARNESS_USER_DAILY_TOKENS": "100000"}


def ops(calls: list[str]) -> list[str]:
    return sorted(c.split(":")[0] for c in calls)


def test_recall_lists_the_thread_segments_with_the_ledgers_in_one_request(
    stack: Stack,
) -> None:
    app = stack.handler(FN, HARNESS_RECALL_LISTING_SECONDS="0")
    cold = count_requests(app)
    stack.invoke(app, load_event("agent_call_post_message.json"), FN)
    assert ops(cold).count("ListObjectsV2") == 1  # a container new to the user too
    calls = count_requests(app)

    response = stack.invoke(app, load_event("agent_call_post_message.json"), FN)

    assert response["statusCode"] == 200
    assert ops(calls) == sorted(HOT_PATH)
    # past messages off: the ledgers alone, the same count
    alone = stack.handler(FN, HARNESS_RECALL_LISTING_SECONDS="0", HARNESS_RECALL_MESSAGES="false")
    stack.invoke(alone, load_event("agent_call_post_message.json"), FN)
    calls = count_requests(alone)
    stack.invoke(alone, load_event("agent_call_post_message.json"), FN)
    assert ops(calls) == sorted(HOT_PATH)


def test_with_budgets_the_lease_write_admits_the_turn_so_no_request_is_added(
    stack: Stack,
) -> None:
    app = stack.handler(FN, **BUDGETS)
    calls = count_requests(app)
    assert stack.invoke(app, load_event("agent_call_post_message.json"), FN)["statusCode"] == 200
    # the lease's UpdateItem becomes a TransactWriteItems with the admission in it
    with_budgets = [c if c != "UpdateItem" else "TransactWriteItems" for c in HOT_PATH]
    assert ops(calls) == sorted(with_budgets)  # a new session: AGENTS.md for the context
    calls.clear()

    response = stack.invoke(app, load_event("agent_call_post_message.json"), FN)

    assert response["statusCode"] == 200
    assert ops(calls) == sorted(c for c in with_budgets if c != "ListObjectsV2")


def test_a_container_new_to_a_session_tries_the_lease_write_once_more(stack: Stack) -> None:
    first = stack.handler(FN, **BUDGETS)
    assert stack.invoke(first, load_event("agent_call_post_message.json"), FN)["statusCode"] == 200
    other = stack.handler(FN, **BUDGETS)  # a cold container: it guesses a new session
    calls = count_requests(other)

    response = stack.invoke(other, load_event("agent_call_post_message.json"), FN)

    assert response["statusCode"] == 200 and body(response)["turn"] == 2
    with_budgets = [c if c != "UpdateItem" else "TransactWriteItems" for c in HOT_PATH]
    assert ops(calls) == sorted([*with_budgets, "TransactWriteItems"])


def test_a_spent_turn_budget_is_429_with_retry_after_and_writes_nothing(stack: Stack) -> None:
    app = stack.handler(FN, HARNESS_USER_DAILY_TURNS="1")
    assert stack.invoke(app, load_event("agent_call_post_message.json"), FN)["statusCode"] == 200
    before = stack.object_keys()
    refused = stack.invoke(app, load_event("agent_call_post_message.json"), FN)
    assert refused["statusCode"] == 429 and body(refused)["error"]["code"] == "budget_exhausted"
    assert int(refused["headers"]["Retry-After"]) > 0
    assert stack.object_keys() == before


def test_a_new_sessions_first_turn_also_makes_at_most_eight_requests(stack: Stack) -> None:
    app = stack.handler(FN)
    calls = count_requests(app)

    response = stack.invoke(app, load_event("agent_call_post_message.json"), FN)

    assert response["statusCode"] == 200
    assert len(calls) == 8
    assert "GetObject:users/alice/AGENTS.md" in calls  # the persona, instead of a context


def test_memory_save_then_search_through_the_api(stack: Stack) -> None:
    app = stack.handler(FN)
    saved = stack.invoke(app, load_event("agent_call_memory_save.json"), FN)
    assert (saved["statusCode"], body(saved)) == (200, {"saved": 2, "held": 0})
    assert "- [save:api] Allergic to peanuts" in stack.text("users/alice/MEMORY.md")

    found = body(stack.invoke(app, load_event("agent_call_memory_search.json"), FN))
    assert found["match_mode"] == "all"
    assert [(h["path"], h["line"], h["text"]) for h in found["hits"]] == [
        ("MEMORY.md", 1, "- [save:api] Prefers window seats on long flights"),
        (found["hits"][1]["path"], 4, "- [save:api] Prefers window seats on long flights"),
    ]
    assert found["hits"][1]["path"].startswith("memory/")

    ranked = with_body(
        load_event("agent_call_memory_search.json"),
        {"query": "peanut allergy", "match_mode": "ranked"},
    )
    hits = body(stack.invoke(app, ranked, FN))["hits"]
    assert hits[0]["text"] == "- [save:api] Allergic to peanuts" and hits[0]["score"] > 0
    assert len({h["text"] for h in hits}) == len(hits)  # each distinct line once


@pytest.mark.parametrize(
    ("payload", "status"),
    [
        ({"query": "x", "match_mode": ""}, 422),
        ({"query": "x", "match_mode": "fuzzy"}, 422),
        ({"query": "x", "limit": 0}, 422),
        ({"query": 5}, 422),
        ({"match_mode": "any"}, 422),
    ],
)
def test_bad_searches_are_422(stack: Stack, payload: dict, status: int) -> None:
    event = with_body(load_event("agent_call_memory_search.json"), payload)
    assert stack.invoke(stack.handler(FN), event, FN)["statusCode"] == status


def test_a_blank_search_matches_nothing_and_says_so(stack: Stack) -> None:
    app = stack.handler(FN)
    saved = stack.invoke(app, load_event("agent_call_memory_save.json"), FN)
    assert saved["statusCode"] == 200  # a memory with lines a search could match
    search = load_event("agent_call_memory_search.json")

    blank = with_body(search, {"query": "  ", "match_mode": None})
    assert body(stack.invoke(app, blank, FN)) == {"hits": [], "message": "no query provided"}

    # the same memory, a real query: the line is there, and found
    real = with_body(search, {"query": "peanuts", "match_mode": None})
    found = body(stack.invoke(app, real, FN))
    assert found["match_mode"] == "phrase"
    assert found["hits"], found
    assert (found["hits"][0]["path"], found["hits"][0]["text"]) == (
        "MEMORY.md",
        "- [save:api] Allergic to peanuts",
    )


def test_a_blank_save_is_422_and_writes_nothing(stack: Stack) -> None:
    event = with_body(load_event("agent_call_memory_save.json"), {"content": " \n "})
    response = stack.invoke(stack.handler(FN), event, FN)
    assert response["statusCode"] == 422 and stack.object_keys() == []


def test_invalid_input_gets_a_clear_4xx_and_writes_nothing(stack: Stack) -> None:
    app = stack.handler(FN)
    cases = [
        (load_event("agent_call_post_message_invalid.json"), 422, "validation_error"),
        (
            with_body(load_event("agent_call_post_message.json"), {"message": ""}),
            422,
            "validation_error",
        ),
        (
            with_body(load_event("agent_call_post_message.json"), {"message": 42}),
            422,
            "validation_error",
        ),
        (
            {**load_event("agent_call_post_message.json"), "body": "bm90IGpzb24="},
            400,
            "invalid_request",
        ),
        (
            with_body(load_event("agent_call_post_message.json"), {"message": "x" * 100_001}),
            413,
            "payload_too_large",
        ),
    ]
    for event, status, code in cases:
        response = stack.invoke(app, event, FN)
        assert response["statusCode"] == status, code
        assert body(response)["error"]["code"] == code
        assert body(response)["error"]["message"]
    assert stack.object_keys() == [] and stack.items() == [] and stack.receive("FlushQueue") == []


def test_a_bad_session_id_is_rejected(stack: Stack) -> None:
    event = load_event("agent_call_post_message.json")
    event["rawPath"] = event["requestContext"]["http"]["path"] = "/v1/sessions/.hidden/messages"
    response = stack.invoke(stack.handler(FN), event, FN)
    assert response["statusCode"] == 422 and stack.object_keys() == []


def test_without_a_sub_claim_the_caller_is_unauthorized(stack: Stack) -> None:
    event = load_event("agent_call_get_memory.json")
    event["requestContext"]["authorizer"]["jwt"]["claims"].pop("sub")
    event["headers"]["x-user-id"] = "mallory"  # ignored outside dev mode
    response = stack.invoke(stack.handler(FN), event, FN)
    assert response["statusCode"] == 401 and body(response)["error"]["code"] == "unauthorized"


def test_dev_mode_takes_the_user_from_x_user_id(stack: Stack) -> None:
    app = stack.handler(FN, HARNESS_AUTH_MODE="dev")
    event = load_event("agent_call_post_message.json")
    event["headers"]["x-user-id"] = "dev-user"
    assert stack.invoke(app, event, FN)["statusCode"] == 200
    assert stack.text("users/dev-user/sessions/trip-planning/turns/00000001.json")
    event["headers"].pop("x-user-id")
    assert stack.invoke(app, event, FN)["statusCode"] == 401


@pytest.mark.parametrize("mode", ["dev", "jwt"])
def test_a_dev_mode_cold_start_is_logged_and_counted(
    stack: Stack, capsys, monkeypatch, mode: str
) -> None:
    from agent_harness.api import routes

    warnings: list[str] = []
    monkeypatch.setattr(routes.logger, "warning", lambda msg, *a, **k: warnings.append(msg))
    capsys.readouterr()
    app = stack.handler(FN, HARNESS_AUTH_MODE=mode)  # the cold start
    stack.invoke(app, load_event("agent_call_health.json"), FN)  # flushes its metrics
    captured = capsys.readouterr()
    metrics = [json.loads(line) for line in captured.out.splitlines() if '"_aws"' in line]
    counted = any("DevModeColdStarts" in m for m in metrics)
    assert counted == (mode == "dev")
    assert any("X-User-Id header is trusted" in w for w in warnings) == (mode == "dev")


def test_a_second_concurrent_call_on_a_held_session_gets_409_and_writes_nothing(
    stack: Stack,
) -> None:
    app = stack.handler(FN)
    entered, release = threading.Event(), threading.Event()

    def slow_reply(request):  # type: ignore[no-untyped-def]
        entered.set()
        assert release.wait(10)
        return "first reply"

    model = ScriptedModel(slow_reply, "never used")
    app.runtime.models = ModelRegistry(app.runtime.settings, overrides={"agent": model})
    first: dict = {}
    worker = threading.Thread(
        target=lambda: first.update(
            stack.invoke(app, load_event("agent_call_post_message.json"), FN)
        )
    )
    worker.start()
    assert entered.wait(10)

    second = stack.invoke(app, load_event("agent_call_post_message.json"), FN)
    release.set()
    worker.join(10)

    assert second["statusCode"] == 409
    assert body(second)["error"]["code"] == "session_busy"
    assert 1 <= int(second["headers"]["Retry-After"]) <= 60
    assert first["statusCode"] == 200
    assert [k for k in stack.object_keys() if "/turns/" in k] == [
        "users/alice/sessions/trip-planning/turns/00000001.json"
    ]
    assert len(stack.receive("FlushQueue")) == 1
    assert len(model.requests) == 1


def test_the_thread_log_can_be_read_back(stack: Stack) -> None:
    app = stack.handler(FN)
    for _ in range(3):
        stack.invoke(app, load_event("agent_call_post_message.json"), FN)
    response = stack.invoke(app, load_event("agent_call_get_messages.json"), FN)
    listing = body(response)
    assert [t["turn"] for t in listing["turns"]] == [1, 2, 3]
    assert listing["next_after"] is None
    paged = load_event("agent_call_get_messages.json", rawQueryString="after=1&limit=1")
    paged["queryStringParameters"] = {"after": "1", "limit": "1"}
    page = body(stack.invoke(app, paged, FN))
    assert [t["turn"] for t in page["turns"]] == [2] and page["next_after"] == 2


def test_usage_reports_the_callers_spend_by_role_and_day(stack: Stack) -> None:
    app = stack.handler(FN)
    turns = [body(stack.invoke(app, load_event("agent_call_post_message.json"), FN)) for _ in "ab"]
    report = body(stack.invoke(app, load_event("agent_call_get_usage.json"), FN))
    assert len(report["days"]) == 7 and report["totals"]["turns"] == 2
    agent = report["totals"]["by_role"]["agent"]
    spent = sum(t["usage"]["by_role"]["agent"]["input_tokens"] for t in turns)
    assert agent["input_tokens"] == spent
    bad = load_event("agent_call_get_usage.json", rawQueryString="days=0")
    bad["queryStringParameters"] = {"days": "0"}
    refused = stack.invoke(app, bad, FN)
    assert refused["statusCode"] == 422 and body(refused)["error"]["code"] == "validation_error"


def test_memory_edits_are_conditional_and_versioned(stack: Stack) -> None:
    app = stack.handler(FN)
    create = load_event("agent_call_put_memory.json")
    assert stack.invoke(app, create, FN)["statusCode"] == 201
    assert stack.invoke(app, create, FN)["statusCode"] == 412  # exists already

    unconditional = json.loads(json.dumps(create))
    unconditional["headers"].pop("if-none-match")
    assert stack.invoke(app, unconditional, FN)["statusCode"] == 428

    current = body(stack.invoke(app, load_event("agent_call_get_memory.json"), FN))
    assert current["content"].startswith("# Memory")
    edit = with_body(unconditional, {"content": "# Memory\n\n- Prefers window seats.\n"})
    edit["headers"]["if-match"] = current["etag"]
    assert stack.invoke(app, edit, FN)["statusCode"] == 200
    assert stack.invoke(app, edit, FN)["statusCode"] == 412  # stale etag now

    versions_event = load_event("agent_call_get_memory.json", rawPath="/v1/memory/versions")
    versions_event["requestContext"]["http"]["path"] = "/v1/memory/versions"
    versions = body(stack.invoke(app, versions_event, FN))["versions"]
    assert len(versions) == 2 and versions[0]["is_latest"]

    rollback = with_body(
        load_event("agent_call_consolidate.json"), {"version_id": versions[1]["version_id"]}
    )
    rollback["rawPath"] = rollback["requestContext"]["http"]["path"] = "/v1/memory/rollback"
    assert stack.invoke(app, rollback, FN)["statusCode"] == 200
    restored = body(stack.invoke(app, load_event("agent_call_get_memory.json"), FN))
    assert "aisle" in restored["content"]
    assert len(body(stack.invoke(app, versions_event, FN))["versions"]) == 3


def test_a_user_never_sees_another_users_memory(stack: Stack) -> None:
    app = stack.handler(FN)
    assert stack.invoke(app, load_event("agent_call_put_memory.json"), FN)["statusCode"] == 201
    as_bob = as_user(load_event("agent_call_get_memory.json"), "bob")
    assert body(stack.invoke(app, as_bob, FN)) == {"content": "", "etag": None}
    sneaky = as_user(load_event("agent_call_get_memory.json"), "alice/../bob")
    assert body(stack.invoke(app, sneaky, FN))["content"] == ""
    assert all(k.startswith("users/alice/") for k in stack.object_keys())


def test_consolidate_now_is_queued(stack: Stack) -> None:
    response = stack.invoke(stack.handler(FN), load_event("agent_call_consolidate.json"), FN)
    assert response["statusCode"] == 202
    [message] = stack.receive("ConsolidationQueue")
    assert json.loads(message["Body"]) | {"requested_at": None} == {
        "v": 1,
        "kind": "consolidate",
        "user_id": "alice",
        "force": True,
        "requested_at": None,
    }


def test_unknown_routes_are_404_in_the_error_shape(stack: Stack) -> None:
    event = load_event("agent_call_get_memory.json", rawPath="/v2/nothing")
    event["requestContext"]["http"]["path"] = "/v2/nothing"
    response = stack.invoke(stack.handler(FN), event, FN)
    assert response["statusCode"] == 404 and body(response)["error"]["code"] == "not_found"


class SilentModelServer:
    """Accepts connections and reads requests, and never answers: a model that hangs."""

    def __init__(self) -> None:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.held: list[object] = []
        self.requests = 0
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.requests += 1
            self.held.append(conn)  # never answered, never closed until the end

    def close(self) -> None:
        self.stop.set()
        for conn in self.held:
            conn.close()  # type: ignore[attr-defined]
        self.sock.close()


def test_a_model_that_never_answers_is_a_504_before_the_function_timeout(stack: Stack) -> None:
    """The deadline: with 8 s left and a 3 s margin the model gets at most 5 s, the call
    answers 504 well before Lambda would kill it, and the session lease is released."""
    import time

    server = SilentModelServer()
    try:
        app = stack.handler(
            FN,
            HARNESS_MODEL="openai:hanging-model",
            OPENAI_BASE_URL=f"http://127.0.0.1:{server.port}/v1",
            HARNESS_REQUIRE_HTTPS="false",  # a plain local server stands in for the provider
            OPENAI_API_KEY="sk-test",
            HARNESS_DEADLINE_MARGIN_SECONDS="3",
        )
        event = load_event("agent_call_post_message.json")
        started = time.monotonic()
        response = stack.invoke(app, event, FN, timeout_seconds=8)
        elapsed = time.monotonic() - started

        assert response["statusCode"] == 504
        assert body(response)["error"]["code"] == "model_timeout"
        assert elapsed < 8  # answered before the function's timeout
        assert server.requests >= 1
        session = next(i for i in stack.items() if i["sk"]["S"] == "S#trip-planning")
        assert "lease_owner" not in session  # released: the next call is not 409
        assert not [k for k in stack.object_keys() if "/sessions/" in k]  # nothing written
        again = stack.invoke(app, event, FN, timeout_seconds=4)
        assert again["statusCode"] == 504
    finally:
        server.close()


def order_lookup_model() -> ScriptedModel:
    from agent_harness.models.base import Message, ToolCall

    return ScriptedModel(
        Message(
            role="assistant",
            tool_calls=[
                ToolCall(id="call_order_42", name="lookup_order", arguments='{"order_id": 42}')
            ],
        ),
        "Order 42 shipped with DHL.",
    )


def test_a_client_tool_round_trip_pauses_and_resumes_with_few_aws_requests(stack: Stack) -> None:
    app = stack.handler(FN)
    app.runtime.models = ModelRegistry(
        app.runtime.settings, overrides={"agent": order_lookup_model()}
    )
    calls = count_requests(app)

    paused = stack.invoke(app, load_event("agent_call_post_message_with_tools.json"), FN)

    assert paused["statusCode"] == 200
    assert body(paused)["status"] == "requires_action"
    assert body(paused)["tool_calls"] == [
        {"id": "call_order_42", "name": "lookup_order", "arguments": {"order_id": 42}}
    ]
    pause_requests = list(calls)
    assert len(pause_requests) <= 8 and stack.receive("FlushQueue") == []
    assert stack.text("users/alice/sessions/support-42/turns/00000001.json") is None
    calls.clear()

    done = stack.invoke(app, load_event("agent_call_tool_results.json"), FN)

    assert done["statusCode"] == 200, done
    assert body(done)["status"] == "completed" and body(done)["turn"] == 1
    assert body(done)["reply"] == "Order 42 shipped with DHL."
    assert len(calls) <= 7 and not any(c.startswith("GetObject:users/alice/MEMORY") for c in calls)
    record = json.loads(stack.text("users/alice/sessions/support-42/turns/00000001.json"))
    assert [m["role"] for m in record["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert '"carrier": "DHL"' in record["messages"][2]["content"]
    [job] = stack.receive("FlushQueue")
    assert json.loads(job["Body"])["turn"] == 1
    assert sorted(c.split(":")[0] for c in pause_requests) == sorted(
        # the pause and its spend: one transaction
        ["UpdateItem", "GetObject", "GetObject", "ListObjectsV2", "PutObject", "TransactWriteItems"]
    )


def test_a_response_is_answered_kept_with_its_turn_and_fetched_by_its_id(stack: Stack) -> None:
    app = stack.handler(FN)

    response = stack.invoke(app, load_event("agent_call_responses.json"), FN)

    assert response["statusCode"] == 200, response["body"]
    created = body(response)
    assert created["object"] == "response" and created["status"] == "completed"
    assert created["instructions"] == "You are a travel assistant."
    assert created["output"][0]["content"][0]["text"].startswith("[offline model]")
    session = response["headers"]["X-Session-Id"]
    record = json.loads(stack.text(f"users/alice/sessions/{session}/turns/00000001.json"))
    assert record["instructions"] == "You are a travel assistant."
    [message] = stack.receive("FlushQueue")  # the memory's flush, as for any turn
    assert json.loads(message["Body"])["session_id"] == session

    get = load_event("agent_call_get_usage.json")
    get["rawPath"] = get["requestContext"]["http"]["path"] = f"/v1/responses/{created['id']}"
    get["routeKey"] = get["requestContext"]["routeKey"] = "GET /v1/responses/{response_id}"
    get["rawQueryString"] = ""
    get["pathParameters"] = {"response_id": created["id"]}
    fetched = stack.invoke(app, get, FN)
    assert fetched["statusCode"] == 200 and body(fetched) == created
    assert stack.invoke(app, as_user(get, "mallory"), FN)["statusCode"] == 404


def test_a_fact_in_an_archived_ledger_is_superseded_and_read_back_with_its_history(
    stack: Stack,
) -> None:
    fact_id = "2026-11-02.0f938aa6"  # "The user lives in Lisbon." of 2026-11-02
    stack.clients["s3"].put_object(
        Bucket=stack.bucket,
        Key="users/alice/memory/archive/2026-11-02.md",
        Body=b"\n## Flush \xe2\x80\x94 2026-11-02T09:00:00Z\n- [user] The user lives in Lisbon.\n",
    )
    app = stack.handler(FN)
    event = load_event("agent_call_supersede_fact.json")
    answer = stack.invoke(app, event, FN)
    assert answer["statusCode"] == 200, body(answer)
    done = body(answer)
    assert (done["retired"], done["state"]) == (fact_id, "superseded")
    assert done["fact"]["by"] == done["id"]
    assert [h["id"] for h in done["fact"]["history"]] == [fact_id, done["id"]]
    again = stack.invoke(app, event, FN)
    assert (again["statusCode"], body(again)["error"]["code"]) == (409, "fact_not_current")
    other = stack.invoke(app, as_user(event, "bob"), FN)
    assert (other["statusCode"], body(other)["error"]["code"]) == (404, "fact_not_found")
    assert not [k for k in stack.object_keys() if k.startswith("users/bob/")]
