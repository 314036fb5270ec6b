"""The async client is the sync one made async: ``_async.py`` is what
``clients/python/make_async.py`` writes from ``_sync.py``, and both clients have the same
methods with the same parameters, the async ones coroutines."""

from __future__ import annotations

import importlib.util
import inspect
import sys
from typing import Any

import httpx

from agent_harness_client import AgentHarness, AsyncAgentHarness
from tests.conftest import ROOT

CLIENT = ROOT / "clients" / "python"


def make_async_module() -> Any:
    spec = importlib.util.spec_from_file_location("make_async", CLIENT / "make_async.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("make_async", module)
    spec.loader.exec_module(module)
    return module


def test_the_async_client_is_generated_from_the_sync_one() -> None:
    generator = make_async_module()
    current = (CLIENT / "agent_harness_client" / "_async.py").read_text(encoding="utf-8")
    assert current == generator.generated(), "run: python clients/python/make_async.py"


def methods(obj: object, prefix: str = "") -> dict[str, Any]:
    """Public methods of a client and of its resources (``memory.search``, ...)."""
    found: dict[str, Any] = {}
    for name in dir(obj):
        if name.startswith("_"):
            continue
        value = getattr(obj, name)
        if inspect.ismethod(value):
            found[prefix + name] = value
        elif type(value).__module__.startswith("agent_harness_client."):
            found |= methods(value, f"{prefix}{name}.")
    return found


def test_both_clients_have_the_same_methods_and_parameters() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(500))
    sync = methods(AgentHarness("http://x", http_client=httpx.Client(transport=transport)))
    asynchronous = methods(
        AsyncAgentHarness("http://x", http_client=httpx.AsyncClient(transport=transport))
    )
    assert set(sync) == set(asynchronous)
    assert len(sync) >= 45
    for name, method in sync.items():
        twin = asynchronous[name]
        assert inspect.iscoroutinefunction(twin), name
        assert not inspect.iscoroutinefunction(method), name
        ours = inspect.signature(method).parameters
        theirs = inspect.signature(twin).parameters
        assert list(ours) == list(theirs), name
        for param in ours:
            assert ours[param].default == theirs[param].default, f"{name}({param})"
            assert ours[param].kind == theirs[param].kind, f"{name}({param})"
