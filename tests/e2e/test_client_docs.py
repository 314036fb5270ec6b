"""docs/client.md runs: its ```python blocks, in order and in one namespace (as a reader
pastes them into one session), against the local stack (every role offline). The page's
examples read the stack and the user from ``AGENT_HARNESS_URL`` and
``AGENT_HARNESS_USER``, as it says; here those name the test's stack and a user of its
own."""

from __future__ import annotations

import re
import uuid

import pytest

from local_stack.process import LocalStackProcess
from tests.conftest import ROOT

PAGE = ROOT / "docs" / "client.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", flags=re.DOTALL | re.MULTILINE)


def python_blocks() -> list[str]:
    return BLOCK.findall(PAGE.read_text(encoding="utf-8"))


def test_the_page_has_examples_of_every_part() -> None:
    code = "\n".join(python_blocks())
    for needed in ("AgentHarness()", "AsyncAgentHarness", "HarnessSession", "HarnessStore"):
        assert needed in code
    assert "NotFoundError" in code and "PreconditionFailedError" in code


def test_the_examples_of_the_client_page_run(
    offline_stack: LocalStackProcess,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("AGENT_HARNESS_URL", offline_stack.url)
    monkeypatch.setenv("AGENT_HARNESS_USER", f"docs-{uuid.uuid4().hex[:8]}")
    monkeypatch.delenv("AGENT_HARNESS_TOKEN", raising=False)
    namespace: dict[str, object] = {"__name__": "client_page"}
    for number, block in enumerate(python_blocks(), 1):
        code = compile(block, f"docs/client.md, python block {number}", "exec")
        exec(code, namespace)  # the page's own examples
    out = capsys.readouterr().out
    assert "1 completed [offline model]" in out
    assert "['user', 'assistant']" in out
    assert "2 0" in out  # two facts saved, none held
    assert "current save:api" in out and "True superseded" in out
    assert "1 ['instruction']" in out
    assert "404 fact_not_found" in out and "412 precondition_failed" in out
    assert "['user', 'assistant', 'user', 'assistant']" in out
    assert "diet I am vegan now. current" in out and out.rstrip().endswith("None")
