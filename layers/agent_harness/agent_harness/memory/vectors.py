"""The vectors of a memory: written after its files, read by ranked search.

    refresh_vectors(rt, owner)   the post-turn job (after a flush or a save), consolidation,
                                 forgetting and the backfill command: the memory's vector
                                 object made to hold exactly its searchable lines (current
                                 ledger facts, MEMORY.md lines), embedding only the lines it
                                 lacks (at most ``REFRESH_MAX_TEXTS`` a run; the rest next
                                 run), dropping the vectors of lines retired, retracted or
                                 forgotten: a vector is personal data
    memory_vectors(rt, owner)    ranked search: the object, decoded once per ETag and reused
                                 for ``HARNESS_RECALL_LISTING_SECONDS`` in a container

Only the query is embedded on the request path (``memory.search``). With
HARNESS_EMBEDDING_MODEL ``off`` both do nothing and ranking stays lexical. The object is
written through the memory's owner (``memory.owner``), conditionally: two refreshes that
race leave one winner, and the loser's lines are embedded again next time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.errors import HarnessError, PreconditionFailedError
from agent_harness.memory.engine.corpus import load_memory_files
from agent_harness.memory.engine.truth import truth_of
from agent_harness.memory.engine.vectors import (
    VectorSet,
    decode,
    encode,
    fact_body,
    line_key,
    row_scores,
    vector_path,
)
from agent_harness.memory.facts.ledger import day_of
from agent_harness.memory.owner import Memory
from agent_harness.paths import MEMORY_FILE

if TYPE_CHECKING:
    from agent_harness.embeddings.embedder import Embedder
    from agent_harness.ids import User
    from agent_harness.memory.engine.file_index import FileIndex
    from agent_harness.models.base import Usage
    from agent_harness.runtime import Runtime

__all__ = [
    "CATCH_UP_LINES",
    "REFRESH_MAX_TEXTS",
    "Refreshed",
    "lines_by_meaning",
    "memory_vectors",
    "refresh_best_effort",
    "refresh_vectors",
    "wanted_lines",
]

logger = Logger(child=True)
metrics = Metrics()

#: memories whose vectors a container keeps decoded (oldest read first out)
CACHED_MEMORIES = 64
#: a search embeds at most this many lines the stored vectors lack (written since the
#: last refresh: a save through the API, a flush whose job is still running); they are
#: kept in the container until the refresh stores them
CATCH_UP_LINES = 32
#: catch-up vectors a container keeps (by line key)
CAUGHT_UP_MAX = 4096
#: lines embedded by one refresh at most (a backfill runs until none is missing)
REFRESH_MAX_TEXTS = 2000


@dataclass(frozen=True)
class Refreshed:
    embedded: int = 0
    dropped: int = 0
    missing: int = 0  # still without a vector (over the run's cap)
    lines: int = 0  # the memory's searchable lines


def wanted_lines(rt: Runtime, owner: User) -> dict[str, str]:
    """key -> text of every line ranked search may return: MEMORY.md's fact lines and
    the ledgers' current facts (retired ones are found by their words alone)."""
    files = load_memory_files(rt, owner, rt.search_cache)
    truth = truth_of(files, day_of(rt.clock.now(), rt.settings.zone))
    out: dict[str, str] = {}
    for path, index in files:
        for line in index.lines:
            body = fact_body(line)
            if body is None:
                continue
            if path == MEMORY_FILE:
                if truth.restated(line) is not None:
                    continue
            else:
                fact = truth.fact(path, line)
                if fact is not None and (fact.is_record or truth.status(fact).state != "current"):
                    continue
            out.setdefault(line_key(body), body)
    return out


def refresh_vectors(rt: Runtime, owner: User, *, limit: int = REFRESH_MAX_TEXTS) -> Refreshed:
    embedder = rt.embeddings()
    if embedder is None:
        return Refreshed()
    wanted = wanted_lines(rt, owner)
    path = vector_path(embedder.name)
    stored = rt.store.get(owner, path)
    have = (decode(stored.content, embedder.name) if stored else None) or VectorSet.empty(
        embedder.name
    )

    def spend(usage: Usage) -> None:
        from agent_harness.usage import record_spend

        record_spend(rt, owner, "embedding", usage)

    missing = [k for k in wanted if k not in have.rows]
    new = embedder.lines([wanted[k] for k in missing[:limit]], spend) if missing else None
    if new is not None and have.keys and new.shape[1] != have.matrix.shape[1]:
        # the model's vectors changed size (HARNESS_EMBEDDING_DIMENSIONS): all again
        have = VectorSet.empty(embedder.name)
        missing = list(wanted)
        new = embedder.lines([wanted[k] for k in missing[:limit]], spend)
    todo = missing[:limit]
    kept = [k for k in have.keys if k in wanted]
    dropped = len(have.keys) - len(kept)
    if not todo and not dropped:
        return Refreshed(lines=len(wanted))
    import numpy as np

    rows = [have.matrix[have.rows[k]] for k in kept]
    if new is not None:
        rows += list(new)
    matrix = np.stack(rows) if rows else np.zeros((0, 0), dtype=np.float32)
    merged = VectorSet(embedder.name, kept + todo, matrix, embedder.views)
    try:
        Memory(rt, owner).write_index(path, encode(merged), etag=stored.etag if stored else None)
    except PreconditionFailedError:
        logger.info("vectors written by another run first", extra={"path": path})
        return Refreshed(lines=len(wanted), missing=len(missing))
    rt.vector_cache.pop((owner.key, path), None)
    metrics.add_metric("VectorsEmbedded", MetricUnit.Count, len(todo))
    if dropped:
        metrics.add_metric("VectorsDropped", MetricUnit.Count, dropped)
    return Refreshed(len(todo), dropped, len(missing) - len(todo), len(wanted))


def memory_vectors(rt: Runtime, owner: User, model: str) -> VectorSet | None:
    """The memory's vectors of ``model`` (None: none written yet)."""
    path = vector_path(model)
    key = (owner.key, path)
    now = time.monotonic()
    recent: tuple[float, str, Any] | None = rt.vector_cache.get(key)
    if recent is not None and now - recent[0] < rt.settings.recall_listing_seconds:
        return recent[2]  # type: ignore[no-any-return]
    stored = rt.store.get(owner, path)
    if stored is None:
        rt.vector_cache.pop(key, None)
        return None
    if recent is not None and recent[1] == stored.etag:
        found = recent[2]
    else:
        found = decode(stored.content, model)
    rt.vector_cache[key] = (now, stored.etag, found)
    while len(rt.vector_cache) > CACHED_MEMORIES:
        rt.vector_cache.pop(next(iter(rt.vector_cache)))
    return found  # type: ignore[no-any-return]


def lines_by_meaning(
    rt: Runtime, owner: User, files: list[tuple[str, FileIndex]], embedder: Embedder, query: Any
) -> dict[str, float]:
    """Each searchable line's cosine with the ``query`` vector, by line key: the stored
    vectors, and the newest ``CATCH_UP_LINES`` lines they lack, embedded now (the
    request path's only passage embedding: a fact saved a second ago is found by
    meaning at once). A catch-up that fails leaves those lines to their words."""
    import numpy as np

    stored = memory_vectors(rt, owner, embedder.name)
    cosines = stored.scores(query) if stored is not None else {}
    have = stored.rows if stored is not None else {}
    lacking: dict[str, str] = {}
    for _path, index in reversed(files):  # the newest ledgers first, MEMORY.md last
        for line in reversed(index.lines):
            body = fact_body(line)
            if body is None:
                continue
            key = line_key(body)
            if key not in have and key not in cosines:
                lacking.setdefault(key, body)
        if len(lacking) >= CATCH_UP_LINES:
            break
    todo = list(lacking.items())[:CATCH_UP_LINES]
    known = rt.caught_up
    fresh = [(k, b) for k, b in todo if k not in known]
    if fresh:
        try:
            matrix = embedder.lines([b for _, b in fresh])
        except HarnessError as exc:
            logger.warning("catch-up embedding failed", extra={"error": str(exc)})
            matrix = None
        if matrix is not None:
            for (key, _), row in zip(fresh, matrix, strict=True):
                known[key] = row
            while len(known) > CAUGHT_UP_MAX:
                known.pop(next(iter(known)))
            metrics.add_metric("VectorsCaughtUp", MetricUnit.Count, len(fresh))
    rows = [(key, known[key]) for key, _ in todo if key in known]
    if rows:
        found = row_scores(np.stack([r for _, r in rows]), query, embedder.views)
        if found is not None:
            cosines.update(zip([k for k, _ in rows], found.tolist(), strict=True))
    return cosines


def refresh_best_effort(rt: Runtime, owner: User) -> None:
    """``refresh_vectors`` for a job whose own work is done: a failure is logged and
    counted (``VectorRefreshFailures``), and the next refresh catches up; searches
    meanwhile embed the few newest lines they lack (``lines_by_meaning``)."""
    if rt.embeddings() is None:
        return
    try:
        refresh_vectors(rt, owner)
    except HarnessError as exc:
        metrics.add_metric("VectorRefreshFailures", MetricUnit.Count, 1)
        logger.warning("vectors not refreshed", extra={"error": str(exc)})
