"""Lambda SnapStart (python3.12+): the runtime hooks that make a restored snapshot safe,
and the work that moves into the snapshot.

With SnapStart on (the template's ``SnapStart`` parameter, docs/deploy.md#snapstart), a
function's init runs once, when a version is published; Lambda snapshots the initialised
memory and every cold start after that restores it. So init may do more (it is paid once)
and must not keep what a snapshot would share between restores:

    before snapshot   warm what a first request pays otherwise (``warm``: the tokenizer's
                      files, the modules of the function's first event), so restores start
                      with them; drop what is per container (caches of users' data)
    after restore     re-seed randomness (every restore would draw the same numbers),
                      new AWS clients and credentials (a snapshot's connections and
                      signing keys are stale), drop per-container caches, restart the
                      embedding model and tool-server connections (built again on use)

``install(runtime, warm)`` registers both with ``snapshot_restore_py`` (which Lambda's
Python runtime provides); without that module (not SnapStart, or a machine of ours) it
does nothing, and the hooks stay callable: tests/unit/test_snapstart.py snapshots and
"restores" a handler in process, as the runtime would, then serves a turn.
"""

from __future__ import annotations

import importlib
import random
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

if TYPE_CHECKING:
    from collections.abc import Iterable

    from agent_harness.runtime import Runtime

__all__ = ["after_restore", "before_snapshot", "install"]

logger = Logger(child=True)


def before_snapshot(rt: Runtime, warm: Iterable[str] = ()) -> None:
    """What the snapshot should already hold: ``warm``'s modules imported (those the
    function's first event imports), the tokenizer's encoding loaded; and nothing of a
    user's (the caches are emptied)."""
    for name in warm:
        importlib.import_module(name)
    rt.counter.count("warm")  # loads the encoding's files (TIKTOKEN_CACHE_DIR)
    if rt.settings.embedding_model.startswith("local:"):
        embedder = rt.embeddings()  # the in-process model, loaded into the snapshot
        if embedder is not None:
            embedder.queries(["warm"])  # one call: the engine's weights in memory
    _forget_containers_state(rt)


def after_restore(rt: Runtime) -> None:
    """A restored snapshot made safe to serve: see the module."""
    random.seed()  # os.urandom: each restore draws its own numbers
    rt.reconnect()
    _forget_containers_state(rt)
    logger.info("restored from a SnapStart snapshot")


def _forget_containers_state(rt: Runtime) -> None:
    """Everything a container keeps of users' data or of connections, dropped: built
    again on use. A local embedding model holds neither, so it stays (loaded)."""
    from agent_harness.memory.engine.cache import MemoryIndexCache
    from agent_harness.memory.engine.listings import RecentListings

    rt.search_cache = MemoryIndexCache()
    rt.listings = RecentListings()
    for kept in (rt.budget_cache, rt.turn_costs, rt.sessions_seen, rt.vector_cache):
        kept.clear()
    rt.caught_up.clear()
    if not rt.settings.embedding_model.startswith("local:"):
        rt.embedder, rt.embeddings_built = None, False
    rt.tool_servers = None


def install(rt: Runtime, warm: Iterable[str] = ()) -> bool:
    """Register the hooks when Lambda's SnapStart runtime module is there (True)."""
    try:
        from snapshot_restore_py import register_after_restore, register_before_snapshot
    except ImportError:
        return False
    register_before_snapshot(before_snapshot, rt, tuple(warm))
    register_after_restore(after_restore, rt)
    return True
