"""Every tool a turn offers the model, in one tool box:

    memory tools    memory_search, memory_get, thread_search, memory_save,
                    memory_correct (memory_promote with bound scopes)      run here
    remote tools    <server>__<tool> of HARNESS_MCP_SERVERS (MCP, Streamable HTTP)  run here
    client tools    declared by the caller with the message              run by the caller

Results of the tools run here pass the eviction of oversized results; a client call is
deferred (``None``) and the turn pauses for it. The remote tool list comes from a
per-container cache of the servers' listings (``Runtime.tool_servers``); a server that
cannot be reached is left out of the turn, which goes on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_harness.agent.eviction import Evictor
from agent_harness.agent.exposure import Exposure
from agent_harness.agent.scoped import promote_tool
from agent_harness.agent.tools import MemoryTools, Tool, ToolRegistry
from agent_harness.utf8 import scrubbed

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agent_harness.agent.client_tools import ClientTools
    from agent_harness.embeddings.queries import QueryVectors
    from agent_harness.ids import User
    from agent_harness.models.base import Message, ToolCall, ToolSpec
    from agent_harness.runtime import Runtime
    from agent_harness.scopes import Grant

__all__ = ["TurnTools", "turn_tools"]


class TurnTools:
    """The tool box of one model loop: the tools run here, then the caller's."""

    def __init__(
        self, served: ToolRegistry | None, client: ClientTools | None, exposure: Exposure
    ) -> None:
        self._served = served
        self._client = client
        self._exposure = exposure

    def seen(self, messages: list[Message]) -> None:
        """The request whose answer's tool calls run next: what its model was shown
        (agent.exposure), which bounds what the memory tools may write."""
        self._exposure.observe(messages)

    def specs(self) -> list[ToolSpec]:
        return [
            *(self._served.specs() if self._served else []),
            *(self._client.specs() if self._client else []),
        ]

    def call(self, call: ToolCall) -> str | None:
        if self._client is not None and call.name in self._client:
            return self._client.call(call)
        if self._served is not None:
            return self._served.call(call)
        return f"Error: unknown tool {call.name}"


def _remote_tools(rt: Runtime, user: User) -> list[Tool]:
    servers = rt.remote_tool_servers()
    if servers is None:
        return []

    def handler(tool: Any) -> Any:
        def run(arguments: dict[str, Any]) -> str:
            left = rt.deadline.remaining()
            result = servers.call(tool, arguments, user_id=user.id, remaining=left)
            return scrubbed(result)  # stored with the turn: a lone surrogate would fail it

        return run

    return [
        Tool(tool.qualified, tool.description, tool.input_schema, handler(tool))
        for tool in servers.tools(remaining=rt.deadline.remaining())
    ]


def turn_tools(
    rt: Runtime,
    user: User,
    session_id: str,
    client: ClientTools | None,
    scopes: Sequence[Grant] = (),
    untrusted: dict[str, str] | None = None,
    *,
    queries: QueryVectors | None = None,
) -> TurnTools | None:
    """The turn's tool box, or None when it offers no tool at all. ``scopes``: the
    session's bound shared scopes, which memory_search and memory_get also read. What
    the turn's model is shown (``TurnTools.seen``) decides what its memory writes may
    claim (agent.exposure); ``untrusted``: what the session's history held below the
    user (``WorkingContext.untrusted``); ``queries``: the turn's query vectors (its
    searches by meaning, metered with the turn)."""
    exposure = Exposure(dict(untrusted or {}))
    memory = MemoryTools(rt, user, scopes=list(scopes), exposure=exposure, queries=queries)
    served = [] if rt.settings.disable_memory_tools else memory.tools()
    promote = None if rt.settings.disable_memory_tools else promote_tool(rt, scopes, exposure)
    served += [promote] if promote is not None else []
    served += _remote_tools(rt, user)
    registry = ToolRegistry(served, after=Evictor(rt, user, session_id)) if served else None
    if registry is None and client is None:
        return None
    return TurnTools(registry, client, exposure)
