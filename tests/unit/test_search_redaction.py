"""Search never returns what the gate redacts: a password, a card number, a social
security number, an API key or token, a PIN or a door code in a past message or a
memory line is shown as ``[redacted secret]`` by thread_search and memory_search (the
service, POST /v1/sessions/search and /v1/memory/search, the agent's tools, the MCP
tools) and by automatic recall, whether the segment was indexed before or after the
redaction existed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_harness.agent.importer import ImportedMessage
from agent_harness.agent.tools import MemoryTools
from agent_harness.agent.turn import run_turn
from agent_harness.ids import User
from agent_harness.memory.engine.cache import MemoryIndexCache
from agent_harness.memory.jobs.flush import run_post_turn_job
from agent_harness.memory.search import search_memory
from agent_harness.memory.threads import search_threads
from agent_harness.models.base import ToolCall
from agent_harness.settings import Settings
from tests.fakes import ScriptedModel, make_runtime
from tests.unit.test_mcp_server import call as mcp_call
from tests.unit.test_mcp_server import text as mcp_text
from tests.unit.test_recall import recalled_block
from tests.unit.test_routes import call

ALICE = User.from_id("alice")
MARK = "[redacted secret]"
SEGMENT = "index/threads/2026-11.jsonl"  # the fake clock's month

#: one past message per secret kind, each mentioning Lisbon (the query)
SECRETS = [
    pytest.param(
        "my email password is Tr0ub4dor&3, set up for the Lisbon trip",
        "Tr0ub4dor&3",
        id="password",
    ),
    pytest.param("my SSN is 123-45-6789 for the Lisbon visa form", "123-45-6789", id="ssn"),
    pytest.param(
        "my social security number 078-05-1120 goes on the Lisbon visa form",
        "078-05-1120",
        id="social-security-number",
    ),
    pytest.param(
        "my card number is 4111 1111 1111 1111 for the Lisbon hotel",
        "4111 1111 1111 1111",
        id="card-number",
    ),
    pytest.param(
        "the Lisbon booking API key is sk-proj-abcdefghijklmnop1234",
        "abcdefghijklmnop1234",
        id="api-key",
    ),
    pytest.param(
        "the GitHub token ghp_abcdefghijklmnopqrstuvwxyz0123456789 deploys the Lisbon site",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        id="token",
    ),
    pytest.param("my PIN is 4821 at the Lisbon bank", "4821", id="pin"),
    pytest.param("door code 2580 opens the Lisbon flat", "2580", id="door-code"),
]


def drain(rt: Any) -> None:
    """The queued post-turn jobs (they index the turns), then past the listing reuse."""
    while rt.queue.post_turn:
        run_post_turn_job(rt, rt.queue.post_turn.pop(0))
    rt.clock.advance(seconds=60)


def runtime(**settings: Any) -> tuple[Any, ScriptedModel]:
    """A stack whose memory model writes no fact: the past message is the only copy."""
    base: dict[str, Any] = {"auth_mode": "dev", "consolidation_min_gap_seconds": 0}
    agent = ScriptedModel(*(["ok"] * 6))
    rt = make_runtime(
        agent=agent,
        memory=ScriptedModel(*(["NO_REPLY"] * 6)),
        settings=Settings(**(base | settings)),
    )
    return rt, agent


def said_earlier(message: str, session: str = "monday") -> tuple[Any, ScriptedModel]:
    rt, agent = runtime()
    run_turn(rt, ALICE, session, message)
    drain(rt)
    return rt, agent


def old_segment(rt: Any, message: str) -> None:
    """A segment row indexed before redaction existed: the message as it was said."""
    row = {"s": "old", "t": 1, "i": 0, "r": "user", "at": "2026-11-02T09:00:00Z", "x": message}
    rt.store.put(ALICE, SEGMENT, json.dumps(row) + "\n")


# -- thread search -----------------------------------------------------------------------------
@pytest.mark.parametrize(("message", "secret"), SECRETS)
def test_thread_search_shows_a_secret_in_a_past_message_as_redacted(
    message: str, secret: str
) -> None:
    rt, _ = said_earlier(message)

    hits = search_threads(rt, ALICE, "Lisbon", "phrase", 5, MemoryIndexCache())

    assert [h.role for h in hits] == ["user"]
    assert secret not in hits[0].text and MARK in hits[0].text
    assert "Lisbon" in hits[0].text  # only the value goes


@pytest.mark.parametrize(("message", "secret"), SECRETS)
def test_the_thread_segment_never_holds_a_secret_it_indexed(message: str, secret: str) -> None:
    rt, _ = said_earlier(message)

    segment = rt.store.text(ALICE, SEGMENT) or ""

    assert "Lisbon" in segment and secret not in segment and MARK in segment


@pytest.mark.parametrize(("message", "secret"), SECRETS)
def test_the_sessions_search_route_shows_a_secret_in_a_past_message_as_redacted(
    message: str, secret: str
) -> None:
    rt, _ = runtime()
    status, _, _ = call(rt, "POST", "/v1/sessions/monday/messages", {"message": message})
    assert status == 200
    drain(rt)

    for mode in ("phrase", "ranked"):
        status, body, _ = call(
            rt, "POST", "/v1/sessions/search", {"query": "Lisbon", "match_mode": mode}
        )
        said = [h["text"] for h in body["hits"] if h["role"] == "user"]
        assert status == 200 and len(said) == 1 and MARK in said[0], mode
        assert secret not in json.dumps(body), mode


@pytest.mark.parametrize(("message", "secret"), SECRETS)
def test_a_segment_indexed_before_redaction_is_redacted_when_searched(
    message: str, secret: str
) -> None:
    rt, _ = runtime()
    old_segment(rt, message)

    hits = search_threads(rt, ALICE, "Lisbon", "ranked", 5, MemoryIndexCache())
    status, body, _ = call(rt, "POST", "/v1/sessions/search", {"query": "Lisbon"})

    assert [h.session_id for h in hits] == ["old"] and MARK in hits[0].text
    assert secret not in hits[0].text
    assert status == 200 and len(body["hits"]) == 1 and secret not in json.dumps(body)


# -- memory search -----------------------------------------------------------------------------
LEDGER = "memory/2026-11-02.md"


def raw_memory(rt: Any, message: str) -> None:
    """A MEMORY.md line edited by hand and a ledger line written before a pattern
    existed, each holding the secret as said."""
    rt.store.put(ALICE, "MEMORY.md", f"# Memory\n\n- {message}\n", create_only=True)
    ledger = (
        "\n## Flush — 2026-11-02T10:00:00Z\n> source: session=old turns=1 model=offline\n"
        f"- [user] {message}\n"
    )
    rt.store.put(ALICE, LEDGER, ledger, create_only=True)


@pytest.mark.parametrize(("message", "secret"), SECRETS)
def test_the_memory_search_route_shows_a_secret_in_a_memory_line_as_redacted(
    message: str, secret: str
) -> None:
    rt, _ = runtime()
    raw_memory(rt, message)

    for mode in ("phrase", "ranked"):
        status, body, _ = call(
            rt, "POST", "/v1/memory/search", {"query": "Lisbon", "match_mode": mode}
        )
        assert status == 200 and secret not in json.dumps(body), mode
        assert {h["path"] for h in body["hits"]} == {LEDGER, "MEMORY.md"}, mode
        assert all(MARK in h["text"] for h in body["hits"]), mode
        # labelled before it was redacted: the ledger fact still has its id
        ledger = [h for h in body["hits"] if h["path"] == LEDGER]
        assert len(ledger) == 1 and ledger[0]["fact_id"], mode


def test_memory_search_redacts_only_the_secret_and_keeps_the_rest_of_the_line() -> None:
    rt, _ = runtime()
    raw_memory(rt, "my SSN is 123-45-6789 for the Lisbon visa form")

    hits = search_memory(rt, ALICE, "Lisbon", "phrase", 5, MemoryIndexCache())

    assert {h.text.strip() for h in hits} == {
        f"- my SSN is {MARK} for the Lisbon visa form",
        f"- [user] my SSN is {MARK} for the Lisbon visa form",
    }


# -- the agent's tools and the MCP tools ---------------------------------------------------------
def test_the_agents_search_tools_show_secrets_redacted() -> None:
    rt, _ = said_earlier("my SSN is 123-45-6789 for the Lisbon visa form")
    raw_memory(rt, "door code 2580 opens the Lisbon flat")
    tools = MemoryTools(rt, ALICE).registry()

    threads = tools.call(ToolCall(id="c1", name="thread_search", arguments='{"query": "Lisbon"}'))
    memory = tools.call(ToolCall(id="c2", name="memory_search", arguments='{"query": "Lisbon"}'))

    assert "123-45-6789" not in threads and f"my SSN is {MARK}" in threads
    assert "2580" not in memory and f"door code {MARK}" in memory


def test_the_mcp_search_tools_show_secrets_redacted() -> None:
    rt, _ = said_earlier("my card number is 4111 1111 1111 1111 for the Lisbon hotel")
    raw_memory(rt, "the Lisbon booking API key is sk-proj-abcdefghijklmnop1234")

    threads = mcp_call(rt, "thread_search", {"query": "Lisbon"})
    memory = mcp_call(rt, "memory_search", {"query": "Lisbon"})

    assert "4111 1111" not in json.dumps(threads) and MARK in mcp_text(threads)
    assert "abcdefghijklmnop1234" not in json.dumps(memory) and MARK in mcp_text(memory)


# -- automatic recall --------------------------------------------------------------------------
QUESTION = "Which number did I give for the Lisbon visa form?"
SSN_MESSAGE = "my SSN is 123-45-6789 for the Lisbon visa form"


def recall_runtime() -> tuple[Any, ScriptedModel]:
    return runtime(recall_messages=True)


def test_recall_shows_a_secret_in_a_past_message_as_redacted() -> None:
    rt, agent = recall_runtime()
    run_turn(rt, ALICE, "monday", SSN_MESSAGE)
    drain(rt)

    run_turn(rt, ALICE, "friday", QUESTION)

    block = recalled_block(agent.requests[1]) or ""
    assert f"my SSN is {MARK} for the Lisbon visa form (user, session monday turn 1" in block
    assert "123-45-6789" not in block
    record = rt.store.text(ALICE, "sessions/friday/turns/00000001.json") or ""
    assert "123-45-6789" not in record  # nor in what the turn recorded it was shown


def test_recall_redacts_a_past_message_from_a_segment_indexed_before_redaction() -> None:
    rt, agent = recall_runtime()
    old_segment(rt, SSN_MESSAGE)

    run_turn(rt, ALICE, "friday", QUESTION)

    block = recalled_block(agent.requests[0]) or ""
    assert f"my SSN is {MARK}" in block and "session old turn 1" in block
    assert "123-45-6789" not in block


def test_recall_redacts_a_secret_in_a_memory_line() -> None:
    rt, agent = runtime()
    ledger = (
        "\n## Flush — 2026-11-02T10:00:00Z\n> source: session=old turns=1 model=offline\n"
        f"- [user] {SSN_MESSAGE}\n"
    )
    rt.store.put(ALICE, LEDGER, ledger, create_only=True)

    run_turn(rt, ALICE, "friday", QUESTION)

    block = recalled_block(agent.requests[0]) or ""
    assert f"my SSN is {MARK} for the Lisbon visa form (memory/2026-11-02.md#4)" in block
    assert "123-45-6789" not in block


def test_a_past_message_with_a_secret_the_context_holds_is_not_recalled_again() -> None:
    # its segment row is redacted, its copy in the context is not: still the same message
    rt, agent = recall_runtime()
    run_turn(rt, ALICE, "chat-1", SSN_MESSAGE)
    drain(rt)
    history = [
        ImportedMessage(role="user", content=SSN_MESSAGE),
        ImportedMessage(role="assistant", content="ok"),
    ]

    run_turn(rt, ALICE, "chat-2", QUESTION, history=history)

    assert "Lisbon visa form" not in (recalled_block(agent.requests[1]) or "")
    # positive control: without the copy in its context, a new session is shown it
    run_turn(rt, ALICE, "chat-3", QUESTION)
    assert f"my SSN is {MARK}" in (recalled_block(agent.requests[2]) or "")
