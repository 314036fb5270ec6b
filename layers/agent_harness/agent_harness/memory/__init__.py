"""Layer 1 (daily ledgers) and layer 2 (MEMORY.md): flush, consolidation, ledger format."""

#: the memory tools the agent offers (and ``memory_read``, the synthetic call of the
#: tool_result framing); their names are reserved (no caller's or remote tool may take
#: one), and their traffic is memory itself, so thread search does not index it
MEMORY_TOOLS = (
    "memory_search",
    "memory_get",
    "thread_search",
    "memory_save",
    "memory_read",
    "memory_correct",
)
#: every tool whose traffic is memory itself (what is stored, or the answer to the
#: agent's own write): no flush pass extracts it and it exposes a turn only by the facts
#: it returns (agent.exposure)
MEMORY_TRAFFIC = frozenset({*MEMORY_TOOLS, "memory_promote"})
