"""Our MCP client against servers built with the official SDK (``mcp``, a test dependency
only), served by uvicorn on 127.0.0.1 in a background thread: event-stream and JSON answers,
stateful (a session id) and stateless, as the SDK offers them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import anyio
import httpx
import pytest
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

from agent_harness.mcp.client import McpClient
from agent_harness.mcp.remote_tools import RemoteTool, RemoteToolServers
from agent_harness.mcp_config import McpServerConfig
from local_stack.mcp_demo import new_server, serve_in_thread
from local_stack.process import free_port

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 100


def build_server() -> MCPServer:
    server = new_server("orders")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def lookup_order(order_id: int) -> str:
        """Look up an order by its number."""
        return f"order {order_id}: shipped"

    @server.tool()
    def cancel_order(order_id: int) -> str:
        """Cancel an order."""
        raise ToolError(f"order {order_id} cannot be cancelled: already shipped")

    @server.tool()
    def order_photo() -> Image:
        """A photo of the parcel."""
        return Image(data=PNG, format="png")

    @server.tool()
    async def slow(seconds: float) -> str:
        """Answers after a while."""
        await anyio.sleep(seconds)
        return "done"

    @server.tool()
    async def whoami(ctx: Context) -> str:
        """Who the harness says is asking; a progress notification comes first."""
        await ctx.session.send_progress_notification(
            progress_token="p", progress=0.5, related_request_id=ctx.request_id
        )
        return (ctx.headers or {}).get("x-harness-user-id", "nobody")

    return server


@dataclass(frozen=True)
class Served:
    url: str
    stateless: bool


#: mode -> (json_response, stateless_http): the SDK answers with an event stream by default
MODES = {
    "sse-stateful": (False, False),
    "json-stateful": (True, False),
    "sse-stateless": (False, True),
    "json-stateless": (True, True),
}


@pytest.fixture(scope="module", params=list(MODES))
def served(request: pytest.FixtureRequest) -> Iterator[Served]:
    json_response, stateless = MODES[request.param]
    running = serve_in_thread(
        free_port(), server=build_server(), json_response=json_response, stateless_http=stateless
    )
    yield Served(running.url, stateless)
    running.stop()
    assert not running.thread.is_alive(), "the server did not stop"


def servers_of(*configs: McpServerConfig) -> RemoteToolServers:
    return RemoteToolServers(configs, http_client=httpx.Client())


def test_tools_are_listed_with_their_input_schemas(served: Served) -> None:
    servers = servers_of(McpServerConfig(name="orders", url=served.url))

    tools = {tool.qualified: tool for tool in servers.tools(remaining=30)}

    assert sorted(tools) == [
        "orders__cancel_order",
        "orders__lookup_order",
        "orders__order_photo",
        "orders__slow",
        "orders__whoami",
    ]
    lookup = tools["orders__lookup_order"]
    assert lookup.description == "Look up an order by its number."
    assert lookup.input_schema["type"] == "object"
    assert lookup.input_schema["properties"]["order_id"]["type"] == "integer"
    assert lookup.input_schema["required"] == ["order_id"]
    assert lookup.read_only is True
    assert tools["orders__cancel_order"].read_only is None


def test_calls_come_back_as_text_and_failures_as_errors(served: Served) -> None:
    servers = servers_of(McpServerConfig(name="orders", url=served.url, tools=("lookup_order",)))
    (lookup,) = servers.tools(remaining=30)

    def call(name: str, **arguments: object) -> str:
        tool = RemoteTool("orders", name)
        return servers.call(tool, dict(arguments), user_id="alice", remaining=30)

    assert call("lookup_order", order_id=7) == "order 7: shipped"
    assert servers.call(lookup, {"order_id": 8}, user_id="bob", remaining=30) == "order 8: shipped"
    assert call("cancel_order", order_id=7) == (
        "Error: Error executing tool cancel_order: order 7 cannot be cancelled: already shipped"
    )
    assert call("lookup_order", order_id="seven").startswith("Error: ")
    assert call("no_such_tool").startswith("Error: ")
    assert call("order_photo") == "[image content: image/png, 144 bytes of base64 omitted]"


def test_a_slow_tool_is_cut_off_at_the_time_left(served: Served) -> None:
    servers = servers_of(McpServerConfig(name="orders", url=served.url))
    servers.tools(remaining=30)

    started = time.monotonic()
    text = servers.call(RemoteTool("orders", "slow"), {"seconds": 3}, user_id="u", remaining=0.5)

    # cut off before the tool answers: the margin (2.5 s past the 0.5 s left) is for a
    # loaded machine, not a latency target
    assert time.monotonic() - started < 3
    assert text == "Error: orders__slow failed: no answer within 0.5 s"


def test_the_user_id_reaches_only_a_server_that_asks_for_it(served: Served) -> None:
    servers = servers_of(
        McpServerConfig(name="trusted", url=served.url, forward_user=True),
        McpServerConfig(name="plain", url=served.url),
    )
    servers.tools(remaining=30)

    trusted = servers.call(RemoteTool("trusted", "whoami"), {}, user_id="alice", remaining=30)
    plain = servers.call(RemoteTool("plain", "whoami"), {}, user_id="alice", remaining=30)

    assert (trusted, plain) == ("alice", "nobody")


def test_a_closed_port_is_left_out_of_the_tools(served: Served) -> None:
    closed = f"http://127.0.0.1:{free_port()}/mcp"
    servers = servers_of(
        McpServerConfig(name="down", url=closed, timeout_seconds=2),
        McpServerConfig(name="orders", url=served.url, tools=("lookup_order",)),
    )

    assert [tool.qualified for tool in servers.tools(remaining=30)] == ["orders__lookup_order"]


def test_a_session_ended_by_the_server_is_started_again(served: Served) -> None:
    client = McpClient(served.url, http_client=httpx.Client())
    client.list_tools(timeout=10)
    assert client.protocol_version == "2025-11-25"
    first = client.session_id
    if served.stateless:
        assert first is None  # no session to keep, none to end
        return
    assert first is not None

    ended = httpx.delete(
        served.url, headers={"Mcp-Session-Id": first, "MCP-Protocol-Version": "2025-11-25"}
    )
    assert ended.status_code == 200

    result = client.call_tool("lookup_order", {"order_id": 9}, timeout=10)

    assert result["content"] == [{"type": "text", "text": "order 9: shipped"}]
    assert client.session_id not in (None, first)
