"""The typed client's errors and retries, on httpx.MockTransport: each status its
exception with the API's error code; 409, 429 and 5xx retried after the wait the answer
asks for (or a capped backoff), never when it says ``x-should-retry: false``; at most
``max_retries``; what it sends (identity, conditions, paths)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from agent_harness_client import (
    AgentHarness,
    AgentHarnessError,
    APIConnectionError,
    AsyncAgentHarness,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InternalServerError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    PreconditionFailedError,
    PreconditionRequiredError,
    RateLimitError,
    UnprocessableEntityError,
)

SAVED = {"saved": 1, "held": 0}


def error(status: int, code: str, message: str = "no", **headers: str) -> httpx.Response:
    body = {"error": {"code": code, "message": message}}
    return httpx.Response(status, json=body, headers=headers)


class Script:
    """Answers the requests in order, recording them."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def client(script: Script, slept: list[float], **kwargs: object) -> AgentHarness:
    http = httpx.Client(transport=httpx.MockTransport(script))
    return AgentHarness(
        "http://stack/", user_id="amy", http_client=http, sleep=slept.append, **kwargs
    )


def test_a_429_is_retried_after_its_retry_after() -> None:
    slept: list[float] = []
    script = Script(
        error(429, "model_rate_limited", **{"Retry-After": "3", "x-should-retry": "true"}),
        httpx.Response(200, json=SAVED),
    )
    assert client(script, slept).memory.save("I like tea.").saved == 1
    assert slept == [3.0]
    assert len(script.requests) == 2
    assert json.loads(script.requests[1].content) == {"content": "I like tea."}


def test_a_busy_session_is_retried_after_its_retry_after_ms() -> None:
    slept: list[float] = []
    busy = error(409, "session_busy", **{"Retry-After": "1", "retry-after-ms": "700"})
    busy.headers["x-should-retry"] = "true"
    script = Script(busy, busy, httpx.Response(200, json=SAVED))
    assert client(script, slept).memory.save("x").saved == 1
    assert slept == [0.7, 0.7]


def test_a_409_without_a_header_is_retried_with_a_capped_backoff() -> None:
    slept: list[float] = []
    script = Script(error(409, "conflict"), error(409, "conflict"), error(409, "conflict"))
    with pytest.raises(ConflictError) as raised:
        client(script, slept).memory.save("x")
    assert len(script.requests) == 3  # the first, and max_retries=2 more
    assert 0.375 <= slept[0] <= 0.5 and 0.75 <= slept[1] <= 1.0  # 0.5 s, doubled, jitter
    assert raised.value.code == "conflict"


def test_x_should_retry_false_is_never_retried() -> None:
    slept: list[float] = []
    script = Script(
        error(
            409,
            "fact_not_current",
            "fact 2026-01-01.0a1b2c3d is superseded",
            **{"x-should-retry": "false"},
        ),
    )
    with pytest.raises(ConflictError) as raised:
        client(script, slept).memory.supersede("2026-01-01.0a1b2c3d", "new")
    assert slept == [] and len(script.requests) == 1
    assert raised.value.code == "fact_not_current" and raised.value.status == 409
    assert "superseded" in raised.value.message


def test_a_spent_budget_is_not_waited_for() -> None:
    slept: list[float] = []
    spent = error(429, "budget_exhausted", **{"Retry-After": "7200", "x-should-retry": "false"})
    with pytest.raises(RateLimitError) as raised:
        client(Script(spent), slept).sessions.send("s1", "hi")
    assert raised.value.retry_after == 7200 and slept == []
    # told to retry, but after more than a minute: the caller decides, with retry_after
    later = error(429, "model_rate_limited", **{"Retry-After": "600", "x-should-retry": "true"})
    with pytest.raises(RateLimitError):
        client(Script(later), slept).sessions.send("s1", "hi")
    assert slept == []


def test_a_retry_after_date_is_waited_until() -> None:
    slept: list[float] = []
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=20), usegmt=True)
    script = Script(
        error(503, "store_unavailable", **{"Retry-After": when}), httpx.Response(200, json=SAVED)
    )
    client(script, slept).memory.save("x")
    assert 15 <= slept[0] <= 20


def test_5xx_are_retried_at_most_max_retries() -> None:
    slept: list[float] = []
    script = Script(*(error(503, "store_unavailable") for _ in range(4)))
    with pytest.raises(InternalServerError) as raised:
        client(script, slept, max_retries=3).memory.get()
    assert len(script.requests) == 4 and len(slept) == 3 and raised.value.status == 503
    none = Script(error(502, "model_error"))
    with pytest.raises(InternalServerError):
        client(none, slept, max_retries=0).memory.get()
    assert len(none.requests) == 1


def test_a_500_is_not_retried() -> None:
    slept: list[float] = []
    script = Script(error(500, "internal_error"))
    with pytest.raises(InternalServerError):
        client(script, slept).memory.get()
    assert slept == []


def test_a_404_raises_not_found_with_the_apis_code_and_details() -> None:
    slept: list[float] = []
    body = {"error": {"code": "fact_not_found", "message": "no fact", "details": {"id": "x"}}}
    script = Script(httpx.Response(404, json=body))
    with pytest.raises(NotFoundError) as raised:
        client(script, slept).memory.fact("2026-01-01.0a1b2c3d")
    found = raised.value
    assert (found.status, found.code, found.message, found.details) == (
        404,
        "fact_not_found",
        "no fact",
        {"id": "x"},
    )
    assert isinstance(found, AgentHarnessError) and found.response is not None
    assert slept == []


def test_openais_error_object_reads_the_same() -> None:
    slept: list[float] = []
    body = {
        "error": {
            "message": "Conversation with id 'conv_x' not found.",
            "type": "invalid_request_error",
            "code": "conversation_not_found",
            "param": None,
        }
    }
    script = Script(httpx.Response(404, json=body, headers={"x-should-retry": "false"}))
    with pytest.raises(NotFoundError) as raised:
        client(script, slept).conversations.retrieve("conv_x")
    assert raised.value.code == "conversation_not_found"
    assert raised.value.type == "invalid_request_error"


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, BadRequestError),
        (401, AuthenticationError),
        (403, PermissionDeniedError),
        (404, NotFoundError),
        (409, ConflictError),
        (412, PreconditionFailedError),
        (413, PayloadTooLargeError),
        (422, UnprocessableEntityError),
        (428, PreconditionRequiredError),
        (429, RateLimitError),
        (502, InternalServerError),
        (504, InternalServerError),
        (421, AgentHarnessError),
    ],
)
def test_each_status_is_its_exception(status: int, kind: type[AgentHarnessError]) -> None:
    script = Script(error(status, "some_code", **{"x-should-retry": "false"}))
    with pytest.raises(kind) as raised:
        client(script, [], max_retries=0).memory.get()
    assert raised.value.status == status and raised.value.code == "some_code"


def test_a_body_that_is_no_json_error_still_raises() -> None:
    script = Script(httpx.Response(502, text="Bad Gateway"))
    with pytest.raises(InternalServerError) as raised:
        client(script, [], max_retries=0).memory.get()
    assert raised.value.code is None and "Bad Gateway" in raised.value.message


def test_a_connection_that_was_never_made_is_retried_for_every_method() -> None:
    slept: list[float] = []
    refused = httpx.ConnectError("refused")
    script = Script(refused, httpx.Response(200, json=SAVED))
    assert client(script, slept).memory.save("x").saved == 1
    assert len(slept) == 1
    with pytest.raises(APIConnectionError) as raised:
        client(Script(refused, refused, refused), slept).memory.save("x")
    assert raised.value.status is None


def test_a_timeout_is_retried_only_where_sending_again_is_safe() -> None:
    slept: list[float] = []
    document = {"content": "", "etag": None}
    late = httpx.ReadTimeout("late")
    assert (
        client(Script(late, httpx.Response(200, json=document)), slept).memory.get().content == ""
    )
    posted = Script(late, httpx.Response(200, json=SAVED))
    with pytest.raises(APIConnectionError):  # the turn may be running: never twice
        client(posted, slept).sessions.send("s1", "hi")
    assert len(posted.requests) == 1


def test_what_the_client_sends() -> None:
    script = Script(
        httpx.Response(200, json={"etag": '"2"', "content": "x", "held": 0}),
        httpx.Response(201, json={"etag": '"1"', "content": "x", "held": 0}),
        httpx.Response(204),
        httpx.Response(200, json={"scope": "project:apollo", "user_id": "a/b", "removed": True}),
    )
    http = httpx.Client(transport=httpx.MockTransport(script))
    harness = AgentHarness(
        "http://stack/v1", token="jwt", user_id="amy", http_client=http, headers={"X-Admin": "true"}
    )
    harness.memory.put("x", etag='"1"')
    harness.memory.put("x", create=True)
    assert harness.memory.forget() is None
    harness.admin.remove_member("project:apollo", "a/b")
    replace, create, forget, remove = script.requests
    assert replace.headers["If-Match"] == '"1"' and "If-None-Match" not in replace.headers
    assert create.headers["If-None-Match"] == "*" and "If-Match" not in create.headers
    assert replace.headers["Authorization"] == "Bearer jwt"
    assert replace.headers["X-User-Id"] == "amy" and replace.headers["X-Admin"] == "true"
    assert str(forget.url) == "http://stack/v1/memory" and forget.method == "DELETE"
    assert remove.url.raw_path == b"/v1/admin/scopes/project:apollo/members/a%2Fb"


def test_the_environment_names_the_stack_and_the_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_HARNESS_URL", "http://elsewhere:9000")
    monkeypatch.setenv("AGENT_HARNESS_USER", "env-user")
    harness = AgentHarness()
    assert harness.base_url == "http://elsewhere:9000" and harness.user_id == "env-user"
    harness.close()


def test_the_async_client_retries_alike() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    script = Script(
        error(429, "model_rate_limited", **{"Retry-After": "2", "x-should-retry": "true"}),
        error(409, "session_busy", **{"x-should-retry": "true", "Retry-After": "1"}),
        httpx.Response(200, json=SAVED),
        error(404, "fact_not_found"),
    )

    async def scenario(make: Callable[[], httpx.AsyncClient]) -> None:
        async with AsyncAgentHarness(
            "http://stack", user_id="amy", http_client=make(), sleep=sleep
        ) as harness:
            assert (await harness.memory.save("x")).saved == 1
            with pytest.raises(NotFoundError) as raised:
                await harness.memory.fact("2026-01-01.0a1b2c3d")
            assert raised.value.code == "fact_not_found"

    asyncio.run(scenario(lambda: httpx.AsyncClient(transport=httpx.MockTransport(script))))
    assert slept == [2.0, 1.0]
