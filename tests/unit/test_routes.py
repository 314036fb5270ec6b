"""The HTTP error contract: every failure is `{"error": {"code", "message"}}` with the
right status and headers, on the resolver with in-memory fakes."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from agent_harness.api.routes import build_app
from agent_harness.errors import (
    ModelAuthError,
    ModelBadRequestError,
    ModelError,
    ModelRateLimitError,
    ModelTimeoutError,
    ModelUnavailableError,
    StoreError,
)
from agent_harness.ids import User
from agent_harness.settings import Settings
from local_stack.lambdas import context_for, http_event
from tests.fakes import ScriptedModel, make_runtime

ALICE = User.from_id("alice")


def call(rt, method: str, path: str, payload: object | None = None, user: str | None = "alice"):
    headers = {"content-type": "application/json"}
    if user:
        headers["x-user-id"] = user
    body = json.dumps(payload).encode() if payload is not None else b""
    raw_path, _, query = path.partition("?")
    event = http_event(method, raw_path, query=query, headers=headers, body=body)
    response = build_app(rt).resolve(event, context_for("AgentCallFunction"))
    payload = json.loads(response["body"]) if response["body"] else None
    return response["statusCode"], payload, response.get("headers", {})


def dev_runtime(**kwargs):
    return make_runtime(settings=Settings(auth_mode="dev"), **kwargs)


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (ModelError("upstream 500"), 502, "model_error"),
        (ModelTimeoutError("slow"), 504, "model_timeout"),
        (ModelRateLimitError("limited", retry_after=9), 429, "model_rate_limited"),
        (ModelUnavailableError("overloaded"), 502, "model_unavailable"),
        (ModelAuthError("invalid x-api-key"), 502, "model_auth_failed"),
        (ModelBadRequestError("bad schema"), 502, "model_bad_request"),
    ],
)
def test_model_failures_map_to_gateway_errors(error: Exception, status: int, code: str) -> None:
    rt = dev_runtime(agent=ScriptedModel(error))
    got_status, body, headers = call(rt, "POST", "/v1/sessions/s1/messages", {"message": "hi"})
    assert (got_status, body["error"]["code"]) == (status, code)
    if isinstance(error, ModelRateLimitError):
        assert headers["Retry-After"] == "9"
    assert rt.store.objects == {}


def test_a_storage_outage_is_503_and_retryable() -> None:
    rt = dev_runtime()
    rt.store.fail_puts = lambda path: True
    status, body, _ = call(rt, "PUT", "/v1/memory", {"content": "x"}, user="alice")
    assert status == 428  # the precondition check comes first
    status, body, _ = call(rt, "POST", "/v1/sessions/s1/messages", {"message": "hi"})
    assert (status, body["error"]["code"]) == (503, "store_unavailable")


def test_a_bug_is_a_json_500_without_internals() -> None:
    rt = dev_runtime()

    def broken(*args, **kwargs):
        raise KeyError("secret internal detail")

    rt.store.get = broken
    status, body, _ = call(rt, "GET", "/v1/memory")
    assert status == 500
    assert body == {"error": {"code": "internal_error", "message": "internal error"}}


def test_store_errors_do_not_leak_other_users_paths() -> None:
    rt = dev_runtime()
    rt.store.get = lambda *a, **k: (_ for _ in ()).throw(StoreError("reading MEMORY.md failed"))
    status, body, _ = call(rt, "GET", "/v1/memory")
    assert status == 503 and "users/" not in body["error"]["message"]


def test_ledger_days_must_be_days() -> None:
    status, body, _ = call(dev_runtime(), "GET", "/v1/memory/ledger/..%2F..%2Fx")
    assert status in (404, 422)
    status, body, _ = call(dev_runtime(), "GET", "/v1/memory/ledger/2026-02-30")
    assert (status, body["error"]["code"]) == (422, "validation_error")
    status, body, _ = call(dev_runtime(), "GET", "/v1/memory/ledger/2026-02-27")
    assert (status, body["error"]["code"]) == (404, "not_found")


def test_query_parameters_are_validated() -> None:
    status, body, _ = call(dev_runtime(), "GET", "/v1/sessions/s1/messages?limit=0")
    assert (status, body["error"]["code"]) == (422, "validation_error")
    status, _, _ = call(dev_runtime(), "GET", "/v1/sessions/s1/messages?limit=abc")
    assert status == 422
    # "²" and "١" pass str.isdigit(); numbers in queries and paths are ASCII digits only
    for digit in ("\u00b2", "\u0661"):
        assert call(dev_runtime(), "GET", f"/v1/usage?days={quote(digit)}")[0] == 422
    squared = quote("\u00b2")
    status, _, _ = call(dev_runtime(), "GET", f"/v1/sessions/s1/turns/{squared}/memory")
    assert status in (404, 422)


def test_rollback_to_an_unknown_version_is_404() -> None:
    status, body, _ = call(dev_runtime(), "POST", "/v1/memory/rollback", {"version_id": "nope"})
    assert (status, body["error"]["code"]) == (404, "not_found")


def test_forget_deletes_the_callers_workspace_and_state_and_nothing_else() -> None:
    from agent_harness.agent.turn import run_turn

    rt = dev_runtime()
    for user in ("alice", "bob"):
        run_turn(rt, User.from_id(user), "s1", "Remember that I prefer tea.")
        call(rt, "POST", "/v1/memory/save", {"content": "likes green tea"}, user=user)
    rt.store.delete(User.from_id("alice"), "MEMORY.md")  # an old version behind a marker
    rt.queue.dead += [{"user_id": "alice", "turn": 1}, {"user_id": "bob", "turn": 1}]

    status, payload, _ = call(rt, "DELETE", "/v1/memory", user="alice")

    assert (status, payload) == (204, None)
    assert rt.queue.dead == [{"user_id": "bob", "turn": 1}]  # their failed jobs go too
    every_key = [*rt.store.objects, *rt.store.deleted]
    assert every_key and all(key.startswith("users/bob/") for key in every_key)
    assert {key for key, _ in rt.table.sessions} == {"bob"}
    assert call(rt, "GET", "/v1/memory", user="alice")[1] == {"content": "", "etag": None}
    assert call(rt, "GET", "/v1/memory", user="bob")[1]["content"]


def test_a_save_with_a_timestamp_is_recorded_in_that_days_ledger() -> None:
    rt = dev_runtime()  # the clock says 2026-11-30
    payload = {"content": "- went camping with family", "timestamp": "2023-06-27T10:00:00+02:00"}
    status, body, _ = call(rt, "POST", "/v1/memory/save", payload)
    assert (status, body) == (200, {"saved": 1, "held": 0})
    ledger = call(rt, "GET", "/v1/memory/ledger/2023-06-27")[1]["content"]
    assert "went camping with family" in ledger and "2023-06-27T08:00" in ledger
    assert call(rt, "GET", "/v1/memory/ledger/2026-11-30")[0] == 404  # not today's
    hits = call(rt, "POST", "/v1/memory/search", {"query": "June 2023", "match_mode": "ranked"})
    assert [h["path"] for h in hits[1]["hits"]] == ["memory/2023-06-27.md"]


@pytest.mark.parametrize(
    "timestamp", ["2023-06-27T10:00:00", "2026-12-01T09:00:00Z", "yesterday", ""]
)
def test_a_save_timestamp_without_offset_in_the_future_or_not_a_date_is_refused(
    timestamp: object,
) -> None:
    rt = dev_runtime()
    payload = {"content": "- likes tea", "timestamp": timestamp}
    status, body, _ = call(rt, "POST", "/v1/memory/save", payload)
    assert status in (400, 422) and body["error"]["code"]
    assert rt.store.objects == {}


def test_a_save_naming_its_source_turns_records_them_and_ranks_with_them() -> None:
    rt = dev_runtime(agent=ScriptedModel("Noted."))
    status, _, _ = call(rt, "POST", "/v1/sessions/trip/messages", {"message": "I fear flying."})
    assert status == 200
    payload = {"content": "- books aisle seats", "source": {"session_id": "trip", "turns": [1]}}
    assert call(rt, "POST", "/v1/memory/save", payload)[:2] == (200, {"saved": 1, "held": 0})
    ledger = call(rt, "GET", "/v1/memory/ledger/2026-11-30")[1]["content"]
    assert (
        "> source: session=trip turns=1 via=memory_save\n- [save:api] books aisle seats" in ledger
    )


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({"session_id": "trip", "turns": [2]}, "session trip has no turn 2 (its last turn is 1)"),
        ({"session_id": "other", "turns": [1]}, "session other has no turn 1 (it has no turns)"),
        ({"session_id": "bad id", "turns": [1]}, "session_id must be"),
        ({"session_id": "trip", "turns": []}, "turns"),
        ({"session_id": "trip", "turns": [0]}, "turns"),
        ({"session_id": "trip", "turns": ["1"]}, "turns"),
        ({"session_id": "trip", "turns": list(range(1, 102))}, "turns"),
        ({"session_id": "trip"}, "turns"),
        ({"session_id": "trip", "turns": [1], "model": "x"}, "model"),
    ],
)
def test_a_save_naming_turns_that_do_not_exist_or_a_malformed_source_is_422(
    source: dict, message: str
) -> None:
    rt = dev_runtime(agent=ScriptedModel("Noted."))
    call(rt, "POST", "/v1/sessions/trip/messages", {"message": "I fear flying."})
    before = dict(rt.store.objects)
    status, body, _ = call(rt, "POST", "/v1/memory/save", {"content": "- x", "source": source})
    assert (status, body["error"]["code"]) == (422, "validation_error")
    assert message in json.dumps(body["error"])  # the message, or the field in the details
    assert rt.store.objects == before  # nothing written


def test_one_user_cannot_name_another_users_turns_as_a_source() -> None:
    rt = dev_runtime(agent=ScriptedModel("Noted."))
    call(rt, "POST", "/v1/sessions/trip/messages", {"message": "I fear flying."}, user="bob")
    payload = {"content": "- x", "source": {"session_id": "trip", "turns": [1]}}
    status, body, _ = call(rt, "POST", "/v1/memory/save", payload, user="alice")
    assert status == 422 and "has no turn 1" in body["error"]["message"]


def test_forget_without_identity_is_401_and_deletes_nothing() -> None:
    rt = dev_runtime()
    call(rt, "POST", "/v1/memory/save", {"content": "likes tea"})
    status, payload, _ = call(rt, "DELETE", "/v1/memory", user=None)
    assert status == 401 and payload["error"]["code"]
    assert rt.store.objects


def test_a_body_that_is_not_utf8_is_a_400_not_a_500() -> None:
    import base64

    rt = dev_runtime()
    event = http_event(
        "POST",
        "/v1/memory/save",
        headers={"content-type": "application/json", "x-user-id": "alice"},
        body=b"\xa9\xff not utf-8",
    )
    assert event["isBase64Encoded"] and base64.b64decode(event["body"]).startswith(b"\xa9")
    response = build_app(rt).resolve(event, context_for("AgentCallFunction"))
    assert response["statusCode"] == 400
    assert json.loads(response["body"])["error"]["code"] == "invalid_request"
    assert rt.store.objects == {}


def test_the_openapi_document_covers_every_route_of_the_template() -> None:
    from local_stack.resources import load_template

    rt = dev_runtime()
    status, document, _ = call(rt, "GET", "/v1/openapi.json", user=None)  # no identity needed
    assert status == 200 and document["openapi"].startswith("3.1")
    events = load_template()["Resources"]["AgentCallFunction"]["Properties"]["Events"]
    declared = {
        (e["Properties"]["Path"], e["Properties"]["Method"].lower()) for e in events.values()
    }
    documented = {
        (path, method)
        for path, item in document["paths"].items()
        for method in item
        if method != "parameters"
    }
    assert declared == documented
    schemas = document["components"]["schemas"]
    assert [branch["required"] for branch in schemas["MessageBody"]["oneOf"]] == [
        ["message"],
        ["tool_results"],
        ["cancel"],
    ]
    assert schemas["MessageBody"]["additionalProperties"] is False  # unknown fields refused
    assert "ImportedMessage" in schemas  # nested models are components too


def test_id_limits_are_settings() -> None:
    rt = make_runtime(
        settings=Settings(auth_mode="dev", max_session_id_chars=8, max_user_id_chars=5)
    )
    status, body, _ = call(rt, "POST", "/v1/sessions/s-123456789/messages", {"message": "hi"})
    assert (status, body["error"]["code"]) == (422, "validation_error")
    status, _, _ = call(rt, "POST", "/v1/sessions/short/messages", {"message": "hi"}, user="alice")
    assert status == 200
    status, _, _ = call(rt, "GET", "/v1/memory", user="alice-the-long")
    assert status == 401
    assert rt.store.objects.keys() == {k for k in rt.store.objects if "/alice/" in k}


@pytest.mark.parametrize("user", ["é" * 256, "lone\ud800"])
def test_a_user_id_that_cannot_fit_a_storage_key_is_401_and_writes_nothing(user: str) -> None:
    model = ScriptedModel("never called")
    rt = dev_runtime(agent=model)
    status, body, _ = call(rt, "POST", "/v1/sessions/s1/messages", {"message": "hi"}, user=user)
    assert (status, body["error"]["code"]) == (401, "unauthorized")
    assert rt.store.objects == {} and model.requests == []


@pytest.mark.parametrize("route", ["/v1/memory/search", "/v1/sessions/search"])
def test_a_search_without_match_mode_ranks_when_no_line_holds_the_phrase_and_says_so(
    route: str,
) -> None:
    rt = dev_runtime(agent=ScriptedModel("好的"))
    rt.store.put(User.from_id("alice"), "MEMORY.md", "- 部署决定：使用蓝鲸方案\n", create_only=True)
    call(rt, "POST", "/v1/sessions/s1/messages", {"message": "部署决定：使用蓝鲸方案"})
    from agent_harness.memory.jobs.flush import run_post_turn_job

    while rt.queue.post_turn:
        run_post_turn_job(rt, rt.queue.post_turn.pop(0))

    status, body, _ = call(rt, "POST", route, {"query": "部署 蓝鲸"})

    assert status == 200 and body["match_mode"] == "ranked"
    assert body["hits"] and all(h["match_mode"] == "ranked" for h in body["hits"])
    status, body, _ = call(rt, "POST", route, {"query": "部署 蓝鲸", "match_mode": "phrase"})
    assert body["match_mode"] == "phrase" and body["hits"] == []  # explicit: literal
    status, body, _ = call(rt, "POST", route, {"query": "蓝鲸方案"})
    assert body["match_mode"] == "phrase" and body["hits"]
    assert "match_mode" not in body["hits"][0]  # the phrase answered
    status, body, _ = call(rt, "POST", route, {"query": "部署 蓝鲸", "match_mode": "all"})
    assert body["hits"]


def full_memory(limit: int = 1000):
    """A stack whose MEMORY.md is 30 characters short of its cap."""
    rt = make_runtime(settings=Settings(auth_mode="dev", max_memory_chars=limit))
    rt.store.put(ALICE, "MEMORY.md", "# Memory\n\n- " + "x" * (limit - 43) + "\n", create_only=True)
    return rt


def test_a_save_memory_md_has_no_room_for_is_413_memory_full_and_writes_nothing() -> None:
    rt = full_memory()
    before = dict(rt.store.objects)

    status, body, _ = call(rt, "POST", "/v1/memory/save", {"content": "- Prefers window seats"})

    assert (status, body["error"]["code"]) == (413, "memory_full")
    assert "consolidation" in body["error"]["message"]
    assert body["error"]["details"]["limit"] == 1000 < body["error"]["details"]["size"]
    assert rt.store.objects == before
    status, body, _ = call(rt, "POST", "/v1/memory/save", {"content": "- Likes tea"})
    assert (status, body["saved"]) == (200, 1)  # what fits is saved
    assert len(rt.store.text(ALICE, "MEMORY.md")) <= 1000


def test_a_put_or_rollback_over_the_memory_cap_is_413_memory_full() -> None:
    rt = full_memory()
    etag = rt.store.get(ALICE, "MEMORY.md").etag
    rt.store.put(ALICE, "MEMORY.md", "# Memory\n\n- " + "y" * 2000 + "\n", if_match=etag)
    [over, *_] = rt.store.list_versions(ALICE, "MEMORY.md")  # written before a lower cap
    etag = rt.store.get(ALICE, "MEMORY.md").etag

    status, body, _ = call(rt, "POST", "/v1/memory/rollback", {"version_id": over.version_id})
    assert (status, body["error"]["code"]) == (413, "memory_full")
    http_headers = {"content-type": "application/json", "x-user-id": "alice", "if-match": etag}
    event = http_event(
        "PUT", "/v1/memory", headers=http_headers, body=json.dumps({"content": "z" * 1001}).encode()
    )
    response = build_app(rt).resolve(event, context_for("AgentCallFunction"))
    assert response["statusCode"] == 413
    assert json.loads(response["body"])["error"]["code"] == "memory_full"
    assert len(rt.store.list_versions(ALICE, "MEMORY.md")) == 2


def test_a_put_under_the_cap_that_its_authority_tags_push_over_is_413_memory_full() -> None:
    rt = full_memory()
    etag = rt.store.get(ALICE, "MEMORY.md").etag
    lines = "".join(f"- fact {n}\n" for n in range(90))  # 900 characters, 1,890 as stored
    http_headers = {"content-type": "application/json", "x-user-id": "alice", "if-match": etag}
    event = http_event(
        "PUT", "/v1/memory", headers=http_headers, body=json.dumps({"content": lines}).encode()
    )
    response = build_app(rt).resolve(event, context_for("AgentCallFunction"))
    assert response["statusCode"] == 413
    assert json.loads(response["body"])["error"]["details"]["size"] > 1000
    assert len(rt.store.list_versions(ALICE, "MEMORY.md")) == 1


def test_an_agent_save_into_a_full_memory_md_is_a_tool_error_and_the_turn_answers() -> None:
    from tests.fakes import tool_call

    model = ScriptedModel(
        tool_call("memory_save", json.dumps({"content": "- Prefers window seats"}), "c1"),
        "I could not save that: memory is full.",
    )
    rt = full_memory()
    rt.models = make_runtime(agent=model).models
    before = rt.store.text(ALICE, "MEMORY.md")

    status, body, _ = call(rt, "POST", "/v1/sessions/s1/messages", {"message": "Remember it."})

    assert (status, body["status"]) == (200, "completed")
    result = model.requests[1].messages[-1]
    assert result.role == "tool" and result.content.startswith("Error: MEMORY.md would be")
    assert rt.store.text(ALICE, "MEMORY.md") == before


def test_a_save_that_no_longer_fits_when_the_turn_is_written_is_dropped_not_the_turn() -> None:
    from tests.fakes import tool_call

    rt = full_memory()

    def fill_meanwhile(_request):  # another writer takes the room after the tool said yes
        current = rt.store.get(ALICE, "MEMORY.md")
        rt.store.put(ALICE, "MEMORY.md", current.content + "- " + "w" * 25, if_match=current.etag)
        return "Saved."

    model = ScriptedModel(
        tool_call("memory_save", json.dumps({"content": "- Likes tea"}), "c1"), fill_meanwhile
    )
    rt.models = make_runtime(agent=model).models

    status, body, _ = call(rt, "POST", "/v1/sessions/s1/messages", {"message": "Remember it."})

    assert (status, body["status"]) == (200, "completed")
    assert model.requests[1].messages[-1].content.startswith("Saved 1 memory")
    assert "Likes tea" not in rt.store.text(ALICE, "MEMORY.md")
    assert len(rt.store.text(ALICE, "MEMORY.md")) <= 1000


def test_memory_versions_come_in_pages_with_a_limit_and_a_cursor() -> None:
    rt = dev_runtime()
    etag = rt.store.put(ALICE, "MEMORY.md", "- v0\n", create_only=True)
    for n in range(1, 5):
        etag = rt.store.put(ALICE, "MEMORY.md", f"- v{n}\n", if_match=etag)
    every = [v.version_id for v in rt.store.list_versions(ALICE, "MEMORY.md")]

    seen, cursor, pages = [], None, 0
    while True:
        query = "limit=2" + (f"&cursor={cursor}" if cursor else "")
        status, body, _ = call(rt, "GET", f"/v1/memory/versions?{query}")
        assert status == 200 and len(body["versions"]) <= 2
        seen += [v["version_id"] for v in body["versions"]]
        pages += 1
        if not (cursor := body["next_cursor"]):
            break
    assert seen == every and pages == 3
    status, body, _ = call(rt, "GET", "/v1/memory/versions")
    assert len(body["versions"]) == 5 and body["next_cursor"] is None
    for bad in ("limit=0", "limit=201", "cursor=", "cursor=a%20b", "cursor=" + "x" * 1025):
        status, body, _ = call(rt, "GET", f"/v1/memory/versions?{bad}")
        assert (status, body["error"]["code"]) == (422, "validation_error"), bad


@pytest.mark.parametrize("route", ["/v1/memory/search", "/v1/sessions/search"])
def test_a_search_query_over_its_cap_is_422_before_any_search(route: str) -> None:
    from agent_harness.memory.engine.index import MAX_QUERY_CHARS

    rt = dev_runtime()
    query = "tea " * (MAX_QUERY_CHARS // 4) + "x"
    status, body, _ = call(rt, "POST", route, {"query": query, "match_mode": "any"})
    assert (status, body["error"]["code"]) == (422, "validation_error")
    assert rt.store.calls == []
    status, _, _ = call(rt, "POST", route, {"query": query[:-1], "match_mode": "any"})
    assert status == 200


def test_a_budget_override_beyond_what_a_day_can_hold_is_422() -> None:
    rt = dev_runtime()
    headers = {"content-type": "application/json", "x-user-id": "op", "x-admin": "true"}
    for payload, status in (({"turns": 10**12 + 1}, 422), ({"turns": 10**12}, 200)):
        event = http_event(
            "PUT", "/v1/admin/users/bob/budget", headers=headers, body=json.dumps(payload).encode()
        )
        response = build_app(rt).resolve(event, context_for("AgentCallFunction"))
        assert response["statusCode"] == status, response["body"]
