"""docs/design.md#bad-input-4xx as a property: whatever arrives (bodies that are not JSON or
not UTF-8, JSON of the wrong shape, control characters, oversized messages, crafted path
parameters, unknown match modes, absurd limits and headers), the API answers without a 5xx,
a refused request carries a clear JSON error, and a refused request writes nothing.
Hypothesis generates the requests (in-process app on the fakes, the real router)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest
from aws_lambda_powertools import Metrics
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_harness.api.routes import build_app
from agent_harness.settings import Settings
from local_stack.lambdas import context_for, http_event
from tests.fakes import make_runtime

WRITES = {"put", "append", "delete", "purge"}
TABLE_WRITES = {
    "acquire_session_lease",
    "commit_turn",
    "pause_turn",
    "mark_consolidation_due",
    "purge_user",
    "delete_place",
}
outcomes = {"requests": 0, "5xx": 0, "refused": 0, "refused_with_writes": 0, "bad_errors": 0}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=10) | st.just("\ud800"), inner)
    ),
    max_leaves=10,
)
weird_text = st.one_of(
    st.text(max_size=60),
    st.text(alphabet=st.characters(max_codepoint=0x20), max_size=20),  # control characters
    st.sampled_from(["", " ", "\x00", "../..", "a/b", "%2e%2e", "MEMORY.md", "\ud7ff" * 3]),
    # lone surrogates: JSON's "\ud800" escape, text no write can encode
    st.text(alphabet=st.characters(categories=["Cs"]), min_size=1, max_size=3),
    st.sampled_from(["\ud800", "tea \udfff", "\udbff\ud800x"]),
    st.integers(100_001, 100_010).map(lambda n: "x" * n),  # over the message limit
)
fields = st.sampled_from(
    [
        "message", "messages", "query", "match_mode", "limit", "content", "version_id", "role",
        "model", "tools", "tool_results", "cancel", "stream", "n", "input", "instructions",
        "previous_response_id", "store", "text", "tool_choice", "metadata",
    ]
)  # fmt: skip
chat_messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "user", "assistant", "tool", "x"])},
        optional={
            "content": st.one_of(weird_text, json_values),
            "tool_call_id": st.text(max_size=5),
            "tool_calls": json_values,
        },
    ),
    max_size=4,
)
shaped = st.dictionaries(fields, st.one_of(weird_text, json_values, st.integers()), max_size=4)
#: the Responses API's input items: messages, function calls and their outputs, others
response_items = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {"role": st.sampled_from(["system", "developer", "user", "assistant", "tool"])},
            optional={
                "type": st.sampled_from(["message", "x"]),
                "content": st.one_of(
                    weird_text,
                    json_values,
                    st.lists(
                        st.fixed_dictionaries(
                            {"type": st.sampled_from(["input_text", "input_image", "x"])},
                            optional={"text": weird_text},
                        ),
                        max_size=2,
                    ),
                ),
            },
        ),
        st.fixed_dictionaries(
            {
                "type": st.sampled_from(
                    ["function_call", "function_call_output", "item_reference", "reasoning"]
                )
            },
            optional={
                "call_id": st.one_of(st.text(max_size=5), json_values),
                "name": st.one_of(weird_text, json_values),
                "arguments": st.one_of(weird_text, json_values),
                "output": st.one_of(weird_text, json_values),
                "id": st.text(max_size=8),
            },
        ),
    ),
    max_size=4,
)
bodies = st.one_of(
    st.binary(max_size=300),  # anything, invalid UTF-8 included
    json_values.map(lambda v: json.dumps(v).encode()),
    shaped.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries(
        {"query": weird_text, "match_mode": st.text(max_size=12), "limit": st.integers()}
    ).map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries(
        {"jsonrpc": st.sampled_from(["2.0", "1.0"]), "id": json_values},
        optional={
            "method": st.sampled_from(["tools/call", "tools/list", "initialize", "x"]),
            "params": st.one_of(
                json_values,
                st.fixed_dictionaries(
                    {"name": st.sampled_from(["memory_save", "memory_get", "nope"])},
                    optional={"arguments": st.one_of(json_values, shaped)},
                ),
            ),
        },
    ).map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries(
        {"model": st.text(max_size=8), "messages": chat_messages},
        optional={"stream": json_values, "n": st.integers(), "tools": json_values},
    ).map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries(
        {"input": st.one_of(weird_text, response_items)},
        optional={
            "instructions": st.one_of(weird_text, json_values),
            "tools": json_values,
            "tool_choice": json_values,
            "text": st.one_of(
                json_values,
                st.fixed_dictionaries(
                    {"format": st.one_of(json_values, st.just({"type": "json_schema"}))}
                ),
            ),
            "previous_response_id": st.one_of(
                weird_text, st.just("resp_id-1"), st.text(max_size=70).map(lambda t: "resp_" + t)
            ),
            "store": json_values,
            "stream": json_values,
            "metadata": json_values,
            "max_output_tokens": json_values,
        },
    ).map(lambda v: json.dumps(v).encode()),
)
segments = st.one_of(weird_text, st.text(max_size=300)).map(
    lambda s: quote(s, safe="", errors="surrogatepass")  # a lone surrogate: bytes no UTF-8 has
)
routes = st.sampled_from(
    [
        ("POST", "/v1/sessions/{}/messages"),
        ("GET", "/v1/sessions/{}/messages"),
        ("POST", "/v1/sessions/{}/import"),
        ("POST", "/v1/sessions/search"),
        ("POST", "/v1/memory/search"),
        ("POST", "/v1/memory/save"),
        ("PUT", "/v1/memory"),
        ("POST", "/v1/memory/rollback"),
        ("GET", "/v1/memory/ledger/{}"),
        ("GET", "/v1/memory/versions"),
        ("POST", "/v1/memory/consolidate"),
        ("PATCH", "/v1/memory"),
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/responses"),
        ("GET", "/v1/responses/{}"),
        ("DELETE", "/v1/responses/{}"),
        ("GET", "/v1/models"),
        ("POST", "/mcp"),
        ("GET", "/mcp"),
    ]
)
queries = st.one_of(
    st.just(""),
    st.builds(lambda a, b: f"after={a}&limit={b}", st.integers(), st.integers()),
    st.text(max_size=30).map(lambda q: quote(q, safe="=&")),
)
headers = st.dictionaries(
    st.sampled_from(
        [
            "if-match",
            "if-none-match",
            "content-type",
            "x-user-id",
            "x-session-id",
            "accept",
            "mcp-protocol-version",
        ]
    ),
    st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40),
    max_size=3,
)


class Writes:
    def __init__(self, inner: Any, names: set[str], seen: list[str]) -> None:
        self._inner, self._names, self._seen = inner, names, seen

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._inner, name)
        if name in self._names:

            def call(*args: Any, **kwargs: Any) -> Any:
                result = real(*args, **kwargs)  # a refused conditional write wrote nothing
                self._seen.append(name)
                return result

            return call
        return real


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(routes, segments, queries, headers, bodies)
def check_request(route, segment, query, extra_headers, body) -> None:
    """One generated request; hypothesis runs it for many requests."""
    Metrics().clear_metrics()
    rt = make_runtime(settings=Settings(auth_mode="dev", consolidation_min_gap_seconds=0))
    writes: list[str] = []
    rt.store = Writes(rt.store, WRITES, writes)  # type: ignore[assignment]
    rt.table = Writes(rt.table, TABLE_WRITES, writes)  # type: ignore[assignment]
    method, template = route
    path = template.format(segment or "x")
    request_headers = {"content-type": "application/json", "x-user-id": "fuzz-user"}
    request_headers.update(extra_headers)
    if not request_headers.get("x-user-id", "").strip():
        request_headers["x-user-id"] = "fuzz-user"
    event = http_event(method, path, query=query, headers=request_headers, body=body)
    response = build_app(rt).resolve(event, context_for("AgentCallFunction"))
    status = response["statusCode"]

    outcomes["requests"] += 1
    outcomes["5xx"] += status >= 500
    assert status < 500, (method, path, query, body[:200], response.get("body"))
    if status >= 400:
        outcomes["refused"] += 1
        error = json.loads(response["body"]).get("error", {})
        # our routes name errors; the MCP server answers JSON-RPC errors (numeric codes)
        code_type = int if (method, path) == ("POST", "/mcp") else str
        clear = isinstance(error.get("code"), code_type) and isinstance(error.get("message"), str)
        outcomes["bad_errors"] += not clear
        outcomes["refused_with_writes"] += bool(writes)
        assert clear, response["body"]
        assert not writes, (method, path, status, writes)


def test_no_input_makes_a_5xx_and_a_refused_request_writes_nothing(record) -> None:
    outcomes.update(dict.fromkeys(outcomes, 0))
    check_request()  # the property: raises on the first (shrunk) counterexample
    record(
        "bad-input-4xx",
        f"{outcomes['requests']} generated requests (bodies, headers, path and query "
        "parameters): 5xx",
        outcomes["5xx"],
        "0",
        outcomes["5xx"] == 0 and outcomes["requests"],
    )
    record(
        "bad-input-4xx",
        f"  ... refused ({outcomes['refused']}) without a clear JSON error",
        outcomes["bad_errors"],
        "0",
        outcomes["bad_errors"] == 0,
    )
    record(
        "bad-input-4xx",
        "  ... refused requests that wrote anything",
        outcomes["refused_with_writes"],
        "0",
        outcomes["refused_with_writes"] == 0,
    )
    assert outcomes["requests"] > 0 and outcomes["refused"] > 0
    assert outcomes["5xx"] == outcomes["bad_errors"] == outcomes["refused_with_writes"] == 0


SURROGATE_REQUESTS = [
    ("/v1/sessions/s1/messages", {"message": "I like \ud800 tea"}, "message"),
    (
        "/v1/sessions/s1/import",
        {"messages": [{"role": "user", "content": "\udc00"}]},
        "messages.0.content",
    ),
    ("/v1/memory/save", {"content": "- likes \ud83d tea"}, "content"),
    (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "hi"}, {"role": "system", "content": "\udbff"}]},
        "messages.1.content",
    ),
    ("/v1/responses", {"input": "hi", "instructions": "be \udfff"}, "instructions"),
    (
        "/v1/responses",
        {"input": [{"type": "function_call_output", "call_id": "c", "output": "\ud800"}]},
        "input.0.output",
    ),
]


@pytest.mark.parametrize(("path", "payload", "where"), SURROGATE_REQUESTS)
def test_a_lone_surrogate_is_422_naming_where_and_writes_nothing(
    path: str, payload: dict, where: str
) -> None:
    rt = make_runtime(settings=Settings(auth_mode="dev"))
    writes: list[str] = []
    rt.store = Writes(rt.store, WRITES, writes)  # type: ignore[assignment]
    rt.table = Writes(rt.table, TABLE_WRITES, writes)  # type: ignore[assignment]
    headers = {"content-type": "application/json", "x-user-id": "alice"}
    event = http_event("POST", path, headers=headers, body=json.dumps(payload).encode())
    response = build_app(rt).resolve(event, context_for("AgentCallFunction"))
    error = json.loads(response["body"])["error"]
    assert response["statusCode"] == 422, response["body"]
    assert error["message"].startswith(f"{where}: not valid Unicode text")
    assert writes == []


def test_a_lone_surrogate_in_mcp_tool_arguments_is_a_json_rpc_error_and_writes_nothing() -> None:
    rt = make_runtime(settings=Settings(auth_mode="dev"))
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "x-user-id": "alice",
    }
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "memory_save", "arguments": {"content": "- likes \ud800"}},
    }
    event = http_event("POST", "/mcp", headers=headers, body=json.dumps(call).encode())
    response = build_app(rt).resolve(event, context_for("AgentCallFunction"))
    error = json.loads(response["body"])["error"]
    assert error["code"] == -32602 and "arguments.content" in error["message"]
    assert rt.store.objects == {}
