"""`make bench`: run the benchmarks and write bench/results/*.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench import cold_start, fan_out, flush_tokens, hot_path, memory_search

RESULTS = Path(__file__).resolve().parent / "results"


#: each benchmark module has ``run() -> dict`` and ``report(dict) -> str``
BENCHMARKS = (cold_start, hot_path, memory_search, flush_tokens, fan_out)


def main() -> int:
    RESULTS.mkdir(exist_ok=True)
    written = []
    for module in BENCHMARKS:
        name = module.__name__.rsplit(".", 1)[-1]
        result = module.run()
        (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
        print(("\n" if written else "") + module.report(result))
        written.append(name)
    print(f"\nwrote {RESULTS}/{{{', '.join(written)}}}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
