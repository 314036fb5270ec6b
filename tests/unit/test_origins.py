"""The doors: a local door answers only to its own names (421), every door refuses a web
origin it does not know (403), and /mcp applies the rule before identity in every mode;
a stateless /mcp answers GET and DELETE with 405."""

from __future__ import annotations

import json

import pytest

from agent_harness.api.origins import is_local_host, origin_allowed, refusal
from agent_harness.api.routes import build_app
from agent_harness.settings import Settings
from local_stack.lambdas import context_for, http_event
from tests.fakes import make_runtime

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
BASE = {"content-type": "application/json", "accept": "application/json", "x-user-id": "ann"}


@pytest.mark.parametrize(
    ("host", "ok"),
    [
        ("127.0.0.1:3000", True),
        ("localhost:3000", True),
        ("[::1]:3000", True),
        ("LOCALHOST", True),
        ("127.0.0.1", True),
        ("127.0.0.1:3001", False),
        ("rebind.test:3000", False),
        ("127.0.0.1.nip.io:3000", False),
        ("localhost.evil.example", False),
        ("", False),
        (None, False),
    ],
)
def test_a_local_door_answers_only_to_its_own_names(host: str | None, ok: bool) -> None:
    assert is_local_host(host, 3000) is ok
    answer = refusal({"Host": host} if host is not None else {}, (), local_port=3000)
    assert (answer is None) is ok
    assert ok or (answer is not None and answer.status == 421)


@pytest.mark.parametrize(
    ("origin", "host", "allowed", "ok"),
    [
        (None, "127.0.0.1:3000", (), True),  # an SDK, curl: no Origin
        ("http://127.0.0.1:3000", "127.0.0.1:3000", (), True),  # same origin
        ("http://localhost:3000", "127.0.0.1:3000", (), True),  # the same door's other name
        ("http://localhost:3000/", "localhost:3000", (), True),
        ("http://localhost:5173", "127.0.0.1:3000", (), False),  # another local server
        ("http://rebind.test:3000", "127.0.0.1:3000", (), False),
        ("null", "127.0.0.1:3000", (), False),  # a sandboxed frame or a file
        ("https://app.example", "127.0.0.1:3000", ("https://app.example",), True),
        ("https://APP.example", "api.example", ("https://app.example",), True),
        ("https://app.example.evil", "api.example", ("https://app.example",), False),
        ("https://api.example", "api.example", (), True),  # deployed: its own origin
        ("https://evil.example", "api.example", (), False),
    ],
)
def test_an_origin_passes_when_absent_own_or_allowed(
    origin: str | None, host: str, allowed: tuple[str, ...], ok: bool
) -> None:
    assert origin_allowed(origin, host, allowed) is ok
    answer = refusal({"host": host, "origin": origin} if origin else {"host": host}, allowed)
    assert (answer is None) is ok
    assert ok or (answer is not None and answer.status == 403 and "origin" in answer.message)


def mcp(rt, method: str = "POST", **headers: str) -> tuple[int, dict | None, dict]:
    event = http_event(
        method,
        "/mcp",
        headers=BASE | {"host": "api.example"} | headers,
        body=json.dumps(PING).encode(),
    )
    response = build_app(rt).resolve(event, context_for("AgentCallFunction"))
    body = json.loads(response["body"]) if response["body"] else None
    return response["statusCode"], body, response.get("headers", {})


def test_mcp_refuses_a_foreign_origin_before_identity_and_writes_nothing() -> None:
    rt = make_runtime(settings=Settings(auth_mode="dev"))
    for extra in ({}, {"x-user-id": ""}):
        status, body, _ = mcp(rt, origin="https://evil.example", **extra)
        assert status == 403 and body is not None
        assert body["jsonrpc"] == "2.0" and body["error"]["code"] == -32000
    assert rt.store.objects == {}
    assert mcp(rt)[:2] == (200, {"jsonrpc": "2.0", "id": 1, "result": {}})


def test_mcp_accepts_an_allowed_browser_origin() -> None:
    settings = Settings(auth_mode="dev", allowed_origins=("https://app.example",))
    status, body, headers = mcp(make_runtime(settings=settings), origin="https://app.example")
    assert (status, body) == (200, {"jsonrpc": "2.0", "id": 1, "result": {}})
    assert not any(name.lower().startswith("access-control-") for name in headers)


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_a_stateless_mcp_answers_get_and_delete_with_405(method: str) -> None:
    status, _, headers = mcp(make_runtime(settings=Settings(auth_mode="dev")), method)
    assert status == 405 and headers["Allow"] == "POST"
