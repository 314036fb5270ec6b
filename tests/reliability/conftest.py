"""`make reliability`: the invariants of docs/design.md#invariants under concurrency, redelivery,
crashes and poison jobs, each test recording the figures it proves. The figures print
at the end of the run (and go to $RELIABILITY_REPORT as JSON when set)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import FakeLLM, fake_llm, local_stack  # noqa: F401  (fixtures)
from tests.integration.conftest import stack  # noqa: F401  (fixture: moto + handlers)


@dataclass
class Figure:
    invariant: str
    what: str
    value: str
    target: str
    ok: bool


FIGURES: list[Figure] = []


@pytest.fixture
def record():
    """``record(invariant, what, value, target, ok)``: one line of the report; ``invariant``
    names the docs/design.md#invariants heading(s) the figure proves."""

    def add(invariant: str, what: str, value: Any, target: str, ok: bool) -> None:
        FIGURES.append(Figure(invariant, what, str(value), target, bool(ok)))

    return add


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not FIGURES:
        return
    write = terminalreporter.write_line
    terminalreporter.section("reliability figures")
    width = max(len(f.what) for f in FIGURES)
    for f in FIGURES:
        mark = "ok  " if f.ok else "FAIL"
        write(f"  {mark} {f.what:<{width}}  {f.value}   (target: {f.target}; {f.invariant})")
    report = os.environ.get("RELIABILITY_REPORT")
    if report:
        Path(report).write_text(json.dumps([asdict(f) for f in FIGURES], indent=2) + "\n")
        write(f"  wrote {report}")
