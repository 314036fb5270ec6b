"""`make bench`: run the benchmarks and write bench/results/*.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench import cold_start, fan_out, flush_tokens, hot_path, memory_search

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> int:
    RESULTS.mkdir(exist_ok=True)
    result = cold_start.run()
    (RESULTS / "cold_start.json").write_text(json.dumps(result, indent=2) + "\n")
    print(cold_start.report(result))
    requests = hot_path.run()
    (RESULTS / "hot_path.json").write_text(json.dumps(requests, indent=2) + "\n")
    print()
    print(hot_path.report(requests))
    search = memory_search.run()
    (RESULTS / "memory_search.json").write_text(json.dumps(search, indent=2) + "\n")
    print()
    print(memory_search.report(search))
    tokens = flush_tokens.run()
    (RESULTS / "flush_tokens.json").write_text(json.dumps(tokens, indent=2) + "\n")
    print()
    print(flush_tokens.report(tokens))
    ticks = fan_out.run()
    (RESULTS / "fan_out.json").write_text(json.dumps(ticks, indent=2) + "\n")
    print()
    print(fan_out.report(ticks))
    names = "cold_start, hot_path, memory_search, flush_tokens, fan_out"
    print(f"\nwrote {RESULTS}/{{{names}}}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
