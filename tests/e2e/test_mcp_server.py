"""The MCP server at POST /mcp, over HTTP against the local stack (every role on the offline
model), driven by the official SDK's client (``mcp``, a test dependency) in its default mode
(``server/discover``, protocol 2026-07-28) and in ``mode="legacy"`` (the initialize
handshake, 2025-11-25): listing, saving, searching, reading, recording a conversation whose
facts the post-turn flush extracts, a refused argument, and a second user who sees nothing."""

from __future__ import annotations

import http.client
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.e2e.conftest import LocalStackProcess, wait_for

pytestmark = [
    pytest.mark.e2e,
    # the SDK warns that ping is gone at 2026-07-28 even on a legacy connection
    pytest.mark.filterwarnings(
        "ignore:ping is removed:mcp.shared.exceptions.MCPDeprecationWarning"
    ),
]
#: the client's mode -> the protocol version it ends up speaking with us
MODES = {"default": "2026-07-28", "legacy": "2025-11-25"}
TOOLS = {
    "memory_correct",
    "memory_search",
    "memory_get",
    "memory_read",
    "memory_save",
    "memory_promote",
    "thread_search",
    "record_conversation",
}


def new_user(mode: str) -> str:
    return f"mcp-{mode}-{uuid.uuid4().hex[:8]}"


@asynccontextmanager
async def connect(stack: LocalStackProcess, user: str, mode: str) -> AsyncIterator[Client]:
    """The SDK client on the stack's /mcp, as ``user`` (dev mode reads X-User-Id); the
    default mode probes server/discover, "legacy" runs the initialize handshake."""
    options: dict[str, Any] = {"mode": "legacy"} if mode == "legacy" else {}
    async with (
        httpx2.AsyncClient(headers={"X-User-Id": user}, timeout=30) as http,
        Client(streamable_http_client(f"{stack.url}/mcp", http_client=http), **options) as client,
    ):
        yield client


def run(
    stack: LocalStackProcess, user: str, mode: str, steps: Callable[[Client], Awaitable[Any]]
) -> Any:
    """``steps`` on a fresh connection (each POST stands alone on the server anyway)."""

    async def main() -> Any:
        async with connect(stack, user, mode) as client:
            return await steps(client)

    return anyio.run(main)


def hits(result: Any) -> list[dict[str, Any]]:
    assert not result.is_error, result.content
    return result.structured_content["hits"]


@pytest.mark.parametrize("mode", MODES)
def test_the_sdk_client_connects_and_lists_the_memory_tools(
    offline_stack: LocalStackProcess, mode: str
) -> None:
    async def steps(client: Client) -> None:
        session = client.session
        assert session.protocol_version == MODES[mode]
        assert session.server_info is not None and session.server_info.name == "agent-harness"
        assert "memory_search" in (session.instructions or "")
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == TOOLS
        search = tools["memory_search"]
        assert search.input_schema["required"] == ["query"]
        assert search.input_schema["properties"]["limit"]["maximum"] == 200
        assert search.output_schema is not None and "hits" in search.output_schema["properties"]
        assert tools["memory_get"].output_schema is None
        for name, tool in tools.items():
            writes = name in (
                "memory_save",
                "record_conversation",
                "memory_correct",
                "memory_promote",
            )
            assert tool.annotations is not None
            assert tool.annotations.read_only_hint is (not writes)
            # a correction retires a fact (the ledger keeps it): the one destructive tool
            assert tool.annotations.destructive_hint is (name == "memory_correct")
            assert tool.annotations.open_world_hint is False
        if mode == "legacy":  # 2026-07-28 has no ping
            await client.send_ping()

    run(offline_stack, new_user(mode), mode, steps)


@pytest.mark.parametrize("mode", MODES)
def test_a_saved_fact_is_found_and_memory_md_read_with_its_version(
    offline_stack: LocalStackProcess, mode: str
) -> None:
    user = new_user(mode)  # no turns: nothing flushed, so no consolidation rewrites MEMORY.md

    async def steps(client: Client) -> str:
        saved = await client.call_tool("memory_save", {"content": "- Allergic to peanuts"})
        assert not saved.is_error and saved.structured_content == {"saved": 1, "held": 0}
        found = await client.call_tool("memory_search", {"query": "peanuts"})
        assert hits(found)[0] == {
            "path": "MEMORY.md",
            "line": 1,
            "text": "- [save:mcp] Allergic to peanuts",
            "authority": "save:mcp",
            "recheck": [],  # a MEMORY.md line: no fact id, nothing to re-check
        }
        assert "Source: MEMORY.md#1: - [save:mcp] Allergic to peanuts" in found.content[0].text
        document = (await client.call_tool("memory_read", {})).structured_content
        assert document["content"] == "- [save:mcp] Allergic to peanuts\n"
        return document["etag"]

    etag = run(offline_stack, user, mode, steps)
    with offline_stack.client(user) as http:
        assert http.get("/v1/memory").json() == {
            "content": "- [save:mcp] Allergic to peanuts\n",
            "etag": etag,
        }


@pytest.mark.parametrize("mode", MODES)
def test_memory_get_reads_the_ledger_line_a_turn_was_flushed_into(
    offline_stack: LocalStackProcess, mode: str
) -> None:
    user = new_user(mode)
    with offline_stack.client(user) as http:  # a turn of the agent; its flush writes the ledger
        said = http.post("/v1/sessions/s1/messages", json={"message": "I prefer green tea."})
        assert said.status_code == 200
        wait_for(lambda: http.get("/v1/memory/ledger").json()["days"])

    async def steps(client: Client) -> None:
        query = {"query": "green tea", "match_mode": "all"}
        found = hits(await client.call_tool("memory_search", query))
        line = next(hit for hit in found if hit["path"].startswith("memory/"))
        number = line["line"]
        arguments = {"path": line["path"], "start_line": number, "end_line": number}
        got = await client.call_tool("memory_get", arguments)
        assert got.content[0].text == f"{number}|- [user] User said: I prefer green tea."

    run(offline_stack, user, mode, steps)


@pytest.mark.parametrize("mode", MODES)
def test_a_recorded_conversation_is_flushed_into_searchable_memory(
    offline_stack: LocalStackProcess, mode: str
) -> None:
    user = new_user(mode)
    messages = [
        {"role": "user", "content": "I prefer window seats."},
        {"role": "assistant", "content": "Noted, window seats it is."},
    ]

    async def record(client: Client) -> None:
        arguments = {"session_id": "trip-1", "messages": messages}
        recorded = await client.call_tool("record_conversation", arguments)
        assert not recorded.is_error, recorded.content
        assert recorded.structured_content == {
            "session_id": "trip-1",
            "first_turn": 1,
            "last_turn": 1,
            "messages": 2,
            "flush": "queued",
        }

    async def search(client: Client) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        query = {"query": "window seats", "match_mode": "all"}
        facts = hits(await client.call_tool("memory_search", query))
        return facts, hits(await client.call_tool("thread_search", query))

    def flushed_and_indexed() -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
        facts, said = run(offline_stack, user, mode, search)
        return (facts, said) if facts and said else None

    run(offline_stack, user, mode, record)
    facts, said = wait_for(flushed_and_indexed)  # the post-turn job: flush, then indexing
    # the ledger's line (and MEMORY.md's, once the schedule consolidated it)
    assert {fact["text"] for fact in facts} == {"- [import] User said: I prefer window seats."}
    assert {(h["session_id"], h["turn"], h["role"]) for h in said} == {
        ("trip-1", 1, "user"),
        ("trip-1", 1, "assistant"),
    }


DECISION = "部署决定：使用蓝鲸方案"
#: both words are in DECISION, but not next to each other: "all", "any" and "ranked"
#: find it, an explicit "phrase" does not, and no mode (the phrase, else ranked) does
APART = "部署 蓝鲸"
#: a phrase DECISION does contain, so a default search that finds nothing at all fails
PHRASE = "蓝鲸方案"
#: what each search tool says when it finds nothing
NOTHING_FOUND = {
    "memory_search": "No matching memories found for: ",
    "thread_search": "No past messages found for: ",
}


@pytest.mark.parametrize("tool", ["memory_search", "thread_search"])
@pytest.mark.parametrize("mode", MODES)
def test_a_search_without_match_mode_ranks_when_no_line_holds_the_phrase_and_says_so(
    offline_stack: LocalStackProcess, mode: str, tool: str
) -> None:
    user = new_user(mode)

    async def remember(client: Client) -> None:
        if tool == "memory_search":
            saved = await client.call_tool("memory_save", {"content": f"- {DECISION}"})
            assert not saved.is_error and saved.structured_content == {"saved": 1, "held": 0}
        else:
            messages = [{"role": "user", "content": DECISION}]
            arguments = {"session_id": "decisions", "messages": messages}
            recorded = await client.call_tool("record_conversation", arguments)
            assert not recorded.is_error, recorded.content

    async def every_word(client: Client) -> list[dict[str, Any]]:
        return hits(await client.call_tool(tool, {"query": APART, "match_mode": "all"}))

    async def by_default(client: Client) -> tuple[Any, Any, Any, Any]:
        apart = await client.call_tool(tool, {"query": APART})  # no match_mode
        null = await client.call_tool(tool, {"query": APART, "match_mode": None})
        phrase = await client.call_tool(tool, {"query": PHRASE})
        literal = await client.call_tool(tool, {"query": APART, "match_mode": "phrase"})
        return apart, null, phrase, literal

    run(offline_stack, user, mode, remember)
    # searchable once "all" finds it (a recording is indexed by the post-turn job)
    found = wait_for(lambda: run(offline_stack, user, mode, every_word))
    assert all(DECISION in hit["text"] for hit in found)

    apart, null, phrase, literal = run(offline_stack, user, mode, by_default)
    for result in (apart, null):
        assert not result.is_error, result.content
        assert result.structured_content["match_mode"] == "ranked"
        ranked = hits(result)
        assert ranked and DECISION in ranked[0]["text"]
        assert all(h["match_mode"] == "ranked" for h in ranked)
        assert "(ranked: no " in result.content[0].text
    assert literal.structured_content == {"hits": [], "match_mode": "phrase"}
    assert literal.content[0].text == NOTHING_FOUND[tool] + APART
    assert phrase.structured_content["match_mode"] == "phrase"
    assert [h["text"] for h in hits(phrase)] == [h["text"] for h in found]


@pytest.mark.parametrize("mode", MODES)
def test_a_bad_argument_is_an_error_result_and_writes_nothing(
    offline_stack: LocalStackProcess, mode: str
) -> None:
    user = new_user(mode)

    async def steps(client: Client) -> None:
        future = {"content": "- a", "timestamp": "2999-01-01T00:00:00+00:00"}
        refused = await client.call_tool("memory_save", future)
        assert refused.is_error and refused.content[0].text == (
            "Error: timestamp must not be in the future"
        )
        too_many = await client.call_tool("memory_search", {"query": "a", "limit": 500})
        assert too_many.is_error and "limit" in too_many.content[0].text
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("memory_delete", {})
        assert unknown.value.code == -32602

    run(offline_stack, user, mode, steps)
    with offline_stack.client(user) as http:
        assert http.get("/v1/memory").json() == {"content": "", "etag": None}
        assert http.get("/v1/memory/ledger").json() == {"days": []}


@pytest.mark.parametrize("mode", MODES)
def test_a_second_user_sees_nothing_of_the_first(
    offline_stack: LocalStackProcess, mode: str
) -> None:
    alice, bob = new_user(mode), new_user(mode)

    async def save(client: Client) -> None:
        await client.call_tool("memory_save", {"content": "- The boat is called Nimbus 4711"})
        messages = [{"role": "user", "content": "The boat is called Nimbus 4711."}]
        await client.call_tool("record_conversation", {"session_id": "s1", "messages": messages})
        assert hits(await client.call_tool("memory_search", {"query": "4711"}))

    async def look(client: Client) -> None:
        assert hits(await client.call_tool("memory_search", {"query": "4711"})) == []
        assert hits(await client.call_tool("thread_search", {"query": "4711"})) == []
        document = (await client.call_tool("memory_read", {})).structured_content
        assert document == {"content": ""}
        got = await client.call_tool("memory_get", {"path": "MEMORY.md"})
        assert got.is_error and got.content[0].text == "Error: file not found: MEMORY.md"

    run(offline_stack, alice, mode, save)
    with offline_stack.client(alice) as http:  # Alice's recording is indexed by now
        wait_for(lambda: http.post("/v1/sessions/search", json={"query": "4711"}).json()["hits"])
    run(offline_stack, bob, mode, look)


def test_the_route_speaks_json_rpc_over_plain_http(offline_stack: LocalStackProcess) -> None:
    """What a client without the SDK sees: identity first, then JSON-RPC at every fault."""
    headers = {"Accept": "application/json, text/event-stream"}
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    with httpx.Client(base_url=offline_stack.url, headers=headers, timeout=30) as http:
        assert http.post("/mcp", json=ping).status_code == 401  # no X-User-Id
        user = {"X-User-Id": new_user("raw")}
        assert http.post("/mcp", json=ping, headers=user).json() == {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {},
        }
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        accepted = http.post("/mcp", json=note, headers=user)
        assert (accepted.status_code, accepted.content) == (202, b"")
        broken = http.post(
            "/mcp", content=b"{", headers=user | {"Content-Type": "application/json"}
        )
        assert broken.status_code == 400 and broken.json()["error"]["code"] == -32700
        assert http.get("/mcp", headers=user).status_code == 405
        ended = http.delete("/mcp", headers=user)  # stateless: no session to end
        assert (ended.status_code, ended.headers["allow"]) == (405, "POST")
        assert "mcp-session-id" not in accepted.headers


def test_whitespace_around_the_protocol_version_is_not_part_of_it(
    offline_stack: LocalStackProcess,
) -> None:
    # http.client sends the value as given (httpx refuses the trailing space itself)
    conn = http.client.HTTPConnection(offline_stack.url.removeprefix("http://"), timeout=30)
    headers = {
        "Accept": "application/json",
        "Content-Type": "application/json",
        "X-User-Id": new_user("padded"),
        "MCP-Protocol-Version": "2025-11-25 ",
    }
    conn.request(
        "POST",
        "/mcp",
        body=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
        headers=headers,
    )
    answer = conn.getresponse()
    assert answer.status == 200 and json.loads(answer.read())["result"] == {}
    conn.close()
