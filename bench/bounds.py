"""Bounds: every model call counted, every door closed by a spent budget, and the largest
request of each route as a share of the function's timeout.

Runs the reliability suite's bounds section (``tests/reliability/test_bounds.py``: the
ways a request ends, the doors and the requests at every cap are described there) and
lays out the figures it records. The same figures are in
``bench/results/reliability.json`` after ``make reliability``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bench.common import pytest_report

if TYPE_CHECKING:
    from pathlib import Path

TITLE = "Bounds: model calls counted, budgets closed, requests within the timeout"
TEST = "tests/reliability/test_bounds.py"


def run(quick: bool = False) -> dict[str, Any]:
    figures, passed = pytest_report(TEST, "RELIABILITY_REPORT")
    return {"figures": figures, "passed": passed}


def _group(result: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    return [f for f in result["figures"] if f["what"].startswith(prefix)]


def report(result: dict[str, Any]) -> str:
    lines = ["bounds:"]
    for f in result["figures"]:
        mark = "ok  " if f["ok"] else "FAIL"
        lines.append(f"  {mark} {f['what']}: {f['value']} (target {f['target']})")
    lines.append(f"  passed: {result['passed']}")
    return "\n".join(lines)


def _rows(figures: list[dict[str, Any]], prefix: str, head: str) -> str:
    out = [f"| {head} | value | target | |", "|---|---:|---|---|"]
    for f in figures:
        what = f["what"].removeprefix(prefix)
        out.append(f"| {what} | {f['value']} | {f['target']} | {'ok' if f['ok'] else '**no**'} |")
    return "\n".join(out)


def markdown(result: dict[str, Any], img_dir: Path) -> str:
    made = _group(result, "model calls made / counted: ")
    doors = _group(result, "budget escapes through ")
    largest = _group(result, "largest request: ")
    pause = _group(result, "a paused turn: ")
    return "\n\n".join(
        [
            "The provider is a scripted model that records each call it answers; *made* is "
            "what it answered (a call that fails returns no usage), *counted* what "
            "`GET /v1/usage` says after the request ended, however it ended. Target: equal.",
            _rows(made, "model calls made / counted: ", "how the request ended"),
            _rows(pause, "", "a paused turn"),
            "A one-turn daily budget, spent by its one turn; then each door that writes "
            "memory or calls a model, followed by every memory job it queued. Target: `429 "
            "budget_exhausted`, no model call (agent or memory) and no object written.",
            _rows(doors, "budget escapes through ", "door"),
            "Each route at every cap it documents ([configuration](configuration.md#limits)), "
            "on the real handler over moto in-process with the offline model, timed from "
            "the event to the answer: the share of the function's 29 s timeout it took. "
            "The turn with MEMORY.md at its cap is the case that once took 10 s and then "
            "answered 504 (a MEMORY.md grown to 5 MB by saves); a save past the cap is "
            "refused with 413 `memory_full`.",
            _rows(largest, "largest request: ", "request"),
            f"Suite passed: **{'yes' if result['passed'] else 'NO'}**.",
        ]
    )


if __name__ == "__main__":
    print(report(run()))
