"""The vectors of a memory: written after its files, read by ranked search.

    refresh_vectors(rt, owner)   the post-turn job (after a flush or a save), consolidation,
                                 forgetting and the backfill command: the memory's vector
                                 object made to hold exactly its searchable lines (current
                                 ledger facts, MEMORY.md lines), embedding only the lines it
                                 lacks (at most ``REFRESH_MAX_TEXTS`` a run; the rest next
                                 run), dropping the vectors of lines retired, retracted or
                                 forgotten: a vector is personal data
    backfill(rt, owner)          the CLI's ``vectors``: runs until nothing is missing
    refresh_thread_vectors(rt, user, months)
                                 the post-turn job, after indexing a turn's messages: each
                                 month segment's vector object made to hold its messages
    memory_vectors(rt, owner)    ranked search: the object, decoded once per ETag and reused
                                 for ``HARNESS_RECALL_LISTING_SECONDS`` in a container
    messages_by_meaning(...)     thread search: each message's cosine with the query
    query_vectors(rt, user)      a request's query vectors (``embeddings.queries``), their
                                 spend counted in ``user``'s day (a turn passes its meter)

Only the query is embedded on the request path (``memory.search``). With
HARNESS_EMBEDDING_MODEL ``off`` both do nothing and ranking stays lexical. The object is
written through the memory's owner (``memory.owner``), conditionally: two refreshes that
race leave one winner, and the loser's lines are embedded again next time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.errors import HarnessError, PreconditionFailedError
from agent_harness.memory.engine.corpus import load_memory_files, load_segments
from agent_harness.memory.engine.truth import truth_of
from agent_harness.memory.engine.vectors import (
    VectorSet,
    decode,
    encode,
    fact_body,
    line_key,
    line_keys,
    message_body,
    row_scores,
    thread_vector_path,
    vector_path,
)
from agent_harness.memory.facts.ledger import day_of
from agent_harness.memory.owner.writes import Writes
from agent_harness.paths import MEMORY_FILE

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from agent_harness.embeddings.embedder import Embedder
    from agent_harness.embeddings.queries import QueryVectors
    from agent_harness.ids import User
    from agent_harness.memory.engine.file_index import FileIndex
    from agent_harness.memory.engine.segments import Segment
    from agent_harness.models.base import Usage
    from agent_harness.ports import ObjectInfo, StoredObject
    from agent_harness.runtime import Runtime

__all__ = [
    "CATCH_UP_LINES",
    "REFRESH_MAX_TEXTS",
    "Refreshed",
    "backfill",
    "lines_by_meaning",
    "memory_vectors",
    "messages_by_meaning",
    "query_vectors",
    "refresh_best_effort",
    "refresh_thread_vectors",
    "refresh_vectors",
    "wanted_lines",
]

logger = Logger(child=True)
metrics = Metrics()

#: vector objects a container keeps decoded (least recently read first out)
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

    def __add__(self, other: Refreshed) -> Refreshed:
        return Refreshed(
            self.embedded + other.embedded,
            self.dropped + other.dropped,
            self.missing + other.missing,
            self.lines + other.lines,
        )


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
    return _reconcile(rt, owner, embedder, vector_path(embedder.name), wanted, limit)


def message_texts(segment: Segment) -> dict[str, str]:
    """key -> text of every message row of a month segment (one vector per distinct text)."""
    return {line_key(text): text for text in segment.index.lines if message_body(text)}


def refresh_thread_vectors(
    rt: Runtime, user: User, months: Iterable[str] | None = None, *, limit: int = REFRESH_MAX_TEXTS
) -> Refreshed:
    """The thread index's vectors, one object per month segment (``months``: those
    paths only; None: every month), each made to hold exactly its segment's messages."""
    embedder = rt.embeddings()
    if embedder is None:
        return Refreshed()
    wanted = None if months is None else set(months)
    done = Refreshed()
    for path, segment in load_segments(rt, user, rt.search_cache):
        if wanted is not None and path not in wanted:
            continue
        month = thread_vector_path(embedder.name, path)
        got = _reconcile(rt, user, embedder, month, message_texts(segment), limit - done.embedded)
        done += got
    return done


def _reconcile(
    rt: Runtime, owner: User, embedder: Embedder, path: str, wanted: dict[str, str], limit: int
) -> Refreshed:
    """Make the vector object at ``path`` hold a row for each key of ``wanted`` (at most
    ``limit`` embedded now) and no other; one conditional write, the spend counted once."""
    stored = rt.store.get(owner, path)
    have = (decode(stored.content, embedder.name) if stored else None) or VectorSet.empty(
        embedder.name
    )
    spent: list[Usage] = []
    try:
        return _merge(rt, owner, embedder, path, wanted, limit, stored, have, spent.append)
    finally:
        if spent:
            from agent_harness.models.base import Usage as Total
            from agent_harness.usage import record_spend

            total = Total(input_tokens=sum(u.input_tokens for u in spent), output_tokens=0)
            record_spend(rt, owner, "embedding", total)


def _merge(
    rt: Runtime,
    owner: User,
    embedder: Embedder,
    path: str,
    wanted: dict[str, str],
    limit: int,
    stored: StoredObject | None,
    have: VectorSet,
    spend: Callable[[Usage], None],
) -> Refreshed:
    limit = max(limit, 0)
    missing = [k for k in wanted if k not in have.rows]
    new = embedder.lines([wanted[k] for k in missing[:limit]], spend) if missing[:limit] else None
    if new is not None and have.keys and new.shape[1] != have.matrix.shape[1]:
        # the model's vectors changed size (HARNESS_EMBEDDING_DIMENSIONS): all again
        have = VectorSet.empty(embedder.name)
        missing = list(wanted)
        new = embedder.lines([wanted[k] for k in missing[:limit]], spend) if limit else None
    todo = missing[:limit] if new is not None else []
    kept = [k for k in have.keys if k in wanted]
    dropped = len(have.keys) - len(kept)
    if not todo and not dropped:
        return Refreshed(missing=len(missing), lines=len(wanted))
    import numpy as np

    rows = [have.matrix[have.rows[k]] for k in kept]
    if new is not None:
        rows += list(new)
    matrix = np.stack(rows) if rows else np.zeros((0, 0), dtype=np.float32)
    merged = VectorSet(embedder.name, kept + todo, matrix, embedder.views)
    try:
        Writes(rt, owner).write_index(path, encode(merged), etag=stored.etag if stored else None)
    except PreconditionFailedError:
        logger.info("vectors written by another run first", extra={"path": path})
        return Refreshed(lines=len(wanted), missing=len(missing))
    rt.vector_cache.pop((owner.key, path), None)
    metrics.add_metric("VectorsEmbedded", MetricUnit.Count, len(todo))
    if dropped:
        metrics.add_metric("VectorsDropped", MetricUnit.Count, dropped)
    return Refreshed(len(todo), dropped, len(missing) - len(todo), len(wanted))


def query_vectors(
    rt: Runtime, user: User, spend: Callable[[Usage], None] | None = None
) -> QueryVectors | None:
    """The query vectors of one request of ``user`` (None: no embedding model). Their
    spend goes to ``spend`` (a turn's meter), else to ``user``'s day as each call returns
    (a search outside a turn: the caller's, never a scope's)."""
    embedder = rt.embeddings()
    if embedder is None:
        return None
    from agent_harness.embeddings.queries import QueryVectors

    if spend is None:

        def spend(usage: Usage) -> None:
            from agent_harness.usage import record_spend

            record_spend(rt, user, "embedding", usage)

    return QueryVectors(embedder, spend, rt.deadline.remaining)


def memory_vectors(
    rt: Runtime, owner: User, model: str, listed: list[ObjectInfo] | None = None
) -> VectorSet | None:
    """The memory's vectors of ``model`` (None: none written yet). ``listed``: the
    vector objects a LIST of this request found (their ETags: no GET while the decoded
    copy is the listed version)."""
    return _stored_vectors(rt, owner, vector_path(model), model, listed)


def messages_by_meaning(
    rt: Runtime, user: User, segments: list[tuple[str, Segment]], embedder: Embedder, query: Any
) -> dict[str, float]:
    """Each indexed message's cosine with the ``query`` vector, by text key: the month
    vectors the post-turn job wrote (a message whose job has not run yet is found by
    its words until it does)."""
    cosines: dict[str, float] = {}
    for path, _segment in segments:
        stored = _stored_vectors(rt, user, thread_vector_path(embedder.name, path), embedder.name)
        if stored is not None:
            cosines.update(stored.scores(query))
    return cosines


def _stored_vectors(
    rt: Runtime, owner: User, path: str, model: str, listed: list[ObjectInfo] | None = None
) -> VectorSet | None:
    """The vectors at ``path`` (None: none written yet), decoded once per ETag; read
    again only when ``listed`` shows another version (or, not listed, at most every
    ``HARNESS_RECALL_LISTING_SECONDS`` in a container)."""
    key = (owner.key, path)
    now = time.monotonic()
    recent: tuple[float, str, Any] | None = rt.vector_cache.get(key)
    found: VectorSet | None
    if listed is not None:
        info = next((i for i in listed if i.path == path), None)
        if info is None:  # listed, and not there: none written yet
            return _kept(rt, key, (now, "", None))
        if recent is not None and recent[1] == info.etag:  # the listed version: no GET
            return _kept(rt, key, (now, info.etag, recent[2]))
    elif recent is not None and now - recent[0] < rt.settings.recall_listing_seconds:
        found = recent[2]
        return found
    stored = rt.store.get(owner, path)
    if stored is None:
        found, etag = None, ""  # none yet: not asked again within the window either
    elif recent is not None and recent[1] == stored.etag:
        found, etag = recent[2], stored.etag
    else:
        found, etag = decode(stored.content, model), stored.etag
    return _kept(rt, key, (now, etag, found))


def _kept(
    rt: Runtime, key: tuple[str, str], entry: tuple[float, str, VectorSet | None]
) -> VectorSet | None:
    """``entry`` kept as the newest of the container's decoded vectors; the oldest go
    past ``CACHED_MEMORIES``."""
    rt.vector_cache.pop(key, None)
    rt.vector_cache[key] = entry
    while len(rt.vector_cache) > CACHED_MEMORIES:
        rt.vector_cache.pop(next(iter(rt.vector_cache)))
    return entry[2]


def lines_by_meaning(
    rt: Runtime,
    owner: User,
    files: list[tuple[str, FileIndex]],
    embedder: Embedder,
    query: Any,
    listed: list[ObjectInfo] | None = None,
) -> dict[str, float]:
    """Each searchable line's cosine with the ``query`` vector, by line key: the stored
    vectors, and the newest ``CATCH_UP_LINES`` lines they lack, embedded now (the
    request path's only passage embedding: a fact saved a second ago is found by
    meaning at once). A catch-up that fails leaves those lines to their words."""
    import numpy as np

    stored = memory_vectors(rt, owner, embedder.name, listed)
    cosines = stored.scores(query) if stored is not None else {}
    have = stored.rows if stored is not None else {}
    lacking: dict[str, str] = {}
    for _path, index in reversed(files):  # the newest ledgers first, MEMORY.md last
        keys = line_keys(index)
        for number in range(len(keys) - 1, -1, -1):
            key = keys[number]
            if key is not None and key not in have and key not in cosines:
                lacking.setdefault(key, fact_body(index.lines[number]) or "")
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


def backfill(
    rt: Runtime, owner: User, progress: Callable[[str, Refreshed], None] | None = None
) -> dict[str, Refreshed]:
    """Every vector a memory and its thread index lack, embedded run after run (each at
    most ``REFRESH_MAX_TEXTS``) until none is missing: after a model change, or to index
    a memory written before embeddings were on. ``progress`` is told after each run
    (``memory`` or ``threads``, what it did). Raises what the provider raises: a
    backfill stopped half-way keeps what it wrote and resumes where it stopped."""
    done: dict[str, Refreshed] = {}
    for part, run in (("memory", refresh_vectors), ("threads", refresh_thread_vectors)):
        total = Refreshed()
        while True:
            got = run(rt, owner)
            # what is left and the lines are the last run's, not a sum
            total = replace(total + got, missing=got.missing, lines=got.lines)
            if progress is not None:
                progress(part, total)
            if not got.missing or not got.embedded:
                break
        done[part] = total
    return done


def refresh_best_effort(
    rt: Runtime,
    owner: User,
    *,
    memory: bool = True,
    months: Iterable[str] = (),
    limit: int = REFRESH_MAX_TEXTS,
) -> None:
    """``refresh_vectors`` (``memory``) and ``refresh_thread_vectors`` (the month
    segments ``months``) for a job whose own work is done: a failure is logged and
    counted (``VectorRefreshFailures``), and the next refresh catches up; memory
    searches meanwhile embed the few newest lines they lack (``lines_by_meaning``).
    ``limit`` 0: a correction's, on its request path: the vectors of what it retired
    are dropped at once and nothing is embedded (its new line is caught up by search)."""
    months = set(months)
    if rt.embeddings() is None or not (memory or months):
        return
    try:
        if memory:
            refresh_vectors(rt, owner, limit=limit)
        if months:
            refresh_thread_vectors(rt, owner, months)
    except HarnessError as exc:
        metrics.add_metric("VectorRefreshFailures", MetricUnit.Count, 1)
        logger.warning("vectors not refreshed", extra={"error": str(exc)})
