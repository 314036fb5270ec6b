"""`make bench`: run the benchmarks and write bench/results/*.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench import cold_start

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> int:
    RESULTS.mkdir(exist_ok=True)
    result = cold_start.run()
    (RESULTS / "cold_start.json").write_text(json.dumps(result, indent=2) + "\n")
    print(cold_start.report(result))
    print(f"\nwrote {RESULTS / 'cold_start.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
