"""Who writes memory: every call that writes the workspace store, found in the package's
source. Memory (MEMORY.md, the ledgers and their archive, the review queue and the search
indexes derived from them) is written only by its owner's storage verbs,
``agent_harness.memory.owner.writes``;
the agent's own records (turns, working contexts, evicted tool results) are the only
other writes, each by the one module that owns its format."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "layers" / "agent_harness" / "agent_harness"
WRITES = {"put", "append", "delete", "put_many", "purge", "delete_versions"}
#: the writes outside memory/ and what each one writes (none of them memory)
OTHER_WRITERS = {
    "agent/commit.py": "a turn's record (sessions/<s>/turns/<n>.json)",
    "agent/importer.py": "an imported turn's record",
    "agent/context.py": "a session's working context (contexts/<s>.json)",
    "agent/eviction.py": "an oversized tool result (tool-results/...)",
}


def store_writers() -> dict[str, int]:
    """Module (relative to the package) -> how many store writes it makes."""
    found: dict[str, int] = {}
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith("aws/") or relative in ("ports.py", "erasure_ports.py"):
            continue  # the adapters and the ports define the writes, they make none
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in WRITES
                and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr == "store"
            ):
                found[relative] = found.get(relative, 0) + 1
    return found


def test_memory_is_written_only_inside_the_memory_package() -> None:
    writers = store_writers()
    outside = {m for m in writers if not m.startswith("memory/")}
    assert outside == set(OTHER_WRITERS), sorted(outside ^ set(OTHER_WRITERS))


def test_one_module_writes_memory_the_owners() -> None:
    inside = sorted(m for m in store_writers() if m.startswith("memory/"))
    # every write of MEMORY.md, a ledger, the archive, the review queue or an index is
    # one of the owner's storage verbs (memory.owner.writes): what must follow a
    # write has one place to hang
    assert inside == ["memory/owner/writes.py"], inside
