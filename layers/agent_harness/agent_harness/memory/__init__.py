"""Layer 1 (daily ledgers) and layer 2 (MEMORY.md): flush, consolidation, ledger format."""

#: the memory tools the agent offers; their names are reserved (no caller's or remote tool
#: may take one), and their traffic is memory itself, so thread search does not index it
MEMORY_TOOLS = ("memory_search", "memory_get", "thread_search", "memory_save")
