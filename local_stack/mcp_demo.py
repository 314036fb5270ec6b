"""`make mcp-demo`: a small remote tool server for the local stack, built with the official
MCP SDK (``mcp``, a development dependency; never in the layer). Streamable HTTP on
127.0.0.1, so `make dev` can offer its tools to the agent as ``shop__<tool>``:

    make mcp-demo                                   # http://127.0.0.1:8765/mcp
    HARNESS_MCP_SERVERS='[{"name": "shop", "url": "http://127.0.0.1:8765/mcp"}]' make dev

The e2e tests serve the same server in a thread (``serve_in_thread``), and the client's
integration tests serve their own SDK servers the same way.
"""

from __future__ import annotations

import argparse
import logging
import threading
import time
from dataclasses import dataclass

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

ORDERS = {
    42: "shipped on 2026-11-28 with DHL, tracking DHL-7731",
    7: "in the warehouse, leaves on 2026-12-02",
}


def new_server(name: str) -> MCPServer:
    """An empty MCPServer; it configures the root logger, so the caller's is kept."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    server: MCPServer = MCPServer(name, log_level="WARNING")
    root.handlers[:], root.level = handlers, level
    return server


def build_demo_server() -> MCPServer:
    server = new_server("shop")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def lookup_order(order_id: int) -> str:
        """Look up the status of an order by its number."""
        if order_id not in ORDERS:
            raise ToolError(f"no order {order_id}")
        return f"order {order_id}: {ORDERS[order_id]}"

    @server.tool()
    def open_ticket(title: str, body: str = "") -> str:
        """Open a support ticket; returns its id."""
        return f"ticket T-{abs(hash((title, body))) % 10_000:04d} opened: {title}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def whoami(ctx: Context) -> str:
        """Who the harness says is asking (only sent when the server entry forwards it)."""
        return (ctx.headers or {}).get("x-harness-user-id", "nobody")

    return server


@dataclass
class Served:
    url: str
    server: uvicorn.Server
    thread: threading.Thread

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def serve_in_thread(
    port: int, host: str = "127.0.0.1", server: MCPServer | None = None, **app_options: bool
) -> Served:
    """Serve ``server`` (the demo server by default) from a background thread, its
    Streamable HTTP app made with ``app_options`` (``json_response``, ``stateless_http``);
    returns once it listens."""
    app = (server or build_demo_server()).streamable_http_app(**app_options)
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=3
    )
    runner = uvicorn.Server(config)
    thread = threading.Thread(target=runner.run, name="mcp-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not runner.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the MCP server did not start on {host}:{port}")
        time.sleep(0.01)
    return Served(f"http://{host}:{port}/mcp", runner, thread)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m local_stack.mcp_demo", description=__doc__)
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    served = serve_in_thread(args.port)
    print(f"MCP demo server (tools: lookup_order, open_ticket, whoami) at {served.url}")
    print(
        "  start the stack with: HARNESS_MCP_SERVERS="
        f'\'[{{"name": "shop", "url": "{served.url}"}}]\' make dev'
    )
    print("  Ctrl-C stops it.", flush=True)
    try:
        served.thread.join()
    except KeyboardInterrupt:
        served.stop()


if __name__ == "__main__":
    main()
