"""Layer 1 (daily ledgers) and layer 2 (MEMORY.md): flush, consolidation, ledger format."""
