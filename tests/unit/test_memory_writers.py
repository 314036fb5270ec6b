"""Who writes memory: every call that writes the workspace store, found in the package's
source. Memory (MEMORY.md, the ledgers and their archive, the review queue and the search
indexes derived from them) is written only by its owner's storage verbs,
``agent_harness.memory.owner.writes``, and, but for the derived indexes and the review
queue's own file, through the owner's pipelines (``agent_harness.memory.owner.Memory``);
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
    "api/conversations.py": "a conversation's record (sessions/<conv>/conversation.json)",
}
#: the modules outside the owner that use its storage verbs (``Writes``) directly: the
#: indexes derived from a memory's files, and the review queue's own file format
STORAGE_VERB_USERS = {
    "memory/vectors.py": "a memory's vectors (index/vectors/)",
    "memory/engine/corpus.py": "ranked-index snapshots (index/ranked/)",
    "memory/threads.py": "thread-search segments (index/threads/)",
    "memory/review_queue.py": "the review queue's file (review/queue.jsonl)",
}
#: the storage verbs a pipeline of the owner's makes (a job makes them only through
#: one: record, merge, note, retire, propose, screen)
PIPELINE_VERBS = {"append_memory", "replace_memory", "append_ledger", "write_review"}


def sources() -> dict[str, ast.Module]:
    """Module (relative to the package) -> its syntax tree."""
    return {
        path.relative_to(PACKAGE).as_posix(): ast.parse(path.read_text())
        for path in PACKAGE.rglob("*.py")
    }


def store_writers() -> dict[str, int]:
    """Module (relative to the package) -> how many store writes it makes."""
    found: dict[str, int] = {}
    for relative, tree in sources().items():
        if relative.startswith("aws/") or relative in ("ports.py", "erasure_ports.py"):
            continue  # the adapters and the ports define the writes, they make none
        for node in ast.walk(tree):
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


def test_jobs_write_memory_only_through_the_owners_pipelines() -> None:
    def names_writes(tree: ast.Module) -> bool:
        return any(
            (isinstance(node, ast.Name) and node.id == "Writes")
            or (isinstance(node, ast.alias) and node.name == "Writes")
            or (isinstance(node, ast.Attribute) and node.attr == "Writes")
            for node in ast.walk(tree)
        )

    trees = sources()
    users = {
        m for m, tree in trees.items() if not m.startswith("memory/owner/") and names_writes(tree)
    }
    assert users == set(STORAGE_VERB_USERS), sorted(users ^ set(STORAGE_VERB_USERS))

    # the flush, consolidation, re-check, second look, corrections, promotions and
    # forgetting: no review hold of their own, no write a pipeline makes, so no job
    # gates, holds and writes in an order of its own
    own_order: dict[str, list[str]] = {}
    for module, tree in trees.items():
        if not module.startswith(("memory/jobs/", "memory/facts/")):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in (
                "agent_harness.memory.review_queue",
                "agent_harness.memory.review",
            ):
                found = [f"imports {a.name}" for a in node.names if a.name == "hold"]
            elif isinstance(node, ast.Import):
                found = [f"imports {a.name}" for a in node.names if "review" in a.name]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
                called = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
                found = [f"calls {called}"] if called in {*PIPELINE_VERBS, "hold"} else []
            else:
                found = []
            own_order.setdefault(module, []).extend(found)
    assert {m: f for m, f in own_order.items() if f} == {}
