"""SnapStart in process: functions/agent_call is imported (init), its registered hooks are
called as Lambda's Python runtime calls them (``snapshot_restore_py``'s registries:
before the snapshot, then after each restore), and the restored handler serves a turn.
Moto stands behind the clients, as in the other integration tests."""

from __future__ import annotations

import random
import sys
from types import SimpleNamespace
from typing import Any

import snapshot_restore_py

from tests.conftest import load_event
from tests.integration.conftest import Stack, body

FN = "AgentCallFunction"


def run(registry: list[tuple[Any, tuple[Any, ...], dict[str, Any]]]) -> None:
    """Each hook as the runtime calls it: with the arguments it was registered with."""
    for hook, args, kwargs in registry:
        hook(*args, **kwargs)


def test_a_snapshot_is_warmed_and_a_restore_gets_new_clients_then_serves_a_turn(
    stack: Stack,
) -> None:
    snapshot_restore_py.get_before_snapshot().clear()
    snapshot_restore_py.get_after_restore().clear()
    app = stack.handler(FN)  # init: the hooks are registered
    runtime = app.runtime
    assert len(snapshot_restore_py.get_before_snapshot()) == 1
    assert len(snapshot_restore_py.get_after_restore()) == 1

    # before the snapshot: the first turn's modules and the tokenizer are in memory,
    # and nothing of a user's is
    indexed = SimpleNamespace(size=7)  # what the cache holds: anything with a size
    runtime.search_cache.put(("alice", "MEMORY.md", "etag"), indexed)
    run(snapshot_restore_py.get_before_snapshot())
    assert all(name in sys.modules for name in app.FIRST_TURN)
    assert runtime.search_cache.get(("alice", "MEMORY.md", "etag")) is None

    # two restores of one snapshot draw different numbers, and each has its own clients
    snapshot = random.getstate()
    old_clients, old_store = dict(runtime.clients), runtime.store
    run(snapshot_restore_py.get_after_restore())
    first = random.random()
    random.setstate(snapshot)
    run(snapshot_restore_py.get_after_restore())
    assert random.random() != first
    assert all(runtime.clients[n] is not old_clients[n] for n in ("s3", "dynamodb", "sqs"))
    assert runtime.store is not old_store

    response = stack.invoke(app, load_event("agent_call_post_message.json"), FN)

    assert response["statusCode"] == 200, response["body"]
    answer = body(response)
    assert answer["turn"] == 1 and answer["reply"]
    assert any(k.endswith("/turns/00000001.json") for k in stack.object_keys())


def test_without_the_runtimes_module_no_hook_is_registered(monkeypatch: Any) -> None:
    from agent_harness.snapstart import install

    monkeypatch.setitem(sys.modules, "snapshot_restore_py", None)  # import fails
    assert install(object(), ()) is False  # type: ignore[arg-type]
