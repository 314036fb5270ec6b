"""The local stack's doors against a browser, and over plain HTTP: a page whose name
rebinds to 127.0.0.1 (headless Chromium, ``--host-resolver-rules``) and a page of another
origin neither read nor write a user's memory, through the API, /mcp or the embedded AWS;
an origin HARNESS_ALLOWED_ORIGINS lists passes, and clients that are not browsers (no
``Origin``) pass as before. The worst case: the stack runs with LOCAL_DEFAULT_USER, so a
request needs no header at all to act as that user, and that user is the one attacked."""

from __future__ import annotations

import json
import socket
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from playwright import sync_api as playwright

from local_stack.process import LocalStackProcess, free_port
from tests.e2e.conftest import start_stack, stop_stack
from tests.e2e.test_console import CHROMIUM, FLAGS

pytestmark = pytest.mark.e2e

SECRET = "I keep the spare key under the blue flowerpot."
ANN = f"doors-{uuid.uuid4().hex[:8]}"
BUCKET = "agent-harness-local-workspace"
MCP_READ = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "memory_read", "arguments": {}},
}

#: what the attacker's page runs: each attempt, its status (0: the browser refused to let
#: the page see the answer) and any text it could read
ATTACKS = """
async (targets) => {
  const out = [];
  for (const t of targets) {
    try {
      const r = await fetch(t.url, t.init);
      let text = "";
      try { text = await r.text(); } catch (e) {}
      out.push({name: t.name, status: r.status, text});
    } catch (e) {
      out.push({name: t.name, status: 0, text: String(e)});
    }
  }
  return out;
}
"""


def _targets(api: str, moto: str, user: str) -> list[dict[str, Any]]:
    """Reads and writes of ``user``'s memory, as a page would try them."""
    json_headers = {"Content-Type": "application/json", "X-User-Id": user}
    save = {"content": "- attacker was here"}
    return [
        {"name": "read", "url": f"{api}/v1/memory", "init": {"headers": {"X-User-Id": user}}},
        {
            "name": "write",
            "url": f"{api}/v1/memory/save",
            "init": {"method": "POST", "headers": json_headers, "body": json.dumps(save)},
        },
        {  # a "simple" request: no preflight, the answer opaque, but it would still arrive
            "name": "blind-write",
            "url": f"{api}/v1/memory/save",
            "init": {
                "method": "POST",
                "mode": "no-cors",
                "headers": {"Content-Type": "text/plain"},
                "body": json.dumps(save),
            },
        },
        {
            "name": "mcp",
            "url": f"{api}/mcp",
            "init": {
                "method": "POST",
                "headers": json_headers | {"Accept": "application/json"},
                "body": json.dumps(MCP_READ),
            },
        },
        {"name": "aws", "url": f"{moto}/{BUCKET}?list-type=2", "init": {}},
    ]


@pytest.fixture(scope="module")
def stack(evil_site: str) -> Iterator[LocalStackProcess]:
    """A stack whose header-less requests are ANN's, trusting one browser origin."""
    env = {
        "HARNESS_MODEL": "offline",
        "LOCAL_DEFAULT_USER": ANN,
        "HARNESS_ALLOWED_ORIGINS": trusted(evil_site),
    }
    stack = start_stack(env)
    yield stack
    stop_stack(stack)


def trusted(site: str) -> str:
    """The same page server under the name the stack trusts."""
    return site.replace("rebind.test", "trusted.test")


@pytest.fixture(scope="module")
def ann(stack: LocalStackProcess) -> str:
    saved = stack.client(ANN).post("/v1/memory/save", json={"content": f"- {SECRET}"})
    assert saved.status_code == 200, saved.text
    return ANN


def _untouched(stack: LocalStackProcess, user: str) -> None:
    content = stack.client(user).get("/v1/memory").json()["content"]
    assert SECRET in content and "attacker" not in content


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make browser` installs Debian's chromium")
    with playwright.sync_playwright() as p:
        # every rebind.test name resolves to 127.0.0.1, as an attacker's DNS would answer;
        # and no Private Network Access, as in Firefox and Safari: the doors must hold alone
        rules = "--host-resolver-rules=MAP rebind.test 127.0.0.1, MAP trusted.test 127.0.0.1"
        no_pna = "--disable-features=" + ",".join(
            (
                "BlockInsecurePrivateNetworkRequests",
                "PrivateNetworkAccessSendPreflights",
                "PrivateNetworkAccessRespectPreflightResults",
                "LocalNetworkAccessChecks",
            )
        )
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=[*FLAGS, rules, no_pna])
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def evil_site() -> Iterator[str]:
    """The attacker's page server, reached as http://rebind.test:<port>/."""

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<!doctype html><title>cute cats</title><p>nothing to see"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://rebind.test:{server.server_address[1]}"
    server.shutdown()


def _ports(stack: LocalStackProcess) -> tuple[int, int]:
    return urlsplit(stack.url).port or 0, urlsplit(stack.aws_endpoint).port or 0


def test_a_rebound_page_reads_and_writes_nothing(
    stack: LocalStackProcess, browser: Any, ann: str
) -> None:
    """The attack itself: the page's origin is rebind.test:<the stack's port>, so to the
    browser every request below is same-origin; only the Host names the attacker."""
    api_port, moto_port = _ports(stack)
    results = []
    for port, origin in ((api_port, "api"), (moto_port, "aws")):
        page = browser.new_page()
        # the attacker's page, at the name that then resolves to 127.0.0.1
        page.route(
            f"http://rebind.test:{port}/",
            lambda route: route.fulfill(status=200, content_type="text/html", body="<p>hi"),
        )
        page.goto(f"http://rebind.test:{port}/")
        rebound = f"http://rebind.test:{port}"
        targets = [
            t for t in _targets(rebound, rebound, ann) if (t["name"] == "aws") == (origin == "aws")
        ]
        results += page.evaluate(ATTACKS, targets)
        page.close()
    assert {r["name"]: r["status"] for r in results} == {
        "read": 421,
        "write": 421,
        "blind-write": 421,
        "mcp": 421,
        "aws": 421,
    }
    assert not any(SECRET in r["text"] or "Contents" in r["text"] for r in results)
    _untouched(stack, ann)


def test_a_page_of_another_origin_reads_and_writes_nothing(
    stack: LocalStackProcess, browser: Any, ann: str, evil_site: str
) -> None:
    page = browser.new_page()
    page.goto(evil_site + "/")
    results = page.evaluate(ATTACKS, _targets(stack.url, stack.aws_endpoint, ann))
    page.close()
    # the browser shows the page nothing (no CORS header anywhere); blind: opaque, 0
    assert {r["name"]: r["status"] for r in results} == dict.fromkeys(
        ("read", "write", "blind-write", "mcp", "aws"), 0
    )
    assert not any(SECRET in r["text"] or "Contents" in r["text"] for r in results)
    _untouched(stack, ann)  # the blind write arrived, and was refused (403)


def test_a_page_of_an_allowed_origin_passes_the_door(
    stack: LocalStackProcess, browser: Any, ann: str, evil_site: str
) -> None:
    """HARNESS_ALLOWED_ORIGINS lets a browser client's requests in; still no CORS header,
    so only a client the browser does not hold to CORS (an extension, an app) reads."""
    page = browser.new_page()
    page.goto(trusted(evil_site) + "/")
    (sent,) = page.evaluate(
        ATTACKS,
        [t for t in _targets(stack.url, stack.aws_endpoint, ann) if t["name"] == "blind-write"],
    )
    page.close()
    assert sent["status"] == 0  # opaque to the page, but it arrived and was taken
    content = stack.client(ann).get("/v1/memory").json()["content"]
    assert "attacker was here" in content
    cleaned = content.replace("attacker was here", "cleaned")  # the other tests' baseline
    etag = stack.client(ann).get("/v1/memory").json()["etag"]
    put = stack.client(ann).put("/v1/memory", json={"content": cleaned}, headers={"If-Match": etag})
    assert put.status_code == 200, put.text


def test_plain_http_sees_the_same_doors(stack: LocalStackProcess, ann: str) -> None:
    api_port, _ = _ports(stack)
    with httpx.Client(base_url=stack.url, timeout=30) as http:
        user = {"X-User-Id": ann}
        own = {"Origin": f"http://localhost:{api_port}"}
        assert SECRET in http.get("/v1/memory", headers=user | own).json()["content"]
        for host in (f"localhost:{api_port}", f"[::1]:{api_port}", "127.0.0.1"):
            assert http.get("/health", headers={"Host": host}).status_code == 200
        rebound = http.get("/v1/memory", headers=user | {"Host": f"rebind.test:{api_port}"})
        assert rebound.status_code == 421
        assert rebound.json()["error"]["code"] == "misdirected_request"
        foreign = {"Origin": "http://rebind.test"}
        put = http.post("/v1/memory/save", json={"content": "- attacker"}, headers=user | foreign)
        assert (put.status_code, put.json()["error"]["code"]) == (403, "forbidden_origin")
        preflight = http.options(
            "/mcp", headers=foreign | {"Access-Control-Request-Method": "POST"}
        )
        assert preflight.status_code == 403
        mcp = http.post(
            "/mcp", json=MCP_READ, headers=user | foreign | {"Accept": "application/json"}
        )
        assert mcp.status_code == 403 and mcp.json()["error"]["code"] == -32000
        for answer in (rebound, put, preflight, mcp):
            assert not [h for h in answer.headers if h.lower().startswith("access-control-")]
    _untouched(stack, ann)


def test_the_embedded_aws_answers_sdks_and_refuses_browsers(
    stack: LocalStackProcess,
) -> None:
    s3 = stack.s3()
    assert BUCKET in [b["Name"] for b in s3.list_buckets()["Buckets"]]  # boto3: no Origin
    sqs = stack.aws("sqs")
    assert sqs.list_queues()["QueueUrls"]
    listing = f"{stack.aws_endpoint}/{BUCKET}?list-type=2"
    browser_like = httpx.get(listing, headers={"Origin": "http://rebind.test"})
    preflight = httpx.options(
        listing, headers={"Origin": "null", "Access-Control-Request-Method": "GET"}
    )
    _, moto_port = _ports(stack)
    rebound = httpx.get(listing, headers={"Host": f"rebind.test:{moto_port}"})
    assert (browser_like.status_code, preflight.status_code, rebound.status_code) == (
        403,
        403,
        421,
    )
    plain = httpx.get(listing)
    assert plain.status_code == 200 and "ListBucketResult" in plain.text
    for answer in (browser_like, preflight, rebound, plain):
        assert not [h for h in answer.headers if h.lower().startswith("access-control-")]
        assert "Contents" not in answer.text or answer is plain


@pytest.mark.parametrize(("length", "status"), [("abc", 400), ("-5", 400), ("99999999999", 413)])
def test_a_body_that_cannot_be_framed_is_a_clear_json_error(
    stack: LocalStackProcess, ann: str, length: str, status: int
) -> None:
    api_port, _ = _ports(stack)
    request = (
        f"POST /v1/memory/save HTTP/1.1\r\nHost: 127.0.0.1:{api_port}\r\nX-User-Id: {ann}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", api_port), timeout=10) as conn:
        conn.sendall(request.encode() + b'{"content": "- attacker"}')
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status}".encode())
    assert json.loads(body)["error"]["code"] in ("invalid_request", "payload_too_large")
    _untouched(stack, ann)
