"""A turn's tool box: memory tools, remote (MCP) tools of an injected tool-server seam,
and the caller's tools, in one loop; remote results pass eviction like any result."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agent_harness.agent.turn import run_turn
from agent_harness.ids import User
from agent_harness.models.base import Message, ToolCall
from agent_harness.settings import Settings
from tests.fakes import ScriptedModel, make_runtime

ALICE = User.from_id("alice")


@dataclass(frozen=True)
class Remote:
    server: str
    name: str
    description: str = "a remote tool"
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})

    @property
    def qualified(self) -> str:
        return f"{self.server}__{self.name}"


@dataclass
class FakeServers:
    """The tool-server seam: lists fixed tools, answers calls with ``answers``."""

    tools_listed: list[Remote]
    answers: dict[str, str]
    calls: list[tuple[str, dict[str, Any], str, float | None]] = field(default_factory=list)
    listings: int = 0

    def tools(self, *, remaining: float | None) -> list[Remote]:
        self.listings += 1
        return list(self.tools_listed)

    def call(
        self, tool: Remote, arguments: dict[str, Any], *, user_id: str, remaining: float | None
    ) -> str:
        self.calls.append((tool.qualified, arguments, user_id, remaining))
        return self.answers[tool.qualified]


def call_of(name: str, arguments: dict[str, Any], call_id: str = "r1") -> Message:
    return Message(
        role="assistant",
        tool_calls=[ToolCall(id=call_id, name=name, arguments=json.dumps(arguments))],
    )


def test_a_remote_tool_runs_on_its_server_with_the_users_id_and_the_turn_goes_on() -> None:
    servers = FakeServers([Remote("crm", "lookup_customer")], {"crm__lookup_customer": "VIP"})
    model = ScriptedModel(call_of("crm__lookup_customer", {"email": "a@b.c"}), "A VIP.")
    rt = make_runtime(agent=model, tool_servers=servers)

    result = run_turn(rt, ALICE, "s1", "who is a@b.c?")

    assert result.status == "completed" and result.reply == "A VIP."
    assert "crm__lookup_customer" in [t.name for t in model.requests[0].tools]
    assert servers.calls == [("crm__lookup_customer", {"email": "a@b.c"}, "alice", None)]
    assert model.requests[1].messages[-1].content == "VIP"


def test_a_large_remote_result_is_evicted_like_any_tool_result() -> None:
    servers = FakeServers([Remote("docs", "fetch")], {"docs__fetch": "page " * 30_000})
    model = ScriptedModel(call_of("docs__fetch", {}), "Read it.")
    rt = make_runtime(
        agent=model, tool_servers=servers, settings=Settings(eviction_max_chars=10_000)
    )

    run_turn(rt, ALICE, "s1", "fetch the docs")

    seen = model.requests[1].messages[-1].content
    assert seen.startswith("Tool output was too large (150,000 characters)")
    assert any("/tool-results/s1/r1-" in key for key in rt.store.objects)


def test_remote_and_client_tools_share_a_response_the_remote_one_runs_before_the_pause() -> None:
    servers = FakeServers([Remote("crm", "lookup")], {"crm__lookup": "found"})
    both = Message(
        role="assistant",
        tool_calls=[
            ToolCall(id="a", name="notify", arguments="{}"),
            ToolCall(id="b", name="crm__lookup", arguments="{}"),
        ],
    )
    model = ScriptedModel(both)
    rt = make_runtime(agent=model, tool_servers=servers)

    class Notify:
        name, description, parameters = "notify", "notify the user", {"type": "object"}

    paused = run_turn(rt, ALICE, "s1", "look up and notify", tools=[Notify()])

    assert paused.status == "requires_action" and [c.id for c in paused.tool_calls] == ["a"]
    assert [c[0] for c in servers.calls] == ["crm__lookup"]


def test_without_memory_tools_or_servers_or_client_tools_no_tools_are_offered() -> None:
    model = ScriptedModel("hi")
    rt = make_runtime(agent=model, settings=Settings(disable_memory_tools=True))
    run_turn(rt, ALICE, "s1", "hello")
    assert model.requests[0].tools == []
