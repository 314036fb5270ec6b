"""What each handler imports at init, pinned: a Lambda cold start pays every module a
handler's import pulls in, so each imports what its first event needs and nothing else
(routes' services, the agent loop, the flush job, models' message types, tokenizer files,
an embedding model, MCP code: each on first use). A change that adds a module to a
handler's init fails here, not in a benchmark months later: make the import lazy (inside
the function that needs it), or, when the first event really needs it, add it below and
say why in the commit. The same sets hold with every setting at its default (only the
resource names set) as with a deployed function's settings: a setting must not pull a
module in at init. How long init takes is `make bench ONLY=cold_start`'s."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from local_stack.sam_env import lambda_environment
from tests.conftest import ROOT

PROBE = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
prefix = "agent_harness."
own = sorted(m.removeprefix(prefix) for m in sys.modules if m.startswith(prefix))
tops = {m.split(".")[0] for m in sys.modules if not m.startswith("_")}
others = sorted(tops - set(sys.stdlib_module_names) - {"agent_harness", "functions"})
print(json.dumps([own, others]))
"""
HANDLERS = {
    "AgentCallFunction": "functions.agent_call.app",
    "MemoryFlushFunction": "functions.memory_flush.app",
    "MemoryConsolidateFunction": "functions.memory_consolidate.app",
    "MemoryForgetFunction": "functions.memory_forget.app",
}
#: the packages outside the standard library any handler may import at init: the AWS SDK
#: and its dependencies, Powertools, pydantic and its own, and Lambda's SnapStart hooks
#: (the runtime's ``snapshot_restore_py``, pinned for the tests)
THIRD_PARTY = frozenset(
    (
        "annotated_types", "aws_lambda_powertools", "boto3", "botocore", "certifi",
        "dateutil", "jmespath", "pydantic", "pydantic_core", "s3transfer", "six",
        "snapshot_restore_py",
        "typing_extensions", "typing_inspection", "urllib3",
    )
)  # fmt: skip
#: each handler's modules of the package at init (``agent_harness.`` left out)
# fmt: off
INIT_MODULES: dict[str, frozenset[str]] = {
    "AgentCallFunction": frozenset(
        (
            "api", "api.http", "api.memory_routes", "api.protocol_routes", "api.routes",
            "api.scope_routes", "api.session_routes", "aws", "aws.clients", "aws.dynamo",
            "aws.member_items", "aws.memory_items", "aws.place_items", "aws.queues",
            "aws.sessions", "aws.state", "aws.usage_items", "aws.workspace", "clock",
            "consolidation_ports", "erasure_ports", "errors", "ids", "keys", "mcp_config",
            "member_ports", "memory", "memory.engine", "memory.engine.cache",
            "memory.engine.listings", "models", "models.resilience", "paths", "ports",
            "runtime", "scopes", "setting_names", "setting_values", "settings", "snapstart",
            "tokens", "usage_ports", "utf8",
        )
    ),
    "MemoryFlushFunction": frozenset(
        (
            "aws", "aws.clients", "aws.dynamo", "aws.member_items", "aws.memory_items",
            "aws.place_items", "aws.queues", "aws.sessions", "aws.state", "aws.usage_items",
            "aws.workspace", "clock", "consolidation_ports", "erasure_ports", "errors", "ids",
            "jobs", "keys", "mcp_config", "member_ports", "memory", "memory.engine",
            "memory.engine.cache", "memory.engine.listings", "memory.jobs",
            "memory.jobs.idempotency", "models", "models.resilience", "paths", "ports",
            "runtime", "setting_names", "setting_values", "settings", "tokens", "usage_ports",
            "utf8",
        )
    ),
    "MemoryConsolidateFunction": frozenset(
        (
            "aws", "aws.clients", "aws.dynamo", "aws.member_items", "aws.memory_items",
            "aws.place_items", "aws.queues", "aws.sessions", "aws.state", "aws.usage_items",
            "aws.workspace", "clock", "consolidation_ports", "erasure_ports", "errors", "ids",
            "jobs", "keys", "mcp_config", "member_ports", "memory", "memory.engine",
            "memory.engine.cache", "memory.engine.listings", "models", "models.resilience",
            "paths", "ports", "runtime", "setting_names", "setting_values", "settings",
            "tokens", "usage_ports", "utf8",
        )
    ),
    "MemoryForgetFunction": frozenset(
        (
            "aws", "aws.clients", "aws.dynamo", "aws.member_items", "aws.memory_items",
            "aws.place_items", "aws.queues", "aws.sessions", "aws.state", "aws.usage_items",
            "aws.workspace", "clock", "consolidation_ports", "erasure_ports", "errors", "ids",
            "keys", "mcp_config", "member_ports", "memory", "memory.engine",
            "memory.engine.cache", "memory.engine.listings", "memory.facts",
            "memory.facts.ledger", "memory.jobs", "memory.jobs.forget", "memory.owner",
            "memory.owner.writes", "models", "models.resilience", "paths", "ports", "runtime",
            "setting_names", "setting_values", "settings", "tokens", "usage_ports", "utf8",
        )
    ),
}
# fmt: on


def _init(function_id: str, env: dict[str, str]) -> tuple[set[str], set[str]]:
    env = {
        **env,
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": f"{ROOT}:{ROOT / 'layers' / 'agent_harness'}",
    }
    done = subprocess.run(
        [sys.executable, "-c", PROBE, HANDLERS[function_id]],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    own, others = json.loads(done.stdout.splitlines()[-1])
    return set(own), set(others)


@pytest.mark.parametrize("function_id", list(HANDLERS))
def test_a_handlers_init_imports_exactly_its_pinned_modules(function_id: str) -> None:
    own, others = _init(function_id, lambda_environment(function_id))
    pinned = INIT_MODULES[function_id]
    assert own - pinned == set(), "new at init (make it lazy, or pin it with why)"
    assert pinned - own == set(), "no longer imported at init: unpin it"
    assert others <= THIRD_PARTY, others - THIRD_PARTY


@pytest.mark.parametrize("function_id", list(HANDLERS))
def test_no_setting_pulls_a_module_into_init(function_id: str) -> None:
    deployed = lambda_environment(function_id)
    resources = ("BUCKET", "TABLE", "FLUSH_QUEUE_URL", "CONSOLIDATION_QUEUE_URL")
    defaults = {
        k: v
        for k, v in deployed.items()
        if not k.startswith("HARNESS_") or k.removeprefix("HARNESS_") in resources
    }
    assert _init(function_id, defaults) == _init(function_id, deployed)
