"""memory_search: the lines of MEMORY.md and the ledgers that match a query.

A thin service over the engine (``memory.engine.index``: the match modes and ranking) and the
reader (``memory.engine.corpus``). Results keep file then line order for phrase/all/any
(MEMORY.md first, then memory/** by path, archive included); ``ranked`` is best first.

Reading (docs/design.md#budgets): one GET of MEMORY.md, one LIST of memory/, concurrent
GETs of the ledgers whose ETag is not in the warm per-container cache. A ranked query
over ledgers that name turns also reads the thread-search segments the same way (one
LIST of index/threads/, GETs of the months not cached), to score a fact with the
messages of the turns it came from.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from agent_harness.memory.engine import index
from agent_harness.memory.engine.cache import building
from agent_harness.memory.engine.corpus import load_memory_files, load_turn_texts
from agent_harness.memory.engine.index import Hit, Mode, search_files
from agent_harness.memory.facts.authority import parse_fact

if TYPE_CHECKING:
    from agent_harness.ids import User
    from agent_harness.memory.engine.cache import MemoryIndexCache
    from agent_harness.runtime import Runtime

__all__ = ["format_hits", "search_memory"]


def search_memory(
    rt: Runtime, user: User, query: str, mode: Mode, limit: int, cache: MemoryIndexCache
) -> list[Hit]:
    if not query or not query.strip():
        return []
    with building():  # a cold query fills the cache; its joins are kept there too
        files = load_memory_files(rt, user, cache)
        turns = None
        weight = index.SOURCE_WEIGHT  # read at call time: the benchmark's ablation switches it
        if mode == "ranked" and weight and any(f.linked_groups() for _, f in files):
            turns = load_turn_texts(rt, user, cache)
        hits = search_files(files, query, mode, limit, turns, weight)
    return [replace(h, authority=_authority(h.text)) for h in hits]


def _authority(text: str) -> str | None:
    fact = parse_fact(text)
    return fact.authority if fact is not None else None


def format_hits(query: str, hits: list[Hit]) -> str:
    """The tool's text answer: ``Source: <path>#<line>: <text>`` per hit (a fact's text
    starts with its authority, ``[user] ...``)."""
    if not query or not query.strip():
        return "No query provided"
    if not hits:
        return f"No matching memories found for: {query}"
    noun = "match" if len(hits) == 1 else "matches"
    rows = [f"Source: {h.path}#{h.line}: {h.text.strip()}" for h in hits]
    return f"Found {len(hits)} {noun} for: {query}\n" + "\n".join(rows)
