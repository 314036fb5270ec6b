"""`make bench`: run the benchmarks and write bench/results/*.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench import cold_start, memory_search

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> int:
    RESULTS.mkdir(exist_ok=True)
    result = cold_start.run()
    (RESULTS / "cold_start.json").write_text(json.dumps(result, indent=2) + "\n")
    print(cold_start.report(result))
    search = memory_search.run()
    (RESULTS / "memory_search.json").write_text(json.dumps(search, indent=2) + "\n")
    print()
    print(memory_search.report(search))
    print(f"\nwrote {RESULTS / 'cold_start.json'} and {RESULTS / 'memory_search.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
