"""Search: memory_search over the daily ledgers and thread_search over a year of history.

docs/design.md#budgets sets three budgets, each measured here through the public functions
(``search_memory``, ``search_threads``, ``index_turns``) so the ranking code can change
underneath:

* memory_search over 90 daily ledgers (20,000 lines): one LIST, GETs issued
  concurrently (a cold container: one per month, of the ranked-index snapshots),
  unchanged files served from a warm cache keyed by ETag; under 100 ms CPU, the first
  ranked query of a cold container included. A ``ranked`` query also reads the thread
  segments of the turns the ledger sections name (one more LIST, and the months not
  cached): the ledgers here are flushes of a thread history of the same 90 days, so the
  join is measured at that size.
* thread_search over a user's whole history: at most one GET per month of history
  (derived month segments under ``index/threads/``, or cold their snapshots), never one
  per turn. A ``ranked`` query also reads the ledgers (to score each turn with the facts
  naming it): its CPU is measured with the 90 days of ledgers above stored next to the
  year of history.

The workspace is left as the product leaves it (bench/search_corpus.py): ledgers and
MEMORY.md written, the thread history indexed a month per ``index_turns`` call, then
every ranked-index snapshot (``index/ranked/``) written by ``refresh_snapshots``, as
consolidation does; the thread request count refreshes after each month, as the
post-turn job does for the months it wrote.

CPU is measured on the in-memory store of the tests (no I/O, so only the search's own
work counts), per match mode: *cold* is a fresh ``MemoryIndexCache`` with the snapshots
present (a new container: a snapshot per month read and decoded instead of every file
indexed), *cold, no snapshots* the same with them deleted (every file read and parsed,
and for ``ranked`` its BM25 postings built: a user whose snapshots are not written yet);
each the median of ``COLD_RUNS``; *warm* the same cache again (median of ``rounds``
queries). Also measured: automatic recall's part of a turn (``load_ledgers`` and
``select_lines``, as agent.recall calls them), the snapshots' size, and the CPU the
post-turn job pays to refresh one month's snapshots after a turn.

S3 requests are counted on the real ``S3WorkspaceStore`` against moto in-process
(``mock_aws``), resources created from template.yaml: a botocore
``before-parameter-build`` hook on the S3 client records every API call (one per
request; a paginated LIST counts per page), and ``before-call``/``after-call`` hooks
record how many were in flight at once (each request held ``LATENCY_S``, a stand-in for
the network, so that requests issued together are seen together). Scenarios: a cold
container with and without snapshots, a warm one with nothing changed, and a warm one
after one file changed; the exact counts expected of each are in bench/search_requests.py,
and the report and docs section are written by bench/search_docs.py.
"""

from __future__ import annotations

import gc
import statistics
import time
from functools import partial
from typing import TYPE_CHECKING, Any

from agent_harness import text
from agent_harness.ids import User
from agent_harness.memory.engine.cache import MemoryIndexCache
from agent_harness.memory.engine.corpus import (
    fact_texts,
    index_read,
    load_ledgers,
    load_segments,
    refresh_snapshots,
)
from agent_harness.memory.recall import PastMessages, recall_query, select_lines
from agent_harness.memory.search import search_memory
from agent_harness.memory.threads import index_turns, search_threads
from agent_harness.paths import MEMORY_FILE, SNAPSHOT_DIR, snapshot_path
from bench.common import NEVER_ALIGN, switched
from bench.search_corpus import (
    LATENCY_S,
    TURNS_PER_DAY,
    by_month,
    drop_snapshots,
    job_paths,
    ledger_files,
    next_turn,
    s3_runtime,
    store_memory,
    stored_bytes,
    turn_records,
    without_snapshots,
)
from bench.search_docs import markdown, report
from bench.search_requests import (
    COLD,
    COLD_BARE,
    INDEX_TURN,
    LEDGER_CHANGED,
    MEMORY_SCENARIOS,
    NEW_TURN,
    THREAD_SCENARIOS,
    WARM,
    classify_memory,
    classify_threads,
)
from tests.fakes import make_runtime

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_harness.records import TurnRecord
    from agent_harness.runtime import Runtime

TITLE = "Search: memory_search and thread_search"
__all__ = ["TITLE", "markdown", "report", "run"]

BUDGET_MS = 100
#: the size of each run: (ledger days, ledger lines, days of thread history, rounds)
SIZES = {"full": (90, 20_000, 365, 15), "quick": (90, 2_000, 90, 5)}
COLD_RUNS = 5

#: label -> (mode, query); the mode is the label's first word
QUERIES = {
    "phrase (no hit)": "zebra unicorn",
    "phrase": "window seats",
    "all": "project deadline friday",
    "any": "dentist allergic",
    "ranked": "when is the atlas project deadline",
}
#: the query whose S3 requests are counted: memory_search counts it in both patterns
#: (phrase/all/any read the memory files; ranked also the thread segments)
COUNTED_QUERY = ("phrase", "window seats")
COUNTED_MODES = ("phrase", "ranked")


# S3 requests on moto -------------------------------------------------------------------------
def memory_requests(
    files: dict[str, str], history: list[TurnRecord]
) -> dict[str, dict[str, dict[str, int]]]:
    """S3 requests of one memory_search per counted mode: cold before any snapshot was
    written, cold with them, warm, warm after one ledger changed."""
    user = User.from_id("bench")
    _, query = COUNTED_QUERY
    last = max(p for p in files if p.startswith("memory/"))
    out: dict[str, dict[str, dict[str, int]]] = {}
    for mode in COUNTED_MODES:
        rows: dict[str, dict[str, int]] = {}
        with s3_runtime() as (rt, log):
            search = partial(search_memory, rt, user, query, mode, 20)  # type: ignore[arg-type]
            store_memory(rt, user, files, history, snapshots=False)
            log.take(classify_memory)
            search(MemoryIndexCache())
            rows[COLD_BARE] = log.take(classify_memory)
            refresh_snapshots(rt, user)
            cache = MemoryIndexCache()
            log.take(classify_memory)
            for scenario in (COLD, WARM, LEDGER_CHANGED):
                if scenario == LEDGER_CHANGED:
                    rt.store.append(user, last, lambda _: "\n- The user now prefers aisle seats.")
                    log.take(classify_memory)
                search(cache)
                rows[scenario] = log.take(classify_memory)
        out[mode] = {scenario: rows[scenario] for scenario in MEMORY_SCENARIOS}
    return out


def thread_requests(records: list[TurnRecord]) -> tuple[dict[str, dict[str, int]], list[dict]]:
    """S3 requests of one thread_search after each month indexed and its snapshots
    refreshed (cold), then cold, warm and warm after one more turn over the whole
    history; what the post-turn job's indexing and refresh of that turn cost; and cold
    with the snapshots deleted."""
    user = User.from_id("bench")
    mode, query = COUNTED_QUERY
    growth: list[dict[str, int]] = []
    rows: dict[str, dict[str, int]] = {}
    with s3_runtime() as (rt, log):
        search = partial(search_threads, rt, user, query, mode, 20)  # type: ignore[arg-type]
        indexed = 0
        for number, month in enumerate(by_month(records), start=1):
            index_turns(rt, user, month)
            refresh_snapshots(rt, user, job_paths(rt, month))
            indexed += len(month)
            log.take(classify_threads)
            search(MemoryIndexCache())
            growth.append({"months": number, "turns": indexed, **log.take(classify_threads)})
        cache = MemoryIndexCache()
        for scenario in (COLD, WARM):
            search(cache)
            rows[scenario] = log.take(classify_threads)
        extra = next_turn(records[-1])
        index_turns(rt, user, [extra])
        refresh_snapshots(rt, user, job_paths(rt, [extra]))
        rows[INDEX_TURN] = log.take(classify_threads)
        search(cache)
        rows[NEW_TURN] = log.take(classify_threads)
        drop_snapshots(rt, user)
        log.take(classify_threads)
        search(MemoryIndexCache())
        rows[COLD_BARE] = log.take(classify_threads)
    return {scenario: rows[scenario] for scenario in THREAD_SCENARIOS}, growth


# CPU on the in-memory store -------------------------------------------------------------
def _cpu_ms(call: Callable[[], object]) -> tuple[float, object]:
    started = time.process_time()
    result = call()
    return (time.process_time() - started) * 1000, result


def _with_young_collections(
    call: Callable[[MemoryIndexCache], object], cache: MemoryIndexCache
) -> object:
    """``call``, then the young collections it left to run (a query pauses the collector:
    what it defers is counted with it)."""
    result = call(cache)
    gc.collect(1)
    return result


def cold_ms(call: Callable[[MemoryIndexCache], object]) -> tuple[float, list[float], object]:
    """Median CPU ms of ``call`` in a new container (a fresh cache, and the word cache of
    ``text.terms``, which lives as long as the process, emptied), with the young garbage
    collections it leaves, the fastest and slowest run, and what it returned."""
    times: list[float] = []
    result: object = None
    for _ in range(COLD_RUNS):
        cache = MemoryIndexCache()
        text._word_terms.cache_clear()
        gc.collect()  # each run from the same collector state
        ms, result = _cpu_ms(partial(_with_young_collections, call, cache))
        times.append(ms)
    spread = [round(min(times), 2), round(max(times), 2)]
    return round(statistics.median(times), 2), spread, result


def warm_ms(call: Callable[[MemoryIndexCache], object], rounds: int) -> float:
    """Median CPU ms of ``call`` on a cache it has filled once."""
    cache = MemoryIndexCache()
    call(cache)
    return round(statistics.median(_cpu_ms(partial(call, cache))[0] for _ in range(rounds)), 2)


def cpu_per_mode(
    rt: Runtime, user: User, search: Callable[..., object], rounds: int
) -> dict[str, dict[str, Any]]:
    """Per query in ``QUERIES``: cold with the snapshots, warm, cold without them, and
    whether both colds found the same hits."""
    out: dict[str, dict[str, Any]] = {}
    found: dict[str, object] = {}
    for label, query in QUERIES.items():
        call = partial(search, query, label.split()[0])
        cold, spread, found[label] = cold_ms(call)
        out[label] = {"query": query, "cold": cold, "cold_range": spread}
        out[label]["warm"] = warm_ms(call, rounds)
    with without_snapshots(rt, user):
        for label, row in out.items():
            bare, _, hits = cold_ms(partial(search, row["query"], label.split()[0]))
            row.update(cold_no_snapshots=bare, same_hits=hits == found[label])
    return out


def recall_cpu(rt: Runtime, user: User, rounds: int) -> dict[str, Any]:
    """Automatic recall's part of a turn for the ranked query, as agent.recall runs it:
    MEMORY.md (already read by the turn) indexed, ``load_ledgers``, ``select_lines``;
    and under ``messages`` the same with past messages recalled too (``load_segments``
    and the ledger facts naming their turns)."""
    out = _recall_cpu(rt, user, rounds, messages=False)
    return {**out, "messages": _recall_cpu(rt, user, rounds, messages=True)}


def _recall_cpu(rt: Runtime, user: User, rounds: int, *, messages: bool) -> dict[str, Any]:
    memory = rt.store.get(user, MEMORY_FILE)
    assert memory is not None
    settings, query = rt.settings, recall_query(QUERIES["ranked"], None)
    rt.counter.count("the tokenizer loads once per process, not per query")

    def recall(cache: MemoryIndexCache) -> object:
        ledgers = load_ledgers(rt, user, cache)
        past = None
        if messages:
            segments = load_segments(rt, user, cache)
            facts = fact_texts(cache, user, ledgers, segments)
            past = PastMessages(segments, facts, "new", settings.zone)
        return select_lines(
            [(memory.path, index_read(cache, user, memory)), *ledgers],
            query,
            shown=memory.content,
            counter=rt.counter,
            max_tokens=settings.recall_max_tokens,
            min_score=settings.recall_min_score,
            messages=past,
        )

    cold, spread, chosen = cold_ms(recall)
    out = {"query": query, "cold": cold, "cold_range": spread, "warm": warm_ms(recall, rounds)}
    with without_snapshots(rt, user):
        bare, _, chosen_bare = cold_ms(recall)
    found = chosen if isinstance(chosen, list) else []
    return {
        **out,
        "cold_no_snapshots": bare,
        "lines": len(found),
        "messages": sum(line.said is not None for line in found),
        "same_lines": chosen == chosen_bare,
    }


def _appending(section: str) -> Callable[[str], str]:
    """An append builder adding ``section`` whatever the file holds."""
    return lambda _: section


def refresh_cpu(
    rt: Runtime, user: User, files: dict[str, str], history: list[TurnRecord]
) -> dict[str, Any]:
    """What the post-turn job pays to refresh the snapshots after one more turn, flushed to
    the last ledger and indexed into the last segment (median of ``COLD_RUNS`` turns)."""
    last = max(p for p in files if p.startswith("memory/"))
    times: list[float] = []
    written: list[int] = []
    paths: set[str] = set()
    for n in range(1, COLD_RUNS + 1):
        turn = next_turn(history[-1], n)
        section = (
            f"\n## Flush — {turn.created_at}\n> source: session={turn.session_id} "
            f"turns={turn.turn} model=offline\n- The user now prefers aisle seats."
        )
        rt.store.append(user, last, _appending(section))
        index_turns(rt, user, [turn])
        paths = job_paths(rt, [turn])
        started = time.process_time()
        written.append(refresh_snapshots(rt, user, paths))
        times.append((time.process_time() - started) * 1000)
    names = sorted({name for p in paths if (name := snapshot_path(p))})
    sizes = {i.path: i.size for i in rt.store.list(user, SNAPSHOT_DIR)}
    return {
        "cpu_ms": round(statistics.median(times), 2),
        "written": written[-1],
        "snapshots": names,
        "bytes": sum(sizes.get(name, 0) for name in names),
    }


def memory_cpu(files: dict[str, str], history: list[TurnRecord], rounds: int) -> dict[str, Any]:
    """CPU per mode, of recall, of writing every snapshot and of the job's refresh, and the
    bytes stored, on the ledgers and their 90 days of history."""
    rt = make_runtime()
    user = User.from_id("bench")
    store_memory(rt, user, files, history, snapshots=False)
    text._word_terms.cache_clear()
    refresh_all, _ = _cpu_ms(partial(refresh_snapshots, rt, user))
    search = partial(search_memory, rt, user, limit=20)
    return {
        "cpu_ms": cpu_per_mode(rt, user, lambda q, m, c: search(q, m, cache=c), rounds),
        "recall_ms": recall_cpu(rt, user, rounds),
        "stored": stored_bytes(rt, user),
        "refresh_all_ms": round(refresh_all, 2),
        "refresh": refresh_cpu(rt, user, files, history),
    }


def imported_cpu(days: int, lines: int, history: list[TurnRecord], rounds: int) -> dict[str, Any]:
    """Ranked memory_search and thread_search CPU when every section names its whole
    session (a history imported, flushed a session at a time): ranking aligns each fact
    with its turns (``memory.engine.alignment``), the split kept in the snapshots; and the same
    with the alignment off, for what it costs."""
    rt = make_runtime()
    user = User.from_id("bench")
    store_memory(rt, user, ledger_files(days, lines, whole=True), history)
    query = QUERIES["ranked"]
    out: dict[str, Any] = {"query": query, "turns": TURNS_PER_DAY}
    for name, search in (("memory_search", search_memory), ("thread_search", search_threads)):
        call = partial(search, rt, user, query, "ranked", 20)  # called with the cache
        cold, spread, hits = cold_ms(call)
        row: dict[str, Any] = {"cold": cold, "cold_range": spread, "warm": warm_ms(call, rounds)}
        with without_snapshots(rt, user):
            row["cold_no_snapshots"], _, bare_hits = cold_ms(call)
        with switched(ALIGN_ABOVE=NEVER_ALIGN):
            row["cold_unaligned"], _, _ = cold_ms(call)
        out[name] = row | {"same_hits": hits == bare_hits}
    return out


def thread_cpu(
    records: list[TurnRecord], files: dict[str, str], rounds: int
) -> tuple[dict[str, Any], dict[str, int]]:
    rt = make_runtime()
    user = User.from_id("bench")
    store_memory(rt, user, files, records)  # the ledgers name turns of the first 90 days
    search = partial(search_threads, rt, user, limit=20)
    cpu = cpu_per_mode(rt, user, lambda q, m, c: search(q, m, cache=c), rounds)
    return cpu, stored_bytes(rt, user)


# the benchmark ----------------------------------------------------------------------------
def run(quick: bool = False) -> dict[str, object]:
    days, lines_total, thread_days, rounds = SIZES["quick" if quick else "full"]
    files = ledger_files(days, lines_total)
    history = turn_records(days)  # what the ledgers were flushed from
    records = turn_records(thread_days)
    cpu, stored = thread_cpu(records, files, rounds)
    scenarios, growth = thread_requests(records)
    ledgers = [p for p in files if p != MEMORY_FILE]
    return {
        "budget_ms": BUDGET_MS,
        "rounds": rounds,
        "cold_runs": COLD_RUNS,
        "counted_query": list(COUNTED_QUERY),
        "request_latency_ms": round(LATENCY_S * 1000, 1),
        "memory": {
            "ledgers": days,
            "ledger_months": len({p[: len("memory/YYYY-MM")] for p in ledgers}),
            "months": len(by_month(history)),
            "files": len(files),
            "lines": sum(files[p].count("\n") + 1 for p in ledgers),
            "bytes": sum(len(c.encode()) for c in files.values()),
            **memory_cpu(files, history, rounds),
            "imported": imported_cpu(days, lines_total, history, rounds),
            "requests": memory_requests(files, history),
        },
        "threads": {
            "days": thread_days,
            "turns_per_day": TURNS_PER_DAY,
            "turns": len(records),
            "messages": 2 * len(records),
            "months": len(by_month(records)),
            "bytes": stored["segments"],
            "stored": stored,
            "cpu_ms": cpu,
            "requests": scenarios,
            "growth": growth,
        },
    }
