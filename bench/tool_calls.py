"""Tool calls: AWS requests of a turn that pauses for the caller's tools and of its resume,
and what remote (MCP) tools cost the first turn of a container that offers them.

Requests (target: each at most 8, the LIST of automatic recall included): the real
AgentCall handler on moto in-process, its agent model scripted to call a client tool, then
answer; requests counted with botocore
hooks on the handler's own clients, for a pausing turn (a new session, and a later one),
a resume that completes, and a resume that pauses again.

The MCP server (POST /mcp): AWS requests of one ``tools/call`` of each memory tool,
through the same handler, for a user with a MEMORY.md, a ledger and a session.

Remote tools: the demo MCP server of `make mcp-demo` (official SDK, Streamable HTTP on
127.0.0.1) behind the handler's own ``RemoteToolServers``. Timed: importing our client
(``agent_harness.mcp``) and, for the decision it replaced, the official SDK's client, each
in a fresh interpreter; the first listing of a container (initialize, initialized,
tools/list), a cached one, and a ``tools/call``; and turns of the handler with the server
configured: its first turn (which lists) and later ones (cached), a stub model answering at
once so the difference is the listing.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

from agent_harness.ids import User
from agent_harness.models import ModelRegistry
from agent_harness.models.base import ChatRequest, ChatResponse, Message, ToolCall, Usage
from agent_harness.paths import MEMORY_FILE
from bench.common import ROOT
from bench.hot_path import FN, USER, AwsMeter, embedded_stack, post_body
from local_stack.lambdas import context_for, http_event, import_handler
from local_stack.process import free_port
from tests.fakes import ORDER_TOOL

if TYPE_CHECKING:
    from pathlib import Path

TITLE = "Tool calls: AWS requests of a pause and its resume, first use of MCP tools, the MCP server"
BUDGET = 8
IMPORTS = {
    "ours (agent_harness.mcp)": "import agent_harness.mcp.remote_tools",
    "official SDK client (mcp)": (
        "from mcp.client.session import ClientSession; import mcp.client.streamable_http"
    ),
}


class OrderClerk:
    """Calls the caller's ``lookup_order`` while the prompt ends with a user message, and
    answers once it ends with a tool result; ``again`` makes it call once more."""

    name = "bench:order-clerk"

    def __init__(self) -> None:
        self.again = False
        self.calls = 0

    def complete(self, request: ChatRequest) -> ChatResponse:
        self.calls += 1
        last = request.messages[-1]
        if last.role == "tool" and not self.again:
            message = Message(role="assistant", content=f"Order status: {last.content}")
        else:
            call = ToolCall(
                id=f"call-{self.calls}", name="lookup_order", arguments='{"order_id": 42}'
            )
            message = Message(role="assistant", tool_calls=[call])
        return ChatResponse(message=message, usage=Usage(input_tokens=1), model=self.name)


class Instant:
    name = "bench:instant"

    def complete(self, request: ChatRequest) -> ChatResponse:
        return ChatResponse(message=Message(role="assistant", content="ok"), model=self.name)


def count_requests(resolver: Any, env: dict[str, str]) -> dict[str, Any]:
    app = import_handler(resolver, FN, env)
    clerk = OrderClerk()
    app.runtime.models = ModelRegistry(app.runtime.settings, overrides={"agent": clerk})
    meter = AwsMeter().attach(app.runtime.clients)
    rows: dict[str, Any] = {}

    def measured(label: str, session: str, payload: dict[str, Any]) -> dict[str, Any]:
        meter.reset()
        body = post_body(app, session, payload)
        rows[label] = {
            "requests": len(meter.operations),
            "operations": sorted(meter.operations),
            "status": body["status"],
        }
        return body

    ask = {"message": "Where is order 42?", "tools": [ORDER_TOOL]}
    paused = measured("pausing turn, new session", "tools", ask)
    answer = {"tool_results": [{"tool_call_id": paused["tool_calls"][0]["id"], "content": "ok"}]}
    measured("resume that completes", "tools", answer)
    paused = measured("pausing turn, later", "tools", ask)
    clerk.again = True
    answer = {"tool_results": [{"tool_call_id": paused["tool_calls"][0]["id"], "content": "ok"}]}
    measured("resume that pauses again", "tools", answer)
    return rows


MCP_CALLS = {
    "memory_read": {},
    "memory_search": {"query": "green tea", "match_mode": "phrase"},
    "memory_search (ranked)": {"query": "green tea", "match_mode": "ranked"},
    "memory_get": {"path": "MEMORY.md", "start_line": 1, "end_line": 5},
    "thread_search": {"query": "green tea"},
    "memory_save": {"content": "- Likes oolong too"},
    "record_conversation": {
        "session_id": "mcp-import",
        "messages": [{"role": "user", "content": "I prefer green tea."}],
    },
}


def mcp_requests(resolver: Any, env: dict[str, str]) -> dict[str, Any]:
    """AWS requests of one tools/call per memory tool on POST /mcp (a cold cache: a new
    container for each, as a first call of a container pays the most)."""
    rows: dict[str, Any] = {}
    seed = import_handler(resolver, FN, env)
    post_body(seed, "mcp-seed", {"message": "Remember that I prefer green tea."})
    memory = "# Memory\n- Prefers green tea in the afternoon\n"
    seed.runtime.store.put(User.from_id(USER), MEMORY_FILE, memory, create_only=True)
    for label, arguments in MCP_CALLS.items():
        app = import_handler(resolver, FN, env)
        meter = AwsMeter().attach(app.runtime.clients)
        message = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": label.split(" ")[0], "arguments": arguments},
        }
        event = http_event(
            "POST",
            "/mcp",
            headers={
                "x-user-id": USER,
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
                "mcp-protocol-version": "2025-11-25",
            },
            body=json.dumps(message).encode(),
        )
        response = app.lambda_handler(event, context_for(FN))
        answer = json.loads(response["body"])
        if response["statusCode"] != 200 or answer["result"].get("isError"):
            raise RuntimeError(f"{label} failed: {response['body'][:300]}")
        rows[label] = {"requests": len(meter.operations), "operations": sorted(meter.operations)}
    return rows


def import_ms(statement: str, runs: int) -> list[float]:
    """Wall time of ``statement`` in fresh interpreters, after the interpreter's own start."""
    probe = (
        "import time; t = time.perf_counter(); " + statement + "; "
        "print((time.perf_counter() - t) * 1000)"
    )
    env = {"PYTHONPATH": f"{ROOT / 'layers' / 'agent_harness'}", "PATH": "/usr/bin:/bin"}
    out = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True
        )
        out.append(float(done.stdout.strip()))
    return out


def remote_costs(resolver: Any, env: dict[str, str], quick: bool) -> dict[str, Any]:
    from agent_harness.mcp.remote_tools import RemoteToolServers
    from agent_harness.mcp_config import McpServerConfig
    from local_stack.mcp_demo import serve_in_thread

    served = serve_in_thread(free_port())
    try:
        rounds = 3 if quick else 10
        listing = {"first": [], "cached": [], "call": []}
        for _ in range(rounds):
            servers = RemoteToolServers((McpServerConfig(name="shop", url=served.url),))
            started = time.perf_counter()
            tools = servers.tools(remaining=30)
            listing["first"].append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            servers.tools(remaining=30)
            listing["cached"].append((time.perf_counter() - started) * 1000)
            lookup = next(t for t in tools if t.name == "lookup_order")
            started = time.perf_counter()
            servers.call(lookup, {"order_id": 42}, user_id="bench", remaining=30)
            listing["call"].append((time.perf_counter() - started) * 1000)
            servers.close()
        turns: dict[str, list[float]] = {"first turn (lists)": [], "later turn (cached)": []}
        configured = {
            **env,
            "HARNESS_MCP_SERVERS": json.dumps([{"name": "shop", "url": served.url}]),
            "HARNESS_REQUIRE_HTTPS": "false",  # the bench's tool server is plain loopback HTTP
        }
        for n in range(rounds):
            app = import_handler(resolver, FN, configured)
            app.runtime.models = ModelRegistry(app.runtime.settings, overrides={"agent": Instant()})
            for label in ("first turn (lists)", "later turn (cached)"):
                started = time.perf_counter()
                post_body(app, f"remote-{n}", {"message": "hello"})
                turns[label].append((time.perf_counter() - started) * 1000)
        return {
            "tools_listed": len(tools),
            "listing_ms": {k: statistics.median(v) for k, v in listing.items()},
            "turn_ms": {k: statistics.median(v) for k, v in turns.items()},
            "rounds": rounds,
        }
    finally:
        served.stop()


def run(quick: bool = False) -> dict[str, Any]:
    with embedded_stack() as (resolver, env):
        requests = count_requests(resolver, env)
        remote = remote_costs(resolver, env, quick)
        mcp = mcp_requests(resolver, env)
    runs = 3 if quick else 5
    imports = {label: statistics.median(import_ms(s, runs)) for label, s in IMPORTS.items()}
    over = [label for label, row in requests.items() if row["requests"] > BUDGET]
    return {
        "budget": BUDGET,
        "requests": requests,
        "within_budget": not over,
        "remote": remote,
        "imports_ms": imports,
        "import_runs": runs,
        "mcp_requests": mcp,
    }


def report(result: dict[str, Any]) -> str:
    out = ["AWS requests (client tools):"]
    for label, row in result["requests"].items():
        out.append(f"  {label:<28} {row['requests']}   {', '.join(row['operations'])}")
    out.append(f"  budget: <= {result['budget']} each")
    remote = result["remote"]
    out.append(f"remote tools (demo MCP server, {remote['tools_listed']} tools), medians:")
    for label, ms in remote["listing_ms"].items():
        out.append(f"  {label:<28} {ms:7.1f} ms")
    for label, ms in remote["turn_ms"].items():
        out.append(f"  {label:<28} {ms:7.1f} ms")
    out.append("MCP server, AWS requests of one tools/call (a new container):")
    for label, row in result["mcp_requests"].items():
        out.append(f"  {label:<28} {row['requests']}   {', '.join(row['operations'])}")
    out.append("import in a fresh interpreter, median:")
    for label, ms in result["imports_ms"].items():
        out.append(f"  {label:<28} {ms:7.1f} ms")
    return "\n".join(out)


def markdown(result: dict[str, Any], img_dir: Path) -> str:
    rows = ["| request | AWS requests | operations | budget |", "|---|---:|---|---|"]
    for label, row in result["requests"].items():
        verdict = "ok" if row["requests"] <= result["budget"] else "**over**"
        ops = ", ".join(row["operations"])
        rows.append(f"| {label} | {row['requests']} | {ops} | ≤ {result['budget']}: {verdict} |")
    remote = result["remote"]
    first, cached = (
        remote["turn_ms"]["first turn (lists)"],
        remote["turn_ms"]["later turn (cached)"],
    )
    listing = remote["listing_ms"]
    imports = result["imports_ms"]
    mcp_rows = ["| tool | AWS requests | operations |", "|---|---:|---|"]
    for label, row in result["mcp_requests"].items():
        mcp_rows.append(f"| `{label}` | {row['requests']} | {', '.join(row['operations'])} |")
    ours, sdk = imports["ours (agent_harness.mcp)"], imports["official SDK client (mcp)"]
    return "\n".join(
        [
            f"**AWS requests** (target ≤ {result['budget']} each): the real AgentCall handler on "
            "moto in-process, its agent model scripted to call a client tool "
            "(`lookup_order`), then answer.",
            "",
            *rows,
            "",
            "A pause writes the working context and the pause mark (with the lease release) "
            "and queues nothing; a resume reads only the context (MEMORY.md is reused as the "
            "turn first saw it), so it costs one GET less than a new turn.",
            "",
            f"**Remote tools, first use** (the demo MCP server of `make mcp-demo`, "
            f"{remote['tools_listed']} tools, on 127.0.0.1; medians of {remote['rounds']} "
            "containers):",
            "",
            "| what | ms |",
            "|---|---:|",
            f"| first listing of a container (initialize, initialized, tools/list) | "
            f"{listing['first']:.1f} |",
            f"| listing again (cached for `cache_seconds`) | {listing['cached']:.2f} |",
            f"| one tools/call | {listing['call']:.1f} |",
            f"| handler turn that lists (stub model answering at once) | {first:.1f} |",
            f"| a later turn of the same container | {cached:.1f} |",
            "",
            "**The MCP server** (`POST /mcp`): AWS requests of one `tools/call` of each "
            "memory tool, each in a new container (nothing cached), for a user with a "
            "MEMORY.md, a ledger and a session. The tools read and write what the routes do; "
            "the listing and the protocol methods make none.",
            "",
            *mcp_rows,
            "",
            f"**The client**: importing ours in a fresh interpreter takes {ours:.0f} ms "
            f"(mostly httpx, which the model providers load anyway); the official SDK's "
            f"client {sdk:.0f} ms, which a turn would pay on top of the cold-start budget of "
            "1.3× the floor. Neither is imported at cold start: the first turn that "
            f"offers remote tools pays it (medians of {result['import_runs']} runs).",
        ]
    )
