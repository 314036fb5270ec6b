"""The MCP server (`agent_harness.mcp.server.handle_http`) on the in-memory fakes: both
protocol generations (the initialize handshake, 2024-11-05 .. 2025-11-25, and the per-request
envelope of 2026-07-28), every method, every tool with its refusals (nothing written), the
protocol faults, and two users who never see each other's memory."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from agent_harness import __version__
from agent_harness.errors import ModelAuthError, ModelTimeoutError, StoreError
from agent_harness.ids import User
from agent_harness.mcp.server import HANDSHAKE_VERSIONS, handle_http
from agent_harness.memory.facts.lifecycle import ledger_fact_id
from agent_harness.memory.jobs.flush import run_post_turn_job
from agent_harness.settings import Settings
from tests.fakes import make_runtime

ALICE, BOB = User.from_id("alice"), User.from_id("bob")
MODERN = "2026-07-28"
LATEST = "2025-11-25"
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
INFO_KEY = "io.modelcontextprotocol/clientInfo"
BASE = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
TOOLS = {
    "memory_search",
    "memory_get",
    "memory_read",
    "memory_save",
    "memory_promote",
    "memory_correct",
    "thread_search",
    "record_conversation",
}


# -- helpers ----------------------------------------------------------------------------------
def post(rt, body: Any, headers: dict[str, str] | None = None, user: User = ALICE):
    """One POST; the answer must be JSON as the route sends it."""
    raw = body if isinstance(body, str) else json.dumps(body)
    status, payload, extra = handle_http(rt, user, BASE if headers is None else headers, raw)
    json.dumps(payload)  # the route serialises it
    assert extra == {}  # no session id, ever
    return status, payload


def legacy(rt, method: str, params: dict | None = None, *, version: str | None = LATEST, **kw):
    """A handshake-era request (``version=None``: without the MCP-Protocol-Version header)."""
    headers = BASE | ({"MCP-Protocol-Version": version} if version else {})
    message = {"jsonrpc": "2.0", "id": 7, "method": method}
    return post(rt, message | ({"params": params} if params is not None else {}), headers, **kw)


def modern_request(method: str, params: dict | None = None) -> tuple[dict, dict]:
    """A 2026-07-28 request as the SDK client sends it: envelope and matching headers."""
    meta = {VERSION_KEY: MODERN, CAPABILITIES_KEY: {}, INFO_KEY: {"name": "t", "version": "1"}}
    headers = BASE | {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if method == "tools/call":
        headers["Mcp-Name"] = (params or {})["name"]
    message = {"jsonrpc": "2.0", "id": "r-1", "method": method}
    return message | {"params": (params or {}) | {"_meta": meta}}, headers


def modern(rt, method: str, params: dict | None = None, **kw):
    message, headers = modern_request(method, params)
    return post(rt, message, headers, **kw)


def call(rt, tool: str, arguments: dict, *, era: str = "legacy", user: User = ALICE) -> dict:
    """tools/call in either era: the result object (a tool failure is a result, at 200)."""
    send = legacy if era == "legacy" else modern
    status, payload = send(rt, "tools/call", {"name": tool, "arguments": arguments}, user=user)
    assert status == 200, payload
    return payload["result"]


def text(result: dict) -> str:
    return "\n".join(part["text"] for part in result["content"])


def listed(rt) -> dict[str, dict]:
    return {tool["name"]: tool for tool in legacy(rt, "tools/list")[1]["result"]["tools"]}


def drain(rt) -> None:
    while rt.queue.post_turn:
        run_post_turn_job(rt, rt.queue.post_turn.pop(0))


def conversation(*texts: str) -> list[dict]:
    return [{"role": ("user", "assistant")[n % 2], "content": t} for n, t in enumerate(texts)]


# -- the handshake era ------------------------------------------------------------------------
@pytest.mark.parametrize("offered", [*HANDSHAKE_VERSIONS, "2099-01-01", MODERN])
def test_initialize_agrees_on_a_handshake_version_and_introduces_the_server(offered) -> None:
    status, payload = legacy(
        make_runtime(),
        "initialize",
        {
            "protocolVersion": offered,
            "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"},
        },
        version=None,
    )
    result = payload["result"]
    assert status == 200 and payload["id"] == 7
    assert result["protocolVersion"] == (offered if offered in HANDSHAKE_VERSIONS else LATEST)
    assert result["serverInfo"] == {
        "name": "agent-harness",
        "title": "Agent Harness memory",
        "version": __version__,
    }
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert "memory_search" in result["instructions"]


def test_initialize_without_client_info_is_invalid_params() -> None:
    status, payload = legacy(make_runtime(), "initialize", {"protocolVersion": LATEST})
    assert status == 200 and payload["error"]["code"] == -32602


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
        {"jsonrpc": "2.0", "method": "notifications/whatever"},
        {"jsonrpc": "2.0", "id": 3, "result": {}},  # a posted response: we never ask anything
    ],
)
def test_notifications_and_posted_responses_are_accepted_with_202(message) -> None:
    assert post(make_runtime(), message, BASE | {"MCP-Protocol-Version": LATEST}) == (202, None)


def test_ping_answers_an_empty_result() -> None:
    assert legacy(make_runtime(), "ping") == (200, {"jsonrpc": "2.0", "id": 7, "result": {}})


def test_each_post_stands_alone_so_tools_work_without_initialize() -> None:
    rt = make_runtime()
    assert set(listed(rt)) == TOOLS
    status, payload = legacy(rt, "tools/list", version=None)  # no header: read as 2025-03-26
    assert status == 200 and len(payload["result"]["tools"]) == 8
    assert "resultType" not in payload["result"]  # 2026 fields stay out of the old era


@pytest.mark.parametrize("method", ["server/discover", "resources/list", "sampling/x"])
def test_a_method_we_do_not_serve_is_method_not_found(method) -> None:
    status, payload = legacy(make_runtime(), method)
    assert status == 200 and payload["error"]["code"] == -32601


def test_an_unknown_tool_is_a_protocol_error_not_a_tool_result() -> None:
    status, payload = legacy(make_runtime(), "tools/call", {"name": "rm_rf", "arguments": {}})
    assert status == 200
    assert payload["error"] == {"code": -32602, "message": "Unknown tool: rm_rf"}


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"name": 5},
        {"name": "memory_read", "arguments": []},
        {"name": "memory_read", "arguments": "x"},
    ],
)
def test_tools_call_needs_a_name_and_object_arguments(params) -> None:
    assert legacy(make_runtime(), "tools/call", params)[1]["error"]["code"] == -32602


def test_a_cursor_we_never_handed_out_is_invalid_params() -> None:
    payload = legacy(make_runtime(), "tools/list", {"cursor": "page-2"})[1]
    assert payload["error"]["code"] == -32602


# -- batches (2025-03-26 only) ----------------------------------------------------------------
def test_a_batch_at_2025_03_26_gets_its_answers_in_order() -> None:
    rt = make_runtime()
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "b", "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {}},
        "not a message",
    ]
    for headers in (BASE, BASE | {"MCP-Protocol-Version": "2025-03-26"}):
        status, answers = post(rt, batch, headers)
        assert status == 200
        assert [a["id"] for a in answers] == [1, "b", 2, None]
        assert answers[0]["result"] == {} and len(answers[1]["result"]["tools"]) == 8
        assert [a.get("error", {}).get("code") for a in answers[2:]] == [-32600, -32600]


def test_a_batch_with_nothing_to_answer_is_202() -> None:
    batch = [{"jsonrpc": "2.0", "method": "notifications/initialized"}]
    assert post(make_runtime(), batch) == (202, None)


@pytest.mark.parametrize(
    ("batch", "version"),
    [
        ([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], "2025-06-18"),
        ([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], LATEST),
        ([], "2025-03-26"),
        ([{"jsonrpc": "2.0", "id": n, "method": "ping"} for n in range(17)], "2025-03-26"),
    ],
)
def test_batches_after_2025_03_26_and_empty_or_oversized_ones_are_refused(batch, version) -> None:
    status, payload = post(make_runtime(), batch, BASE | {"MCP-Protocol-Version": version})
    assert (status, payload["id"], payload["error"]["code"]) == (400, None, -32600)


# -- the 2026-07-28 envelope --------------------------------------------------------------------
def test_server_discover_offers_the_modern_revision_with_cache_hints_and_identity() -> None:
    status, payload = modern(make_runtime(), "server/discover")
    result = payload["result"]
    assert status == 200 and payload["id"] == "r-1"
    assert result["supportedVersions"] == [MODERN]
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["resultType"] == "complete"
    assert (result["ttlMs"], result["cacheScope"]) == (300_000, "public")
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "agent-harness"
    assert "memory_save" in result["instructions"]


def test_modern_results_carry_their_result_type_and_the_server_identity() -> None:
    rt = make_runtime()
    tools = modern(rt, "tools/list")[1]["result"]
    assert {t["name"] for t in tools["tools"]} == TOOLS and tools["cacheScope"] == "public"
    result = call(rt, "memory_read", {}, era="modern")
    assert result["resultType"] == "complete" and result["isError"] is False
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["version"] == __version__


@pytest.mark.parametrize("method", ["initialize", "ping", "logging/setLevel", "nope"])
def test_the_handshake_methods_do_not_exist_at_2026(method) -> None:
    status, payload = modern(make_runtime(), method)
    assert (status, payload["error"]["code"]) == (404, -32601)


def breaks(change):
    """A valid modern tools/call, then ``change(message, headers)``."""
    message, headers = modern_request("tools/call", {"name": "memory_read", "arguments": {}})
    change(message, headers)
    return message, headers


LADDER = {
    "no envelope": (lambda m, h: m["params"].pop("_meta"), -32602),
    "no capabilities": (lambda m, h: m["params"]["_meta"].pop(CAPABILITIES_KEY), -32602),
    "capabilities not an object": (
        lambda m, h: m["params"]["_meta"].update({CAPABILITIES_KEY: []}),
        -32602,
    ),
    "client info not an object": (
        lambda m, h: m["params"]["_meta"].update({INFO_KEY: "me"}),
        -32602,
    ),
    "header and envelope versions differ": (
        lambda m, h: m["params"]["_meta"].update({VERSION_KEY: "2099-01-01"}),
        -32020,
    ),
    "another method": (lambda m, h: h.update({"Mcp-Method": "tools/list"}), -32020),
    "no method header": (lambda m, h: h.pop("Mcp-Method"), -32020),
    "another tool": (lambda m, h: h.update({"Mcp-Name": "memory_save"}), -32020),
    "another tool, base64": (
        lambda m, h: h.update({"Mcp-Name": "=?base64?bWVtb3J5X3NhdmU=?="}),
        -32020,
    ),
    "broken base64": (lambda m, h: h.update({"Mcp-Name": "=?base64?!!?="}), -32020),
}


@pytest.mark.parametrize(("change", "code"), LADDER.values(), ids=LADDER)
def test_the_envelope_ladder_refuses_with_400(change, code) -> None:
    status, payload = post(make_runtime(), *breaks(change))
    assert (status, payload["id"], payload["error"]["code"]) == (400, "r-1", code)


def test_a_base64_mcp_name_that_matches_is_accepted() -> None:
    message, headers = breaks(lambda m, h: h.update({"Mcp-Name": "=?base64?bWVtb3J5X3JlYWQ=?="}))
    assert post(make_runtime(), message, headers)[0] == 200


@pytest.mark.parametrize("padded", [f"{LATEST} ", f" {LATEST}", f"{LATEST}\t"])
def test_whitespace_around_the_protocol_version_header_is_not_part_of_it(padded) -> None:
    status, payload = legacy(make_runtime(), "ping", version=padded)
    assert (status, payload["result"]) == (200, {})
    message, headers = modern_request("tools/list")
    headers["MCP-Protocol-Version"] = f" {MODERN} "
    assert post(make_runtime(), message, headers)[0] == 200


def test_an_unsupported_version_names_the_versions_server_discover_lists() -> None:
    message, headers = breaks(lambda m, h: None)
    message["params"]["_meta"][VERSION_KEY] = headers["MCP-Protocol-Version"] = "2099-01-01"
    status, payload = post(make_runtime(), message, headers)
    assert (status, payload["error"]["code"]) == (400, -32022)
    assert payload["error"]["data"] == {"supported": [MODERN], "requested": "2099-01-01"}
    discover, headers = breaks(lambda m, h: None)
    discover["method"] = headers["Mcp-Method"] = "server/discover"
    listed = post(make_runtime(), discover, headers)[1]["result"]["supportedVersions"]
    assert payload["error"]["data"]["supported"] == listed


def test_modern_notifications_are_accepted_at_a_served_version_only() -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    assert post(make_runtime(), note, BASE | {"MCP-Protocol-Version": MODERN}) == (202, None)
    status, payload = post(make_runtime(), note, BASE | {"MCP-Protocol-Version": "2099-01-01"})
    assert (status, payload["error"]["code"]) == (400, -32022)


@pytest.mark.parametrize(
    "body",
    [
        [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}],  # a batch
        {"jsonrpc": "2.0", "id": 1, "result": {}},  # a response
        {"jsonrpc": "2.0"},
    ],
)
def test_at_2026_a_post_holds_one_request_or_notification(body) -> None:
    status, payload = post(make_runtime(), body, BASE | {"MCP-Protocol-Version": MODERN})
    assert (status, payload["id"], payload["error"]["code"]) == (400, None, -32600)


# -- transport faults, both eras ------------------------------------------------------------------
ERAS = [{}, {"MCP-Protocol-Version": LATEST}, {"MCP-Protocol-Version": MODERN}]


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("body", ["", "{", "not json", "[" * 100_000, '{"a": 1}}'])
def test_a_body_that_is_not_json_is_a_parse_error(era, body) -> None:
    status, payload = post(make_runtime(), body, BASE | era)
    assert (status, payload["id"], payload["error"]["code"]) == (400, None, -32700)


@pytest.mark.parametrize("era", ERAS[:2])
@pytest.mark.parametrize(
    "body",
    [
        42,
        '"ping"',  # a JSON string: post() sends a str as it is
        {},
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": None, "method": "ping"},
        {"jsonrpc": "2.0", "id": True, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "method": 5},
        {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]},
        {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {}},
    ],
)
def test_json_that_is_not_a_json_rpc_message_is_an_invalid_request(era, body) -> None:
    status, payload = post(make_runtime(), body, BASE | era)
    assert (status, payload["error"]["code"]) == (400, -32600)


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("accept", ["text/event-stream", "", "text/html, image/*"])
def test_a_client_that_cannot_take_json_gets_406(era, accept) -> None:
    status, payload = post(
        make_runtime(), {}, {"Content-Type": "application/json", "Accept": accept} | era
    )
    assert status == 406 and payload["error"]["code"] == -32600


@pytest.mark.parametrize("accept", ["application/json", "*/*", "application/*;q=0.9, text/*"])
def test_wildcards_and_json_alone_are_accepted(accept) -> None:
    headers = {"Content-Type": "application/json", "Accept": accept, "mcp-protocol-version": LATEST}
    assert post(make_runtime(), {"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers)[0] == 200


def test_the_handshake_era_needs_a_json_content_type_and_the_2026_one_does_not() -> None:
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    status, payload = post(make_runtime(), ping, BASE | {"Content-Type": "text/plain"})
    assert (status, payload["error"]["code"]) == (415, -32600)
    utf8 = BASE | {"Content-Type": "Application/JSON; charset=utf-8"}
    assert post(make_runtime(), ping, utf8)[0] == 200
    message, headers = modern_request("tools/list")
    assert post(make_runtime(), message, headers | {"Content-Type": "text/plain"})[0] == 200


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
MESSAGE = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0") | st.text(max_size=3)},
    optional={
        "id": JSON,
        "method": st.sampled_from(["tools/call", "tools/list", "initialize", "ping"]) | JSON,
        "params": st.fixed_dictionaries(
            {}, optional={"name": JSON, "arguments": JSON, "_meta": JSON}
        )
        | JSON,
    },
)


@settings(max_examples=150, deadline=None)
@given(body=MESSAGE | JSON | st.lists(MESSAGE, max_size=3), era=st.sampled_from(ERAS))
def test_no_body_ever_causes_a_5xx_or_an_exception(body, era) -> None:
    status, _ = post(make_runtime(), body, BASE | era)
    assert status in (200, 202, 400, 404)


# -- the tool listing ------------------------------------------------------------------------------
def test_every_tool_has_a_description_valid_schemas_and_truthful_annotations() -> None:
    tools = listed(make_runtime())
    for name, tool in tools.items():
        assert len(tool["description"]) > 60 and tool["title"], name
        Draft202012Validator.check_schema(tool["inputSchema"])
        assert tool["inputSchema"]["type"] == "object"
        assert tool["inputSchema"]["additionalProperties"] is False  # unknown arguments refused
        if name != "memory_get":  # N|text rows are the whole answer
            Draft202012Validator.check_schema(tool["outputSchema"])
            assert tool["outputSchema"]["type"] == "object"
        writes = name in ("memory_save", "record_conversation", "memory_correct", "memory_promote")
        assert tool["annotations"] == {
            "title": tool["title"],
            "readOnlyHint": not writes,
            "destructiveHint": name == "memory_correct",  # it retires a fact
            "idempotentHint": not writes,
            "openWorldHint": False,
        }
    assert "outputSchema" not in tools["memory_get"]


def _subschemas(schema: Any) -> list[dict]:
    """Every schema object inside ``schema`` (properties, items, anyOf, $defs...)."""
    found = [schema] if isinstance(schema, dict) else []
    values = schema.values() if isinstance(schema, dict) else schema
    if isinstance(schema, dict | list):
        for value in values:
            found += _subschemas(value)
    return found


def test_every_default_in_an_input_schema_is_valid_for_its_own_schema() -> None:
    # strict clients (the TypeScript SDK's) reject "default": null on a string type
    for name, tool in listed(make_runtime()).items():
        for sub in _subschemas(tool["inputSchema"]):
            if "default" in sub and "type" in sub:
                plain = {k: v for k, v in sub.items() if k != "default"}
                assert Draft202012Validator(plain).is_valid(sub["default"]), (name, sub)
    mode = listed(make_runtime())["memory_search"]["inputSchema"]["properties"]["match_mode"]
    # null, not phrase: a client that fills defaults in must not turn the fall back to
    # ranked (a question alone finds its fact) into a literal phrase search
    assert mode["default"] is None and mode["type"] == ["string", "null"]


def test_input_schemas_carry_the_routes_names_and_limits() -> None:
    tools = listed(make_runtime())
    search = tools["memory_search"]["inputSchema"]
    assert search["required"] == ["query"]
    assert search["properties"]["match_mode"]["enum"] == ["phrase", "all", "any", "ranked", None]
    assert (search["properties"]["limit"]["minimum"], search["properties"]["limit"]["maximum"]) == (
        1,
        200,
    )
    threads = tools["thread_search"]["inputSchema"]
    # memory_search's own: facts have lives, and shared scopes have memories
    lifecycle = {"include_superseded", "as_of", "scope"}
    assert set(search["properties"]) - set(threads["properties"]) == lifecycle
    assert {k: v for k, v in search["properties"].items() if k not in lifecycle} == threads[
        "properties"
    ]
    assert set(tools["memory_save"]["inputSchema"]["properties"]) == {
        "content",
        "timestamp",
        "source",
        "scope",
    }
    assert set(tools["memory_get"]["inputSchema"]["properties"]) == {
        "path",
        "start_line",
        "end_line",
        "scope",
    }
    assert set(tools["memory_read"]["inputSchema"]["properties"]) == {"scope"}
    record = tools["record_conversation"]["inputSchema"]
    assert set(record["required"]) == {"session_id", "messages"}
    assert record["properties"]["messages"]["maxItems"] == 2000


# -- the tools -------------------------------------------------------------------------------
#: a hit's lifecycle fields when it is no ledger fact (MEMORY.md): none (nulls are left out)
UNDATED = {"recheck": []}


def conforms(rt, tool: str, result: dict) -> dict:
    """structuredContent as the tool's outputSchema describes it."""
    assert result["isError"] is False, text(result)
    Draft202012Validator(listed(rt)[tool]["outputSchema"]).validate(result["structuredContent"])
    return result["structuredContent"]


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_memory_save_then_memory_search_finds_the_fact_with_its_source(era) -> None:
    rt = make_runtime()
    saved = call(
        rt, "memory_save", {"content": "- Prefers aisle seats\n\n- Drinks green tea"}, era=era
    )
    assert conforms(rt, "memory_save", saved) == {"saved": 2, "held": 0}
    assert text(saved) == "Saved 2 memories to MEMORY.md and the ledger of 2026-11-30"
    assert rt.store.text(ALICE, "MEMORY.md") == (
        "- [save:mcp] Prefers aisle seats\n- [save:mcp] Drinks green tea\n"
    )
    assert "> source: mcp via=memory_save\n- [save:mcp] Prefers aisle seats" in rt.store.text(
        ALICE, "memory/2026-11-30.md"
    )

    found = call(rt, "memory_search", {"query": "aisle"}, era=era)
    AISLE = "- [save:mcp] Prefers aisle seats"
    fact = ledger_fact_id("2026-11-30", AISLE)
    assert conforms(rt, "memory_search", found) == {
        "hits": [
            {"path": "MEMORY.md", "line": 1, "text": AISLE, "authority": "save:mcp"} | UNDATED,
            {"path": "memory/2026-11-30.md", "line": 4, "text": AISLE, "authority": "save:mcp"}
            | UNDATED
            | {"fact_id": fact, "state": "current"},
        ],
        "match_mode": "phrase",
    }
    assert text(found).splitlines()[1:] == [
        f"Source: MEMORY.md#1: {AISLE}",
        f"Source: memory/2026-11-30.md#4 (fact {fact}): {AISLE}",
    ]
    ranked = call(rt, "memory_search", {"query": "tea", "match_mode": "ranked", "limit": 1})
    assert [h["text"] for h in ranked["structuredContent"]["hits"]] == [
        "- [save:mcp] Drinks green tea"
    ]
    assert ranked["structuredContent"]["hits"][0]["score"] > 0


def test_a_blank_query_finds_nothing_and_says_so() -> None:
    rt = make_runtime()
    call(rt, "memory_save", {"content": "- x"})
    for query in (None, "  "):
        result = call(rt, "memory_search", {"query": query})
        assert text(result) == "No query provided"
        assert result["structuredContent"] == {"hits": [], "match_mode": "phrase"}
    # the same memory, a real query: the saved line is there, and found
    found = call(rt, "memory_search", {"query": "x"})
    assert text(found).startswith("Found ")
    hit = {"path": "MEMORY.md", "line": 1, "text": "- [save:mcp] x", "authority": "save:mcp"}
    assert found["structuredContent"]["hits"][0] == hit | UNDATED


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"query": 5},
        {"query": "x", "limit": 0},
        {"query": "x", "limit": 201},
        {"query": "x", "match_mode": "fuzzy"},
        {"query": "x", "match_mode": ""},
        {"query": "x", "matchMode": "all"},  # the route's names: unknown ones are refused
    ],
)
@pytest.mark.parametrize("tool", ["memory_search", "thread_search"])
def test_search_arguments_are_checked_as_the_routes_check_them(tool, arguments) -> None:
    result = call(make_runtime(), tool, arguments)
    assert result["isError"] is True and "structuredContent" not in result
    assert text(result).startswith(f"Error: invalid arguments for {tool}: ")


def test_memory_get_reads_numbered_rows_of_a_workspace_file() -> None:
    rt = make_runtime()
    call(rt, "memory_save", {"content": "- a\n- b\n- c"})
    result = call(rt, "memory_get", {"path": "MEMORY.md", "start_line": 2, "end_line": 3})
    assert result == {
        "content": [{"type": "text", "text": "2|- [save:mcp] b\n3|- [save:mcp] c"}],
        "isError": False,
    }
    ledger = text(call(rt, "memory_get", {"path": "memory/2026-11-30.md"}))
    assert (
        "2|## Memory Save — 2026-11-30T09:00:00Z\n3|> source: mcp via=memory_save\n4|- [save:mcp] a"
        in ledger
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"path": "nope.md"}, "Error: file not found: nope.md"),
        ({"path": "../other/MEMORY.md"}, "Error: path '../other/MEMORY.md' has an invalid"),
        ({"path": "/etc/passwd"}, "Error: path '/etc/passwd' must be relative"),
        ({"path": "MEMORY.md", "start_line": 9}, "Error: startLine 9 exceeds file length 2"),
        ({"path": "MEMORY.md", "start_line": 0}, "Error: invalid arguments for memory_get"),
        ({"path": "MEMORY.md", "startLine": 1}, "Error: invalid arguments for memory_get"),
        ({}, "Error: invalid arguments for memory_get: path: Field required"),
    ],
)
def test_memory_get_refusals_say_what_is_wrong(arguments, message) -> None:
    rt = make_runtime()
    call(rt, "memory_save", {"content": "- a"})
    result = call(rt, "memory_get", arguments)
    assert result["isError"] is True and text(result).startswith(message)


def test_memory_read_returns_memory_md_whole_with_its_version() -> None:
    rt = make_runtime()
    empty = call(rt, "memory_read", {})
    assert conforms(rt, "memory_read", empty) == {"content": ""}  # no version yet
    assert text(empty) == "MEMORY.md is empty: nothing saved yet."
    call(rt, "memory_save", {"content": "- a"})
    document = conforms(rt, "memory_read", call(rt, "memory_read", {}))
    assert document == {
        "content": "- [save:mcp] a\n",
        "etag": rt.store.get(ALICE, "MEMORY.md").etag,
    }
    assert call(rt, "memory_read", {"all": True})["isError"] is True


def test_memory_save_keeps_the_day_it_was_learned_and_the_turns_it_came_from() -> None:
    rt = make_runtime()
    call(rt, "record_conversation", {"session_id": "trip", "messages": conversation("Hi", "Hello")})
    result = call(
        rt,
        "memory_save",
        {
            "content": "- Flies to Lisbon in May",
            "timestamp": "2026-03-01T10:00:00+01:00",
            "source": {"session_id": "trip", "turns": [1]},
        },
    )
    assert text(result).endswith("the ledger of 2026-03-01")
    ledger = rt.store.text(ALICE, "memory/2026-03-01.md")
    assert (
        "> source: session=trip turns=1 via=memory_save\n- [save:mcp] Flies to Lisbon in May"
        in ledger
    )


def test_save_facts_is_the_rule_the_save_route_shares() -> None:
    from agent_harness.memory.files import save_facts

    rt = make_runtime()
    saved = save_facts(rt, ALICE, "- a", timestamp=None, source=None, origin="api")
    assert (saved.count, saved.at) == (1, rt.clock.now())
    assert "> source: api via=memory_save\n- [save:api] a" in rt.store.text(
        ALICE, "memory/2026-11-30.md"
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"content": " \n "}, "Error: content is required"),
        ({"content": "x" * 101}, "Error: content is limited to 100 characters"),
        ({"content": "- a", "timestamp": "2026-12-01T09:00:00Z"}, "Error: timestamp must not be"),
        ({"content": "- a", "timestamp": "2026-11-30T09:00:00"}, "Error: invalid arguments"),
        ({"content": "- a", "source": {"session_id": "trip", "turns": [1]}}, "Error: source:"),
        ({"content": "- a", "source": {"session_id": "../x", "turns": [1]}}, "Error: session_id"),
        ({"content": "- a", "source": {"session_id": "trip", "turns": []}}, "Error: invalid"),
        ({"content": "- a", "tags": ["x"]}, "Error: invalid arguments for memory_save: tags:"),
        ({"content": ["- a"]}, "Error: invalid arguments for memory_save: content:"),
    ],
)
def test_a_refused_save_writes_nothing(arguments, message) -> None:
    rt = make_runtime(settings=Settings(max_memory_chars=100))
    result = call(rt, "memory_save", arguments)
    assert result["isError"] is True and text(result).startswith(message), text(result)
    assert rt.store.objects == {}


def test_record_conversation_stores_turns_and_its_facts_reach_memory() -> None:
    rt = make_runtime()
    messages = conversation("I prefer window seats.", "Noted!", "We decided on Lisbon.")
    result = call(rt, "record_conversation", {"session_id": "chat-1", "messages": messages})
    assert conforms(rt, "record_conversation", result) == {
        "session_id": "chat-1",
        "first_turn": 1,
        "last_turn": 2,
        "messages": 3,
        "flush": "queued",
    }
    assert text(result) == (
        "Recorded 3 messages as turns 1-2 of chat-1; their facts reach memory shortly"
    )
    assert [(job.turn, job.reason) for job in rt.queue.post_turn] == [(2, "import")]

    drain(rt)  # the post-turn job: flush (the offline memory model) and indexing
    facts = call(rt, "memory_search", {"query": "window seats"})["structuredContent"]["hits"]
    assert [h["text"] for h in facts] == ["- [import] User said: I prefer window seats."]
    said = call(rt, "thread_search", {"query": "Lisbon"})
    assert conforms(rt, "thread_search", said)["hits"] == [
        {
            "session_id": "chat-1",
            "turn": 2,
            "role": "user",
            "at": "2026-11-30T09:00:00Z",
            "text": "We decided on Lisbon.",
        }
    ]
    assert "Session chat-1, turn 2 (user, 2026-11-30T09:00:00Z)" in text(said)


def test_a_recording_says_so_when_this_deployment_extracts_no_facts() -> None:
    rt = make_runtime(settings=Settings(flush_trigger="never"))
    result = call(rt, "record_conversation", {"session_id": "s1", "messages": conversation("hi")})
    assert result["structuredContent"]["flush"] == "skipped"
    assert text(result).endswith("facts are not extracted here: save them with memory_save")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"session_id": "s1", "messages": []}, "Error: invalid arguments"),
        ({"session_id": "s1", "messages": conversation("hi") * 2001}, "Error: invalid arguments"),
        ({"session_id": "s1", "messages": [{"role": "system", "content": "x"}]}, "Error: invalid"),
        ({"session_id": "s1", "messages": [{"role": "user", "content": " "}]}, "Error: invalid"),
        ({"messages": conversation("hi")}, "Error: invalid arguments for record_conversation"),
        ({"session_id": "../s1", "messages": conversation("hi")}, "Error: session_id must be"),
        ({"session_id": "s" * 129, "messages": conversation("hi")}, "Error: session_id must be"),
        ({"session_id": "s" * 9, "messages": conversation("hi")}, "Error: session_id is limited"),
    ],
)
def test_a_refused_recording_writes_and_queues_nothing(arguments, message) -> None:
    rt = make_runtime(settings=Settings(max_session_id_chars=8))
    result = call(rt, "record_conversation", arguments)
    assert result["isError"] is True and text(result).startswith(message), text(result)
    assert rt.store.objects == {} and rt.queue.post_turn == []


def test_a_storage_outage_is_a_short_error_result_not_a_5xx() -> None:
    rt = make_runtime()
    rt.store.fail_puts = lambda path: True
    result = call(rt, "memory_save", {"content": "- a"})
    assert result["isError"] is True
    assert text(result) == "Error: memory_save failed: store_unavailable (temporary; try again)"


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (StoreError("GET users/alice/MEMORY.md: 503"), "store_unavailable (temporary; try again)"),
        (ModelTimeoutError("no answer in 25 s"), "model_timeout (temporary; try again)"),
        (ModelAuthError("invalid x-api-key sk-123"), "model_auth_failed"),
    ],
)
def test_server_side_failures_name_their_code_and_nothing_else(error, message) -> None:
    rt = make_runtime()

    def failing(*args, **kwargs):
        raise error

    rt.store.get = failing
    for era in ("legacy", "modern"):
        result = call(rt, "memory_read", {}, era=era)
        assert result["isError"] is True
        assert text(result) == f"Error: memory_read failed: {message}"
        assert error.message not in text(result)


def test_a_bug_in_a_tool_shows_nothing_internal() -> None:
    rt = make_runtime()

    def broken(*args, **kwargs):
        raise KeyError("secret internal detail")

    rt.store.get = broken
    for era in ("legacy", "modern"):
        result = call(rt, "memory_read", {}, era=era)
        assert result["isError"] is True
        assert text(result) == "Error: memory_read failed unexpectedly"


# -- isolation -----------------------------------------------------------------------------------
def test_a_second_user_sees_nothing_of_the_first() -> None:
    rt = make_runtime()
    call(rt, "memory_save", {"content": "- Alice's secret: the blue door"})
    call(rt, "record_conversation", {"session_id": "s1", "messages": conversation("blue door")})
    drain(rt)
    assert call(rt, "memory_search", {"query": "blue door"})["structuredContent"]["hits"]

    for era in ("legacy", "modern"):
        hits = call(rt, "memory_search", {"query": "blue door"}, era=era, user=BOB)
        assert hits["structuredContent"]["hits"] == []
        said = call(rt, "thread_search", {"query": "blue door"}, era=era, user=BOB)
        assert said["structuredContent"]["hits"] == []
        assert call(rt, "memory_read", {}, era=era, user=BOB)["structuredContent"] == {
            "content": ""
        }
        got = call(rt, "memory_get", {"path": "MEMORY.md"}, era=era, user=BOB)
        assert text(got) == "Error: file not found: MEMORY.md"
    source = {"session_id": "s1", "turns": [1]}  # Alice's session is not Bob's
    refused = call(rt, "memory_save", {"content": "- x", "source": source}, user=BOB)
    assert refused["isError"] is True and "has no turn 1" in text(refused)
    assert not any(key.startswith(f"users/{BOB.key}/") for key in rt.store.objects)


def test_a_save_into_a_full_memory_md_is_a_tool_error_and_writes_nothing() -> None:
    rt = make_runtime(settings=Settings(max_memory_chars=100))
    rt.store.put(ALICE, "MEMORY.md", "# Memory\n\n- " + "x" * 80 + "\n", create_only=True)
    before = dict(rt.store.objects)
    result = call(rt, "memory_save", {"content": "- Prefers tea"})
    assert result["isError"] is True and text(result).startswith("Error: MEMORY.md would be")
    assert rt.store.objects == before


@pytest.mark.parametrize(
    ("mode", "wanted"),
    [
        ("dev", 'Bearer realm="agent-harness", error="invalid_request"'),
        (
            "jwt",
            'Bearer resource_metadata="https://127.0.0.1/.well-known/oauth-protected-resource/mcp"',
        ),
    ],
)
def test_a_request_without_identity_is_a_json_rpc_401_with_a_bearer_challenge(
    mode: str, wanted: str
) -> None:
    from agent_harness.api.routes import build_app
    from local_stack.lambdas import context_for, http_event

    issuer = "https://idp.example" if mode == "jwt" else ""
    rt = make_runtime(settings=Settings(auth_mode=mode, jwt_issuer=issuer))
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    event = http_event("POST", "/mcp", headers=BASE, body=ping)

    response = build_app(rt).resolve(event, context_for("AgentCallFunction"))

    assert response["statusCode"] == 401
    body = json.loads(response["body"])
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["code"] == -32001 and body["error"]["message"]
    challenge = response["headers"]["WWW-Authenticate"]
    assert challenge.startswith(wanted), challenge
    assert ("X-User-Id" if mode == "dev" else "Authorization: Bearer") in body["error"]["message"]
    assert rt.store.objects == {}
