"""What the benchmarks share: the LoCoMo data, the machine description, the env setup."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

    from local_stack.process import LocalStackProcess

ROOT = Path(__file__).resolve().parent.parent

#: LoCoMo (CC BY-NC 4.0) is read from the team's shared copy, never committed here
LOCOMO_PATH = Path(os.environ.get("LOCOMO_PATH", ROOT.parent / "shared" / "eval" / "locomo10.json"))
#: the only conversations anything may be tuned on; the rest are held out
TUNING = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")
HELD_OUT = ("conv-44", "conv-47", "conv-48", "conv-49", "conv-50")


class DataMissingError(RuntimeError):
    """The LoCoMo file is not on this machine (set LOCOMO_PATH)."""


@cache
def locomo() -> dict[str, dict[str, Any]]:
    """The LoCoMo samples by sample_id."""
    if not LOCOMO_PATH.is_file():
        raise DataMissingError(f"LoCoMo data not found at {LOCOMO_PATH} (set LOCOMO_PATH)")
    return {s["sample_id"]: s for s in json.loads(LOCOMO_PATH.read_text(encoding="utf-8"))}


def sessions(sample: dict[str, Any]) -> list[tuple[int, str, list[dict[str, Any]]]]:
    """(number, date text, turns) of each session that exists, in order (some samples have
    more ``session_N_date_time`` keys than sessions)."""
    conv = sample["conversation"]
    numbers = sorted(
        int(k.split("_")[1]) for k in conv if k.startswith("session_") and k.count("_") == 1
    )
    return [(n, conv[f"session_{n}_date_time"], conv[f"session_{n}"]) for n in numbers]


def turn_text(turn: dict[str, Any]) -> str:
    """A LoCoMo turn as a message: its text, plus the caption of a shared image."""
    text = turn["text"]
    if turn.get("blip_caption"):
        text += f" [shares an image: {turn['blip_caption']}]"
    return text


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            # what a run writes itself (results, docs) does not make the code uncommitted
            [
                "git",
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ".",
                ":!bench/results",
                ":!docs",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
        rev += "+uncommitted" if rev and dirty else ""
    except OSError:
        rev = ""
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "commit": rev,
    }


def bench_environment() -> None:
    """The library's Powertools Metrics and Logger run in-process here, outside any Lambda:
    a namespace, no metric output, warnings only. Set by the runner, not at import, so a
    test importing a benchmark module keeps its own logging."""
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "AgentHarnessBench")
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")


def embedded_aws_env() -> None:
    """Credentials and region for moto (it takes any)."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        os.environ.setdefault(key, value)


#: an ALIGN_ABOVE no section reaches: facts read with every turn their section names
NEVER_ALIGN = 10**9


@contextmanager
def switched(**changes: Any) -> Iterator[None]:
    """Set attributes of the search's modules for one variant, and put them back: each
    name in every module of the engine that has it (``terms`` is used by both), so a
    switch cannot silently miss the module that reads it. The text module's per-word
    cache is emptied around a switch of its own tables (``_IRREGULAR``)."""
    from agent_harness import text
    from agent_harness.memory.engine import alignment, file_index, index

    engine = (index, file_index, alignment, text)
    modules = [m for m in engine if any(hasattr(m, n) for n in changes)]
    missing = [n for n in changes if not any(hasattr(m, n) for m in modules)]
    if missing:
        raise AttributeError(f"no search module has {missing}")
    saved = [(m, n, getattr(m, n)) for m in modules for n in changes if hasattr(m, n)]
    for module, name, _ in saved:
        setattr(module, name, changes[name])
    cached = any(module is text for module, _, _ in saved)  # its words' terms are cached
    if cached:
        text._word_terms.cache_clear()
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)
        if cached:
            text._word_terms.cache_clear()


def pytest_report(test: str, variable: str) -> tuple[Any, bool]:
    """Run ``test`` in a fresh pytest with ``variable`` naming a file for its report;
    returns the report (JSON) and whether the tests passed."""
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
            cwd=ROOT,
            env={**os.environ, variable: str(report)},
            capture_output=True,
            text=True,
            check=False,
        )
        if not report.is_file():
            raise RuntimeError(f"{test} wrote no report:\n{done.stdout[-2000:]}")
        return json.loads(report.read_text()), done.returncode == 0


def wait_jobs_done(stack: LocalStackProcess, timeout: float = 900) -> None:
    """Every job on the stack's FlushQueue done: the saves' index jobs (their vectors)
    run after the imports' post-turn jobs, so a search before them ranks most saved
    lines by their words alone (in AWS, seconds after a save; here, hundreds queued)."""
    sqs = stack.aws("sqs")
    url = next(u for u in sqs.list_queues()["QueueUrls"] if u.endswith("flush.fifo"))
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
        if all(int(counts[n]) == 0 for n in names):
            return
        time.sleep(1.0)
    raise RuntimeError("the stack's FlushQueue did not drain")
