"""The MCP client and the container's remote tool servers, against fake servers on
httpx.MockTransport that speak the Streamable HTTP protocol (JSON and event-stream answers,
sessions, pagination). No sockets; the official SDK's servers are in the integration tests."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from agent_harness.mcp.client import (
    MAX_PAGES,
    PROTOCOL_VERSION,
    McpClient,
    McpHttpError,
    McpProtocolError,
    McpRpcError,
    McpTimeoutError,
    McpUnreachableError,
)
from agent_harness.mcp.remote_tools import RemoteTool, RemoteToolServers, result_text
from agent_harness.mcp_config import McpServerConfig

URL = "https://tools.example.com/mcp"
ORDER_TOOL: dict[str, Any] = {
    "name": "lookup_order",
    "description": "Look up an order.",
    "inputSchema": {
        "type": "object",
        "properties": {"order_id": {"type": "integer"}},
        "required": ["order_id"],
    },
    "annotations": {"readOnlyHint": True},
}
Handler = Callable[[dict[str, Any], httpx.Request], dict[str, Any]]


class FakeServer:
    """An MCP server in a MockTransport handler: it checks what the spec asks of a client
    (Accept, Content-Type, session id, protocol version) and records every message."""

    def __init__(
        self,
        tools: list[dict[str, Any]] | None = None,
        *,
        sse: bool = False,
        stateful: bool = True,
        version: str | None = None,
        page_size: int = 0,
        calls: dict[str, Handler] | None = None,
    ) -> None:
        self.tools = [ORDER_TOOL] if tools is None else tools
        self.sse = sse
        self.stateful = stateful
        self.version = version
        self.page_size = page_size
        self.calls = calls or {}
        self.sessions: list[str] = []
        self.live: set[str] = set()
        self.seen: list[tuple[dict[str, Any], httpx.Request]] = []

    @property
    def methods(self) -> list[str]:
        return [message["method"] for message, _ in self.seen]

    def requests(self, method: str) -> list[httpx.Request]:
        return [request for message, request in self.seen if message["method"] == method]

    def expire_sessions(self) -> None:
        self.live.clear()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        message = json.loads(request.content)
        self.seen.append((message, request))
        assert request.headers["content-type"] == "application/json"
        assert request.headers["accept"] == "application/json, text/event-stream"
        method = message["method"]
        if method != "initialize":
            assert request.headers["mcp-protocol-version"] == (self.version or PROTOCOL_VERSION)
            if self.stateful and request.headers.get("mcp-session-id") not in self.live:
                error = {"code": -32600, "message": "Session not found"}
                return httpx.Response(404, json={"jsonrpc": "2.0", "id": None, "error": error})
        if "id" not in message:
            return httpx.Response(202)
        headers = {}
        if method == "initialize" and self.stateful:
            session = f"session-{len(self.sessions) + 1}"
            self.sessions.append(session)
            self.live.add(session)
            headers["mcp-session-id"] = session
        answer = {"jsonrpc": "2.0", "id": message["id"], **self.answer(message, request)}
        if not self.sse:
            return httpx.Response(200, headers=headers, json=answer)
        events = [
            ": a comment line",
            "id: 0\ndata:",  # a priming event: no data
            'event: message\ndata: {"jsonrpc": "2.0", "method": "notifications/progress",'
            '\ndata: "params": {"progressToken": 1, "progress": 0.5}}',
            # the server's own request may carry our id: it is not our answer
            "data: " + json.dumps({"jsonrpc": "2.0", "id": message["id"], "method": "ping"}),
            "event: message\r\ndata: " + json.dumps(answer),
        ]
        body = "".join(event + "\n\n" for event in events).encode()
        headers["content-type"] = "text/event-stream"
        return httpx.Response(200, headers=headers, content=iter([body[:50], body[50:]]))

    def answer(self, message: dict[str, Any], request: httpx.Request) -> dict[str, Any]:
        params = message.get("params") or {}
        if message["method"] == "initialize":
            version = self.version or params["protocolVersion"]
            return {"result": {"protocolVersion": version, "capabilities": {"tools": {}}}}
        if message["method"] == "tools/list":
            if not self.page_size:
                return {"result": {"tools": self.tools}}
            start = int(params.get("cursor") or 0)
            page: dict[str, Any] = {"tools": self.tools[start : start + self.page_size]}
            if start + self.page_size < len(self.tools):
                page["nextCursor"] = str(start + self.page_size)
            return {"result": page}
        if message["method"] == "tools/call":
            handler = self.calls.get(params["name"])
            if handler is None:
                return {"error": {"code": -32602, "message": f"Unknown tool: {params['name']}"}}
            return {"result": handler(params["arguments"], request)}
        return {"error": {"code": -32601, "message": "Method not found"}}


def http(handler: Callable[[httpx.Request], httpx.Response], **kwargs: Any) -> httpx.Client:
    return httpx.Client(transport=httpx.MockTransport(handler), **kwargs)


def client_of(server: Callable[[httpx.Request], httpx.Response], **kwargs: Any) -> McpClient:
    return McpClient(URL, name="orders", http_client=http(server), **kwargs)


def text_result(text: str) -> Handler:
    return lambda arguments, request: {"content": [{"type": "text", "text": text}]}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def config(name: str = "orders", url: str = URL, **fields: Any) -> McpServerConfig:
    return McpServerConfig(name=name, url=url, **fields)


def by_host(**servers: Callable[[httpx.Request], httpx.Response]) -> httpx.Client:
    """One client for several servers, told apart by host (``orders.example.com``)."""
    return http(lambda request: servers[request.url.host.split(".")[0]](request))


# --- the protocol -------------------------------------------------------------------------


def test_the_handshake_offers_the_latest_version_then_says_initialized() -> None:
    server = FakeServer()
    client = client_of(server)

    tools = client.list_tools(timeout=5)

    assert [tool["name"] for tool in tools] == ["lookup_order"]
    assert server.methods == ["initialize", "notifications/initialized", "tools/list"]
    initialize = server.seen[0][0]
    assert initialize["jsonrpc"] == "2.0"
    assert initialize["params"] == {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "agent-harness", "version": "0.1.0"},
    }
    assert "mcp-protocol-version" not in server.seen[0][1].headers
    assert "id" not in server.seen[1][0]
    assert client.protocol_version == "2025-11-25"


def test_the_session_id_and_protocol_version_go_with_every_later_request() -> None:
    server = FakeServer(version="2025-03-26", calls={"lookup_order": text_result("shipped")})
    client = client_of(server)

    client.list_tools(timeout=5)
    client.call_tool("lookup_order", {"order_id": 7}, timeout=5)

    later = server.seen[1:]
    assert [message["method"] for message, _ in later] == [
        "notifications/initialized",
        "tools/list",
        "tools/call",
    ]
    for _, request in later:
        assert request.headers["mcp-session-id"] == "session-1"
        assert request.headers["mcp-protocol-version"] == "2025-03-26"
    assert server.seen[-1][0]["params"] == {"name": "lookup_order", "arguments": {"order_id": 7}}


def test_a_stateless_server_gets_no_session_header() -> None:
    server = FakeServer(stateful=False)
    client = client_of(server)

    client.list_tools(timeout=5)

    assert client.session_id is None
    assert all("mcp-session-id" not in request.headers for _, request in server.seen)


def test_an_event_stream_answer_is_read_past_the_servers_own_messages() -> None:
    server = FakeServer(sse=True, calls={"lookup_order": text_result("order 7: shipped")})
    client = client_of(server)

    result = client.call_tool("lookup_order", {"order_id": 7}, timeout=5)

    assert result == {"content": [{"type": "text", "text": "order 7: shipped"}]}
    assert server.methods == ["initialize", "notifications/initialized", "tools/call"]


def test_tools_are_listed_across_pages() -> None:
    tools = [{"name": f"tool_{i}", "inputSchema": {"type": "object"}} for i in range(7)]
    server = FakeServer(tools, page_size=3)

    listed = client_of(server).list_tools(timeout=5)

    assert [tool["name"] for tool in listed] == [f"tool_{i}" for i in range(7)]
    cursors = [json.loads(r.content).get("params") for r in server.requests("tools/list")]
    assert cursors == [{}, {"cursor": "3"}, {"cursor": "6"}]


def test_a_server_that_pages_forever_is_read_only_up_to_the_page_bound() -> None:
    def endless(request: httpx.Request) -> httpx.Response:
        message = json.loads(request.content)
        if message["method"] == "initialize":
            result: dict[str, Any] = {"protocolVersion": PROTOCOL_VERSION}
        elif "id" not in message:
            return httpx.Response(202)
        else:
            result = {"tools": [{"name": "again"}], "nextCursor": "more"}
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": message["id"], "result": result})

    assert len(client_of(endless).list_tools(timeout=5)) == MAX_PAGES


def test_an_expired_session_is_initialized_again_and_the_request_retried_once() -> None:
    server = FakeServer(calls={"lookup_order": text_result("shipped")})
    client = client_of(server)
    client.list_tools(timeout=5)
    server.expire_sessions()

    result = client.call_tool("lookup_order", {"order_id": 1}, timeout=5)

    assert result["content"][0]["text"] == "shipped"
    assert server.methods[3:] == [
        "tools/call",  # 404: session-1 is gone
        "initialize",
        "notifications/initialized",
        "tools/call",
    ]
    assert server.requests("tools/call")[-1].headers["mcp-session-id"] == "session-2"


def test_a_404_after_the_new_handshake_is_an_http_error() -> None:
    server = FakeServer()
    client = client_of(server)
    client.list_tools(timeout=5)
    original = server.answer

    def forget_every_session(message: dict[str, Any], request: httpx.Request) -> dict[str, Any]:
        server.expire_sessions()  # each new session is gone before it is used
        return original(message, request)

    server.answer = forget_every_session  # type: ignore[method-assign]
    server.expire_sessions()

    with pytest.raises(McpHttpError) as caught:
        client.list_tools(timeout=5)

    assert caught.value.status == 404
    assert "Session not found" in str(caught.value)
    assert server.methods.count("initialize") == 2


def test_an_unsupported_protocol_version_is_a_protocol_error() -> None:
    client = client_of(FakeServer(version="2023-01-01"))

    with pytest.raises(McpProtocolError, match="unsupported protocol version '2023-01-01'"):
        client.list_tools(timeout=5)
    assert client.protocol_version is None


def test_a_json_rpc_error_is_typed_with_its_code_and_message() -> None:
    client = client_of(FakeServer())

    with pytest.raises(McpRpcError) as caught:
        client.call_tool("no_such_tool", {}, timeout=5)

    assert (caught.value.code, caught.value.message) == (-32602, "Unknown tool: no_such_tool")
    assert caught.value.kind == "rpc"


def test_a_redirect_is_an_error_even_on_a_client_that_follows_them() -> None:
    def elsewhere(request: httpx.Request) -> httpx.Response:
        if request.url.host == "evil.example.net":
            raise AssertionError("the redirect was followed")
        return httpx.Response(307, headers={"location": "https://evil.example.net/mcp"})

    client = McpClient(URL, http_client=http(elsewhere, follow_redirects=True))

    with pytest.raises(McpHttpError, match="HTTP 307: redirects are not followed"):
        client.list_tools(timeout=5)


@pytest.mark.parametrize("streamed", [False, True], ids=["content-length", "streamed"])
def test_an_oversized_answer_is_refused(streamed: bool) -> None:
    big = b'{"jsonrpc": "2.0", "id": 1, "result": {"x": "' + b"a" * 6_000_000 + b'"}}'

    def huge(request: httpx.Request) -> httpx.Response:
        content = iter([big[i : i + 65536] for i in range(0, len(big), 65536)])
        if streamed:
            return httpx.Response(
                200, headers={"content-type": "application/json"}, content=content
            )
        return httpx.Response(200, headers={"content-type": "application/json"}, content=big)

    with pytest.raises(McpProtocolError, match="over 5,242,880 bytes"):
        client_of(huge).list_tools(timeout=5)


@pytest.mark.parametrize(
    ("failure", "error"),
    [
        (httpx.ReadTimeout("slow"), McpTimeoutError),
        (httpx.ConnectTimeout("slow"), McpTimeoutError),
        (httpx.ConnectError("refused"), McpUnreachableError),
        (httpx.RemoteProtocolError("broken"), McpUnreachableError),
    ],
)
def test_transport_failures_are_typed(failure: Exception, error: type[Exception]) -> None:
    def failing(request: httpx.Request) -> httpx.Response:
        raise failure

    with pytest.raises(error):
        client_of(failing).list_tools(timeout=5)


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (httpx.Response(500, text="boom"), "HTTP 500"),
        (httpx.Response(200, text="<html>", headers={"content-type": "text/html"}), "content type"),
        (
            httpx.Response(200, content=b"{not json", headers={"content-type": "application/json"}),
            "not valid JSON",
        ),
        (httpx.Response(200, json={"jsonrpc": "2.0", "id": 99, "result": {}}), "holds no response"),
        (httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": []}), "result object"),
        (
            httpx.Response(
                200, content=b"data: \n\n", headers={"content-type": "text/event-stream"}
            ),
            "holds no response",
        ),
    ],
    ids=["status", "content-type", "json", "wrong-id", "no-result", "stream-ended"],
)
def test_malformed_answers_are_typed(response: httpx.Response, message: str) -> None:
    with pytest.raises((McpHttpError, McpProtocolError), match=message):
        client_of(lambda request: response).list_tools(timeout=5)


def test_each_request_gets_what_is_left_of_the_operations_budget() -> None:
    server = FakeServer()

    client_of(server).list_tools(timeout=2.5)

    for _, request in server.seen:
        timeout = request.extensions["timeout"]
        assert 0 < timeout["read"] <= 2.5
        assert timeout["connect"] <= 2.5


def test_a_server_trickling_bytes_is_cut_off_when_the_budget_runs_out() -> None:
    def trickle(request: httpx.Request) -> httpx.Response:
        message = json.loads(request.content)
        if "id" not in message:
            return httpx.Response(202)
        if message["method"] == "initialize":
            result = {"protocolVersion": PROTOCOL_VERSION}
            return httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": result})

        def slowly() -> Iterator[bytes]:
            for _ in range(50):  # each read is quick: only the budget can stop it
                time.sleep(0.02)
                yield b": still working\n\n"

        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, content=slowly())

    started = time.monotonic()
    with pytest.raises(McpTimeoutError, match=r"no answer within 0\.3 s"):
        client_of(trickle).list_tools(timeout=0.3)
    assert time.monotonic() - started < 0.6


def test_configured_headers_cannot_replace_the_protocols_own() -> None:
    server = FakeServer()
    client = client_of(server)

    client.list_tools(timeout=5, headers={"accept": "text/html", "Mcp-Session-Id": "forged"})

    assert server.requests("tools/list")[0].headers["mcp-session-id"] == "session-1"


# --- the container's servers --------------------------------------------------------------


def test_tools_are_qualified_with_the_server_name_and_keep_their_schema() -> None:
    tools = [
        ORDER_TOOL,
        {"name": "no_schema"},
        {"name": "array_schema", "inputSchema": {"type": "array"}, "description": 7},
    ]
    servers = RemoteToolServers((config(),), http_client=http(FakeServer(tools)))

    listed = servers.tools(remaining=None)

    order, no_schema, array_schema = listed
    assert order == RemoteTool(
        server="orders",
        name="lookup_order",
        description="Look up an order.",
        input_schema=ORDER_TOOL["inputSchema"],
        read_only=True,
    )
    assert order.qualified == "orders__lookup_order"
    assert no_schema.input_schema == {"type": "object", "properties": {}}
    assert no_schema.read_only is None
    assert (array_schema.input_schema, array_schema.description) == (
        {"type": "object", "properties": {}},
        "",
    )


def test_the_allowlist_keeps_only_the_named_tools() -> None:
    tools = [{"name": "lookup_order"}, {"name": "cancel_order"}, {"name": "refund"}]
    servers = RemoteToolServers(
        (config(tools=("lookup_order", "refund", "missing")),), http_client=http(FakeServer(tools))
    )

    assert [t.qualified for t in servers.tools(remaining=None)] == [
        "orders__lookup_order",
        "orders__refund",
    ]


def test_a_tool_whose_qualified_name_no_model_accepts_is_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tools = [
        {"name": "ok-tool_1"},
        {"name": "has space"},
        {"name": "x" * 60},
        {"name": "ok-tool_1"},
    ]
    servers = RemoteToolServers((config(),), http_client=http(FakeServer(tools)))

    assert [t.qualified for t in servers.tools(remaining=None)] == ["orders__ok-tool_1"]
    skipped = [r for r in caplog.records if "skipped" in r.getMessage()]
    assert [r.tool for r in skipped] == ["has space", "x" * 60]  # type: ignore[attr-defined]


def test_a_down_server_is_left_out_and_not_retried_until_the_backoff_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    attempts: list[str] = []
    up = False

    def flaky(request: httpx.Request) -> httpx.Response:
        attempts.append(json.loads(request.content)["method"])
        if not up:
            raise httpx.ConnectError("refused")
        return FakeServer(stateful=False)(request)

    clock = Clock()
    other = FakeServer([{"name": "search"}])
    servers = RemoteToolServers(
        (
            config("flaky", "https://flaky.example.com/mcp"),
            config("docs", "https://docs.example.com/mcp"),
        ),
        http_client=by_host(flaky=flaky, docs=other),
        clock=clock,
    )

    assert [t.qualified for t in servers.tools(remaining=None)] == ["docs__search"]
    warning = next(r for r in caplog.records if r.levelno == logging.WARNING)
    assert (warning.mcp_server, warning.kind) == ("flaky", "unreachable")  # type: ignore[attr-defined]
    assert attempts == ["initialize"]

    up = True
    clock.now += 29
    assert [t.qualified for t in servers.tools(remaining=None)] == ["docs__search"]
    assert attempts == ["initialize"]  # still backing off: no request, no timeout

    clock.now += 2
    assert [t.qualified for t in servers.tools(remaining=None)] == [
        "flaky__lookup_order",
        "docs__search",
    ]


def test_listings_are_cached_per_server_until_cache_seconds_pass() -> None:
    orders = FakeServer(calls={"lookup_order": text_result("shipped")})
    docs = FakeServer([{"name": "search"}])
    clock = Clock()
    servers = RemoteToolServers(
        (
            config("orders", "https://orders.example.com/mcp", cache_seconds=60),
            config("docs", "https://docs.example.com/mcp", cache_seconds=600),
        ),
        http_client=by_host(orders=orders, docs=docs),
        clock=clock,
    )

    first = servers.tools(remaining=None)
    # other users' turns in the same container reuse the listing
    servers.call(first[0], {"order_id": 1}, user_id="alice", remaining=None)
    clock.now += 59
    assert servers.tools(remaining=None) == first
    servers.call(first[0], {"order_id": 2}, user_id="bob", remaining=None)
    assert (orders.methods.count("tools/list"), docs.methods.count("tools/list")) == (1, 1)

    clock.now += 1
    assert servers.tools(remaining=None) == first
    assert (orders.methods.count("tools/list"), docs.methods.count("tools/list")) == (2, 1)
    assert orders.methods.count("initialize") == 1  # the session is kept


def test_servers_are_listed_in_parallel() -> None:
    both_waiting = threading.Barrier(2, timeout=5)

    def meeting(server: FakeServer) -> Callable[[httpx.Request], httpx.Response]:
        def handler(request: httpx.Request) -> httpx.Response:
            if json.loads(request.content)["method"] == "tools/list":
                both_waiting.wait()  # times out (and fails the server) if listed one by one
            return server(request)

        return handler

    servers = RemoteToolServers(
        (config("a", "https://a.example.com/mcp"), config("b", "https://b.example.com/mcp")),
        http_client=by_host(a=meeting(FakeServer()), b=meeting(FakeServer())),
    )

    assert [t.qualified for t in servers.tools(remaining=None)] == [
        "a__lookup_order",
        "b__lookup_order",
    ]


def test_no_time_left_lists_nothing_and_calls_nothing() -> None:
    server = FakeServer()
    servers = RemoteToolServers((config(),), http_client=http(server))
    tool = RemoteTool("orders", "lookup_order")

    assert servers.tools(remaining=0) == []
    assert servers.call(tool, {}, user_id="u", remaining=-1) == (
        "Error: no time left to call orders__lookup_order"
    )
    assert server.seen == []


def test_every_request_is_bounded_by_the_server_timeout_and_the_remaining_time() -> None:
    server = FakeServer(calls={"lookup_order": text_result("shipped")})
    servers = RemoteToolServers((config(timeout_seconds=8),), http_client=http(server))

    (tool,) = servers.tools(remaining=3)
    servers.call(tool, {"order_id": 1}, user_id="u", remaining=None)

    reads = [request.extensions["timeout"]["read"] for _, request in server.seen]
    assert all(read <= 3 for read in reads[:3])  # listing: bounded by the time left
    assert 3 < reads[-1] <= 8  # the call: by the server's own timeout


@pytest.mark.parametrize(
    ("result", "text"),
    [
        ({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}, "a\nb"),
        (
            {"content": [{"type": "image", "data": "x" * 12345, "mimeType": "image/png"}]},
            "[image content: image/png, 12,345 bytes of base64 omitted]",
        ),
        (
            {"content": [{"type": "audio", "data": "QUJD", "mimeType": "audio/wav"}]},
            "[audio content: audio/wav, 4 bytes of base64 omitted]",
        ),
        (
            {"content": [{"type": "resource_link", "uri": "file:///r.md", "name": "r.md"}]},
            "[resource link: file:///r.md r.md]",
        ),
        (
            {"content": [{"type": "resource", "resource": {"uri": "x:1", "text": "inside"}}]},
            "inside",
        ),
        (
            {
                "content": [
                    {
                        "type": "resource",
                        "resource": {"uri": "x:2", "blob": "AAAA", "mimeType": "application/pdf"},
                    }
                ]
            },
            "[embedded resource: x:2 application/pdf, 4 bytes of base64 omitted]",
        ),
        ({"content": [{"type": "hologram"}]}, "[unsupported content type: hologram]"),
        ({"content": [], "structuredContent": {"total": 3, "unit": "€"}}, '{"total":3,"unit":"€"}'),
        (
            {"content": [{"type": "text", "text": "no such order"}], "isError": True},
            "Error: no such order",
        ),
        ({"content": [], "isError": True}, "Error: orders__lookup_order failed"),
        ({"content": []}, "orders__lookup_order returned no content"),
    ],
    ids=[
        "text",
        "image",
        "audio",
        "resource-link",
        "resource-text",
        "resource-blob",
        "unknown",
        "structured",
        "is-error",
        "is-error-no-text",
        "empty",
    ],
)
def test_call_results_become_text_for_the_model(result: dict[str, Any], text: str) -> None:
    assert result_text("orders__lookup_order", result) == text


def test_a_call_returns_the_tools_text() -> None:
    server = FakeServer(sse=True, calls={"lookup_order": text_result("order 7: shipped")})
    servers = RemoteToolServers((config(),), http_client=http(server))
    (tool,) = servers.tools(remaining=None)

    assert servers.call(tool, {"order_id": 7}, user_id="u", remaining=10) == "order 7: shipped"


@pytest.mark.parametrize(
    ("failure", "text"),
    [
        (httpx.ReadTimeout("slow"), "Error: orders__lookup_order failed: no answer within 20 s"),
        (
            httpx.ConnectError("refused"),
            "Error: orders__lookup_order failed: the server is unreachable (ConnectError)",
        ),
        (httpx.Response(503), "Error: orders__lookup_order failed: HTTP 503"),
        (
            {"error": {"code": -32602, "message": "Invalid params: order_id"}},
            "Error: orders__lookup_order failed: JSON-RPC error -32602: Invalid params: order_id",
        ),
    ],
    ids=["timeout", "unreachable", "status", "rpc"],
)
def test_call_failures_come_back_as_error_text_naming_the_tool(failure: object, text: str) -> None:
    server = FakeServer()

    def failing(request: httpx.Request) -> httpx.Response:
        message = json.loads(request.content)
        if message["method"] != "tools/call":
            return server(request)
        if isinstance(failure, Exception):
            raise failure
        if isinstance(failure, httpx.Response):
            return failure
        assert isinstance(failure, dict)
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": message["id"], **failure})

    servers = RemoteToolServers((config(),), http_client=http(failing))
    (tool,) = servers.tools(remaining=None)

    assert servers.call(tool, {"order_id": 1}, user_id="u", remaining=None) == text


def test_the_user_id_goes_only_with_calls_to_a_server_that_asks_for_it() -> None:
    def echo_user(arguments: dict[str, Any], request: httpx.Request) -> dict[str, Any]:
        user = request.headers.get("x-harness-user-id", "nobody")
        return {"content": [{"type": "text", "text": user}]}

    trusted = FakeServer(calls={"lookup_order": echo_user})
    other = FakeServer(calls={"lookup_order": echo_user})
    servers = RemoteToolServers(
        (
            config("trusted", "https://trusted.example.com/mcp", forward_user=True),
            # a user id set as a plain header is dropped: only call() sends one
            config("other", "https://other.example.com/mcp", headers={"X-Harness-User-Id": "x"}),
        ),
        http_client=by_host(trusted=trusted, other=other),
    )
    trusted_tool, other_tool = servers.tools(remaining=None)

    assert servers.call(trusted_tool, {}, user_id="alice", remaining=None) == "alice"
    assert servers.call(other_tool, {}, user_id="alice", remaining=None) == "nobody"
    assert servers.call(trusted_tool, {}, user_id="ali\nce", remaining=None).startswith("Error:")
    for server in (trusted, other):
        listing = [r for m, r in server.seen if m["method"] != "tools/call"]
        assert all("x-harness-user-id" not in request.headers for request in listing)


@pytest.mark.parametrize(
    ("secret", "parameter", "expected"),
    [
        ('{"X-Api-Key": "k-1", "X-Tenant": "t"}', None, {"x-api-key": "k-1", "x-tenant": "t"}),
        ("tok-123", None, {"authorization": "Bearer tok-123"}),
        (None, '{"Authorization": "Basic abc"}', {"authorization": "Basic abc"}),
        ("tok-123", '{"Authorization": "Basic abc"}', {"authorization": "Basic abc"}),
    ],
    ids=["secret-json", "secret-plain", "parameter", "parameter-last"],
)
def test_credential_headers_come_from_the_secret_and_the_parameter(
    secret: str | None, parameter: str | None, expected: dict[str, str]
) -> None:
    server = FakeServer(calls={"lookup_order": text_result("ok")})
    read: list[str] = []

    def reader(value: str | None) -> Callable[[str], str | None]:
        def read_one(name: str) -> str | None:
            read.append(name)
            return value

        return read_one

    servers = RemoteToolServers(
        (
            config(
                headers={"X-Plain": "p", "authorization": "Plain p"},
                headers_secret="mcp/orders" if secret else None,
                headers_parameter="/mcp/orders" if parameter else None,
            ),
        ),
        http_client=http(server),
        read_secret=reader(secret),
        read_parameter=reader(parameter),
    )
    assert read == []  # nothing is read before it is needed

    (tool,) = servers.tools(remaining=None)
    servers.call(tool, {}, user_id="u", remaining=None)

    for _, request in server.seen:
        assert request.headers["x-plain"] == "p"
        assert len(request.headers.get_list("authorization")) == 1  # replaced, whatever the case
        assert {k: request.headers.get(k) for k in expected} == expected


@pytest.mark.parametrize(
    "reader",
    [
        lambda name: (_ for _ in ()).throw(RuntimeError("AccessDenied sk-secret-value")),
        lambda name: None,
        lambda name: '{"X-Api-Key": "sk-secret-value"',
        lambda name: '{"X-Api-Key": ["sk-secret-value"]}',
        lambda name: '{"X-Api-Key": "sk-secret-value\\r\\nX-Evil: 1"}',
    ],
    ids=["raises", "missing", "bad-json", "not-strings", "header-injection"],
)
def test_a_secret_that_cannot_be_read_leaves_the_server_out_without_its_value(
    reader: Callable[[str], str | None], caplog: pytest.LogCaptureFixture
) -> None:
    server = FakeServer()
    servers = RemoteToolServers(
        (config(headers_secret="mcp/orders"),), http_client=http(server), read_secret=reader
    )

    assert servers.tools(remaining=None) == []
    assert server.seen == []
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.kind == "credentials"  # type: ignore[attr-defined]
    error = warning.error  # type: ignore[attr-defined]
    assert "mcp/orders" in error or "'x-api-key' has an invalid" in error
    logged = " ".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    assert "sk-secret-value" not in logged
