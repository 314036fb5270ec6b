"""Provenance: from a MEMORY.md line back to the ledger sections it came from.

Every ledger section carries its time (header) and source (session, turns, model; or
the API / tool that saved it). Consolidation rewrites MEMORY.md in its own words, so the
link is found by relevance: the ledger bullets (active and archived days) that best
match the line, each with the section it sits in. The operator CLI's ``trace`` prints
them; an operator can then read the turns themselves (GET .../messages).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent_harness.memory.engine.corpus import load_memory_files
from agent_harness.memory.engine.index import search_files
from agent_harness.memory.facts.ledger import parse_header, source_fields
from agent_harness.paths import MEMORY_FILE

if TYPE_CHECKING:
    from agent_harness.ids import User
    from agent_harness.runtime import Runtime

__all__ = ["Origin", "trace_line"]


@dataclass(frozen=True)
class Origin:
    path: str
    line: int
    text: str
    section: str | None  # "Flush", "Memory Save", ...
    at: str | None
    source: str | None  # "session=s1 turns=3-5 model=openai:gpt-4.1-mini"


def trace_line(rt: Runtime, user: User, text: str, *, limit: int = 5) -> list[Origin]:
    """The ledger lines (best first) a MEMORY.md line most likely came from."""
    files = [(p, f) for p, f in load_memory_files(rt, user, rt.search_cache) if p != MEMORY_FILE]
    by_path = dict(files)
    origins: list[Origin] = []
    for hit in search_files(files, text.strip().lstrip("-*• ").strip(), "ranked", limit * 3):
        lines = by_path[hit.path].lines
        section = at = source = None
        for number in range(hit.line - 1, -1, -1):
            header = parse_header(lines[number])
            if header:
                section, at = header
                source = source_fields(lines[number + 1]) if number + 1 < len(lines) else None
                break
        if not hit.text.lstrip().startswith(("-", "*", "•")) and section is None:
            continue
        origins.append(Origin(hit.path, hit.line, hit.text, section, at, source))
        if len(origins) >= limit:
            break
    return origins
