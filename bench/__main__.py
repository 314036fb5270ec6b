"""`make bench`: run the benchmarks, write bench/results/*.json and docs/benchmarks.md.

    python -m bench                     every benchmark, full size; rewrites the docs
    python -m bench --only locomo       one benchmark (the docs keep the others' results)
    python -m bench --quick             a small subset of each (CI): results go to
                                        bench/results/quick/, the docs are not touched
    python -m bench --render            rewrite the docs from the saved results only

Each benchmark module has ``TITLE``, ``run(quick) -> dict``, ``report(result) -> str``
(the console text) and ``markdown(result, img_dir) -> str`` (its section of the docs,
plots written into img_dir).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from typing import TYPE_CHECKING

from bench.common import ROOT, DataMissingError, bench_environment, machine

if TYPE_CHECKING:
    from types import ModuleType

RESULTS = ROOT / "bench" / "results"
#: in the order they run and appear in docs/benchmarks.md
NAMES = (
    "cold_start",
    "hot_path",
    "tool_calls",
    "openai_routes",
    "memory_search",
    "flush_tokens",
    "compaction_tokens",
    "fan_out",
    "locomo_retrieval",
    "paraphrase_recall",
    "embedding_cost",
    "locomo_context",
    "stays_true",
    "poisoning",
    "real_model",
    "framing",
    "bounds",
)


def benchmarks() -> list[ModuleType]:
    """The modules, imported after ``bench_environment``: the library's Powertools objects
    read their environment when they are created, at import."""
    bench_environment()
    return [importlib.import_module(f"bench.{name}") for name in NAMES]


def name_of(module: ModuleType) -> str:
    return module.__name__.rsplit(".", 1)[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small subset of each (CI)")
    parser.add_argument("--only", action="append", choices=NAMES, help="run only these")
    parser.add_argument(
        "--render", action="store_true", help="only rewrite docs/benchmarks.md from the results"
    )
    args = parser.parse_args(argv)
    modules = benchmarks()
    if args.render:
        from bench.docs import write_docs

        print(f"wrote {write_docs(modules, RESULTS).relative_to(ROOT)} and its plots")
        return 0
    chosen = [m for m in modules if not args.only or name_of(m) in args.only]
    out = RESULTS / "quick" if args.quick else RESULTS
    out.mkdir(parents=True, exist_ok=True)
    started_all = time.perf_counter()
    written: list[str] = []
    for module in chosen:
        name = name_of(module)
        started = time.perf_counter()
        try:
            result = module.run(quick=args.quick)
        except DataMissingError as error:
            print(f"\n{name}: skipped: {error}")
            continue
        result["_meta"] = {
            **machine(),
            "quick": args.quick,
            "seconds": round(time.perf_counter() - started, 1),
        }
        (out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
        print(("\n" if written else "") + module.report(result))
        print(f"  ({result['_meta']['seconds']} s)")
        written.append(name)
    total = time.perf_counter() - started_all
    print(f"\nwrote {out}/{{{', '.join(written)}}}.json in {total:.0f} s")
    if not args.quick:
        from bench.docs import write_docs

        docs = write_docs(modules, RESULTS)
        print(f"wrote {docs.relative_to(ROOT)} and its plots")
    return 0


if __name__ == "__main__":
    sys.exit(main())
