"""Cold start of each handler against the floor of DESIGN §7.

    floor    python -c "import boto3; S3, DynamoDB and SQS clients"
    handler  python -c "import functions.<name>.app"   (settings, clients, router; no I/O)

Each sample is a fresh interpreter, as a Lambda cold start is. Samples are interleaved
(floor, handler, floor, ...) so machine noise hits both alike, and the median is kept.
The budget is handler <= 1.6 x floor.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from local_stack.sam_env import lambda_environment

ROOT = Path(__file__).resolve().parent.parent
BUDGET = 1.6

FLOOR = "import boto3; s = boto3.Session(); [s.client(n) for n in ('s3', 'dynamodb', 'sqs')]"
BASELINE = "pass"
HANDLERS = {
    "agent_call": ("AgentCallFunction", "import functions.agent_call.app"),
    "memory_flush": ("MemoryFlushFunction", "import functions.memory_flush.app"),
    "memory_consolidate": ("MemoryConsolidateFunction", "import functions.memory_consolidate.app"),
}


def lambda_like_env(function_id: str) -> dict[str, str]:
    return {
        **lambda_environment(function_id),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": f"{ROOT}:{ROOT / 'layers' / 'agent_harness'}",
    }


def sample(code: str, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=ROOT)
    return (time.perf_counter() - started) * 1000


def run(rounds: int = 21) -> dict[str, object]:
    programs = {
        "baseline": (BASELINE, lambda_like_env("AgentCallFunction")),
        "floor": (FLOOR, lambda_like_env("AgentCallFunction")),
        **{name: (code, lambda_like_env(fn)) for name, (fn, code) in HANDLERS.items()},
    }
    for code, env in programs.values():  # warm the OS file cache and .pyc files once
        sample(code, env)
    times: dict[str, list[float]] = {name: [] for name in programs}
    for _ in range(rounds):
        for name, (code, env) in programs.items():
            times[name].append(sample(code, env))
    medians = {name: statistics.median(values) for name, values in times.items()}
    floor = medians["floor"]
    base = medians["baseline"]
    handlers = {
        name: {
            "median_ms": round(medians[name], 1),
            "ratio_to_floor": round(medians[name] / floor, 2),
            "ratio_above_interpreter": round((medians[name] - base) / (floor - base), 2),
            "within_budget": medians[name] / floor <= BUDGET,
        }
        for name in HANDLERS
    }
    return {
        "python": sys.version.split()[0],
        "rounds": rounds,
        "baseline_ms": round(base, 1),
        "floor_ms": round(floor, 1),
        "budget": BUDGET,
        "handlers": handlers,
    }


def report(result: dict[str, object]) -> str:
    lines = [
        f"cold start (python {result['python']}, median of {result['rounds']} fresh interpreters)",
        f"  interpreter alone          {result['baseline_ms']:7.1f} ms",
        f"  floor: boto3 + 3 clients   {result['floor_ms']:7.1f} ms",
    ]
    for name, row in result["handlers"].items():  # type: ignore[union-attr]
        verdict = "ok" if row["within_budget"] else "OVER BUDGET"
        lines.append(
            f"  {name:<26} {row['median_ms']:7.1f} ms   {row['ratio_to_floor']:.2f}x floor "
            f"({row['ratio_above_interpreter']:.2f}x above the interpreter)   {verdict}"
        )
    lines.append(f"  budget: <= {result['budget']}x floor (DESIGN §7)")
    return "\n".join(lines)
