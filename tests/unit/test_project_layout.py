"""The repository keeps its promises: events are used, the sam local env file matches the
template, the layer imports nothing it must not, pins agree."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from local_stack import sam_env
from local_stack.resources import function_ids, load_template
from tests.conftest import EVENTS, ROOT

TEMPLATE = load_template()


def test_every_event_file_is_used_by_a_test() -> None:
    sources = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))
    unused = [e.name for e in EVENTS.glob("*.json") if e.name not in sources]
    assert unused == []


def test_the_sam_local_env_file_is_current() -> None:
    assert sam_env.ENV_FILE.read_text() == sam_env.render(sam_env.build(TEMPLATE)), (
        "run `make env-file`"
    )


def test_the_env_file_covers_every_function_and_only_declared_variables() -> None:
    env = sam_env.build(TEMPLATE)
    assert sorted(env) == function_ids(TEMPLATE)
    declared_globally = set(TEMPLATE["Globals"]["Function"]["Environment"]["Variables"])
    for function_id, variables in env.items():
        props = TEMPLATE["Resources"][function_id]["Properties"]
        declared = declared_globally | set(props.get("Environment", {}).get("Variables", {}))
        # sam local ignores variables the template does not declare for the function
        assert set(variables) <= declared, function_id
        assert variables["AWS_ENDPOINT_URL"] == sam_env.ENDPOINT


def test_each_function_is_a_thin_app_module_on_the_layer() -> None:
    for function_id in function_ids(TEMPLATE):
        props = TEMPLATE["Resources"][function_id]["Properties"]
        assert props["Handler"] == "app.lambda_handler"
        app = ROOT / props["CodeUri"] / "app.py"
        imported = _imports(app)
        assert all(
            m.split(".")[0] in {"agent_harness", "aws_lambda_powertools", "__future__", "typing"}
            for m in imported
        ), imported
        assert len(app.read_text().splitlines()) < 60


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_the_layer_never_imports_test_or_local_code() -> None:
    forbidden = {"moto", "local_stack", "tests", "pytest", "functions", "yaml"}
    for path in (ROOT / "layers" / "agent_harness" / "agent_harness").rglob("*.py"):
        assert not {m.split(".")[0] for m in _imports(path)} & forbidden, path


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-]+)==(\S+)", line)
        if match:
            pins[match.group(1).lower().replace("_", "-")] = match.group(2)
    return pins


def test_runtime_pins_match_the_development_lock() -> None:
    runtime = _pins(ROOT / "layers" / "agent_harness" / "requirements.txt")
    dev = _pins(ROOT / "tests" / "requirements.txt")
    assert {name: version for name, version in runtime.items() if dev.get(name) != version} == {}


def test_every_requirement_is_pinned() -> None:
    for path in [
        ROOT / "layers" / "agent_harness" / "requirements.txt",
        ROOT / "tests" / "requirements.txt",
        ROOT / "tests" / "requirements-sam.txt",
    ]:
        for line in path.read_text().splitlines():
            if line.startswith("-e ./"):  # a package of this repository (clients/python)
                assert (ROOT / line.removeprefix("-e ./") / "pyproject.toml").is_file(), line
            elif line.strip() and not line.startswith("#"):
                assert "==" in line, f"{path.name}: {line}"


def test_lambda_runtime_and_architecture_are_explicit_and_consistent() -> None:
    function = TEMPLATE["Globals"]["Function"]
    layer = TEMPLATE["Resources"]["AgentHarnessLayer"]
    assert function["Runtime"] == "python3.12"
    assert function["Architectures"] == ["arm64"]
    assert layer["Properties"]["CompatibleRuntimes"] == [function["Runtime"]]
    assert layer["Metadata"] == {"BuildMethod": "python3.12", "BuildArchitecture": "arm64"}


def test_leases_outlive_the_function_timeouts() -> None:
    resources = TEMPLATE["Resources"]
    agent = resources["AgentCallFunction"]["Properties"]
    timeout = agent.get("Timeout", TEMPLATE["Globals"]["Function"]["Timeout"])
    assert int(agent["Environment"]["Variables"]["HARNESS_SESSION_LEASE_SECONDS"]) > timeout
    consolidate = resources["MemoryConsolidateFunction"]["Properties"]
    lease = int(consolidate["Environment"]["Variables"]["HARNESS_CONSOLIDATION_LEASE_SECONDS"])
    assert lease > consolidate["Timeout"]
    for queue, fn in [
        ("FlushQueue", "MemoryFlushFunction"),
        ("ConsolidationQueue", "MemoryConsolidateFunction"),
    ]:
        visibility = resources[queue]["Properties"]["VisibilityTimeout"]
        assert visibility >= 6 * resources[fn]["Properties"]["Timeout"], queue
