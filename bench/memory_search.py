"""Search: memory_search over the daily ledgers and thread_search over a year of history.

docs/design.md#budgets sets three budgets, each measured here through the public functions
(``search_memory``, ``search_threads``, ``index_turns``) so the ranking code can change
underneath:

* memory_search over 90 daily ledgers (20,000 lines): one LIST, GETs issued
  concurrently, unchanged files served from a warm cache keyed by ETag; under 100 ms CPU.
  A ``ranked`` query also reads the thread segments of the turns the ledger sections
  name (one more LIST, and GETs of the months not cached): the ledgers here are flushes
  of a thread history of the same 90 days, so the join is measured at that size.
* thread_search over a user's whole history: at most one GET per month of history
  (derived month segments under ``index/threads/``), never one per turn. A ``ranked``
  query also reads the ledgers (to score each turn with the facts naming it): its CPU is
  measured with the 90 days of ledgers above stored next to the year of history.

CPU is measured on the in-memory store of the tests (no I/O, so only the search's own
work counts), per match mode: *cold* is a fresh ``MemoryIndexCache`` (a new container:
every file read and parsed, and for ``ranked`` its BM25 postings built; median of a few
runs), *warm* the same cache again (median of ``rounds`` queries).

S3 requests are counted on the real ``S3WorkspaceStore`` against moto in-process
(``mock_aws``), resources created from template.yaml: a botocore
``before-parameter-build`` hook on the S3 client records every API call (one per
request; a paginated LIST counts per page), and ``before-call``/``after-call`` hooks
record how many were in flight at once. Scenarios: a cold container, a warm one with
nothing changed, and a warm one after one file changed.

The corpora are synthetic (a seeded Zipf-like draw over 34 function words, 30 topic
words and 3,000 made-up words, with a few planted facts the queries look for), so they
can be generated at any size; no LoCoMo text is used. Thread history: one session a day,
``TURNS_PER_DAY`` turns each (a user message of 8-25 words and a reply of 20-60), from
2025-01-01, indexed a month per ``index_turns`` call (the post-turn job calls it once per
turn; the entries are the same).
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from collections import Counter
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import partial
from itertools import accumulate, groupby
from typing import TYPE_CHECKING, Any

import boto3
from moto import mock_aws

from agent_harness.ids import User
from agent_harness.memory.index import MemoryIndexCache
from agent_harness.memory.search import search_memory
from agent_harness.memory.threads import index_turns, search_threads
from agent_harness.models.base import Message
from agent_harness.records import TurnRecord
from agent_harness.runtime import Runtime
from agent_harness.settings import Settings
from bench.common import embedded_aws_env
from bench.plots import bars, lines
from local_stack.resources import create_resources, function_environment, load_template
from tests.fakes import make_runtime

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

TITLE = "Search: memory_search and thread_search"

BUDGET_MS = 100
FUNCTION = "AgentCallFunction"
START = datetime(2025, 1, 1, tzinfo=UTC)
TURNS_PER_DAY = 20
#: the size of each run: (ledger days, ledger lines, days of thread history, rounds)
SIZES = {"full": (90, 20_000, 365, 15), "quick": (90, 2_000, 90, 5)}
COLD_RUNS = 3

FUNCTION_WORDS = (
    "the to and a of in is for on that with at it was from about after before next this "
    "we they she he my our will be has have by as not but"
).split()
TOPIC_WORDS = (
    "user prefers window seats tea coffee lisbon march launch deadline project atlas "
    "postgres decided review meeting friday allergic peanuts dentist silva budget "
    "migration kafka invoice design team berlin flight hotel"
).split()
SYLLABLES = "ka lo mi ren tas vo pel dri su nor gan bi te ro shu fa zel mon ir quo".split()
FACTS = (
    "The user prefers window seats on long flights.",
    "The atlas project deadline moved to Friday after the review.",
    "User is allergic to peanuts and told the dentist.",
)
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
#: the request-count scenarios
COLD = "cold container"
WARM = "warm, nothing changed"
LEDGER_CHANGED = "warm, one ledger changed"
INDEX_TURN = "index one new turn (post-turn job)"
NEW_TURN = "warm, one new turn"


# synthetic text -------------------------------------------------------------------------
class Text:
    """Seeded sentences: Zipf-like word frequencies, a fact planted now and then."""

    def __init__(self, seed: int, fact_rate: float = 1 / 400) -> None:
        self.rng = random.Random(seed)
        made_up = sorted({"".join(self.rng.sample(SYLLABLES, 3)) for _ in range(3_500)})[:3_000]
        words = list(FUNCTION_WORDS)
        for i, word in enumerate(made_up):
            words.append(word)
            if i % 8 == 7 and i // 8 < len(TOPIC_WORDS):
                words.append(TOPIC_WORDS[i // 8])
        self.words = words
        self.cum = list(accumulate(1 / rank**1.07 for rank in range(1, len(words) + 1)))
        self.fact_rate = fact_rate

    def sentence(self, low: int, high: int) -> str:
        if self.rng.random() < self.fact_rate:
            return self.rng.choice(FACTS)
        chosen = self.rng.choices(self.words, cum_weights=self.cum, k=self.rng.randint(low, high))
        return " ".join(chosen).capitalize() + "."


def ledger_files(days: int, lines: int) -> dict[str, str]:
    """MEMORY.md and ``days`` daily ledgers of ``lines`` lines in all: sections of a
    header, a provenance line and up to eight bullets, as flushes write them; each
    section names two turns of that day's session of ``turn_records``."""
    text = Text(seed=7)
    files = {"MEMORY.md": "# Memory\n" + "\n".join(f"- {fact}" for fact in FACTS) + "\n"}
    for day in range(days):
        per_day = lines * (day + 1) // days - lines * day // days
        date = (START + timedelta(days=day)).date().isoformat()
        body: list[str] = []
        section = 0
        while len(body) < per_day:
            section += 1
            first = (section * 2 - 2) % TURNS_PER_DAY + 1
            body += [
                f"## Flush — {date}T{8 + section % 12:02d}:00:00Z",
                f"> source: session=s-{date.replace('-', '')} turns={first}-{first + 1} "
                "model=offline",
            ]
            body += [f"- {text.sentence(8, 16)}" for _ in range(min(8, per_day - len(body)))]
        files[f"memory/{date}.md"] = "\n".join(body[:per_day])
    return files


def turn_records(days: int) -> list[TurnRecord]:
    """``TURNS_PER_DAY`` turns a day, one session a day, user message and reply each."""
    text = Text(seed=11)
    records = []
    for day in range(days):
        date = START + timedelta(days=day)
        for turn in range(1, TURNS_PER_DAY + 1):
            at = date + timedelta(hours=8, minutes=30 * turn)
            messages = [
                Message(role="user", content=text.sentence(8, 25)),
                Message(role="assistant", content=text.sentence(20, 60)),
            ]
            records.append(
                TurnRecord(
                    session_id=f"s-{date:%Y%m%d}",
                    turn=turn,
                    created_at=at.isoformat().replace("+00:00", "Z"),
                    messages=messages,
                )
            )
    return records


def by_month(records: list[TurnRecord]) -> list[list[TurnRecord]]:
    return [list(g) for _, g in groupby(records, key=lambda r: r.created_at[:7])]


# request counting on moto ----------------------------------------------------------------
class RequestLog:
    """Every S3 API call of one client, by operation and key, and the peak in flight."""

    def __init__(self, client: Any) -> None:
        self.calls: list[tuple[str, str]] = []
        self.in_flight = 0
        self.peak = 0
        self._lock = threading.Lock()
        events = client.meta.events
        events.register("before-parameter-build.s3", self._record)
        events.register("before-call.s3", self._start)
        events.register("after-call.s3", self._end)

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        with self._lock:
            self.calls.append((model.name, str(params.get("Key") or params.get("Prefix") or "")))

    def _start(self, **_: Any) -> None:
        with self._lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)

    def _end(self, **_: Any) -> None:
        with self._lock:
            self.in_flight -= 1

    def take(self, classify: Callable[[str, str], str]) -> dict[str, int]:
        """Counts since the last take, by ``classify(operation, key)``, plus the peak."""
        with self._lock:
            counts = Counter(classify(op, key) for op, key in self.calls)
            out = {**counts, "total": len(self.calls), "peak_in_flight": self.peak}
            self.calls, self.peak = [], 0
        return out


def classify_memory(operation: str, key: str) -> str:
    if operation == "ListObjectsV2":
        return "LIST"
    if operation == "GetObject":
        if "/index/threads/" in key:
            return "GET segments"
        return "GET MEMORY.md" if key.endswith("/MEMORY.md") else "GET ledgers"
    return operation


def classify_threads(operation: str, key: str) -> str:
    return {"ListObjectsV2": "LIST", "GetObject": "GET", "PutObject": "PUT"}.get(
        operation, operation
    )


@contextmanager
def s3_runtime() -> Iterator[tuple[Runtime, RequestLog]]:
    """A Runtime on the real S3 store, moto in-process, resources from template.yaml."""
    embedded_aws_env()
    with mock_aws():
        clients = {n: boto3.client(n, region_name="us-east-1") for n in ("s3", "dynamodb", "sqs")}
        resolver = create_resources(load_template(), clients)
        env = function_environment(resolver, FUNCTION)
        settings = Settings.from_env({**env, "TIKTOKEN_CACHE_DIR": ""})
        yield Runtime.from_settings(settings, clients=clients), RequestLog(clients["s3"])


def store_memory(rt: Runtime, user: User, files: dict[str, str], history: list[TurnRecord]) -> None:
    """The memory files, and a thread history indexed a month at a time."""
    for path, content in files.items():
        rt.store.put(user, path, content)
    for month in by_month(history):
        index_turns(rt, user, month)


def memory_requests(
    files: dict[str, str], history: list[TurnRecord]
) -> dict[str, dict[str, dict[str, int]]]:
    """S3 requests of one memory_search per counted mode: cold, warm, warm after one
    ledger changed."""
    user = User.from_id("bench")
    _, query = COUNTED_QUERY
    out: dict[str, dict[str, dict[str, int]]] = {}
    for mode in COUNTED_MODES:
        with s3_runtime() as (rt, log):
            store_memory(rt, user, files, history)
            cache = MemoryIndexCache()
            log.take(classify_memory)
            rows = out.setdefault(mode, {})
            for scenario in (COLD, WARM, LEDGER_CHANGED):
                if scenario == LEDGER_CHANGED:
                    last = sorted(p for p in files if p.startswith("memory/"))[-1]
                    rt.store.append(user, last, lambda _: "\n- The user now prefers aisle seats.")
                    log.take(classify_memory)
                search_memory(rt, user, query, mode, 20, cache)  # type: ignore[arg-type]
                rows[scenario] = log.take(classify_memory)
    return out


def thread_requests(records: list[TurnRecord]) -> tuple[dict[str, dict[str, int]], list[dict]]:
    """S3 requests of one thread_search after each month indexed (cold), then cold, warm
    and warm after one more turn over the whole history; and what indexing that turn cost."""
    user = User.from_id("bench")
    mode, query = COUNTED_QUERY
    growth: list[dict[str, int]] = []
    scenarios: dict[str, dict[str, int]] = {}
    with s3_runtime() as (rt, log):
        indexed = 0
        for number, month in enumerate(by_month(records), start=1):
            index_turns(rt, user, month)
            indexed += len(month)
            log.take(classify_threads)
            search_threads(rt, user, query, mode, 20, MemoryIndexCache())  # type: ignore[arg-type]
            growth.append({"months": number, "turns": indexed, **log.take(classify_threads)})
        cache = MemoryIndexCache()
        for scenario in (COLD, WARM):
            search_threads(rt, user, query, mode, 20, cache)  # type: ignore[arg-type]
            scenarios[scenario] = log.take(classify_threads)
        last = records[-1]
        extra = last.model_copy(update={"turn": last.turn + 1})
        index_turns(rt, user, [extra])
        scenarios[INDEX_TURN] = log.take(classify_threads)
        search_threads(rt, user, query, mode, 20, cache)  # type: ignore[arg-type]
        scenarios[NEW_TURN] = log.take(classify_threads)
    return scenarios, growth


# CPU on the in-memory store -------------------------------------------------------------
def _cpu_ms(call: Callable[[], object]) -> float:
    started = time.process_time()
    call()
    return (time.process_time() - started) * 1000


def cpu_per_mode(
    search: Callable[[str, str, MemoryIndexCache], object], rounds: int
) -> dict[str, dict[str, Any]]:
    """Cold (fresh cache, median of ``COLD_RUNS``) and warm (median of ``rounds``) CPU ms
    of each query in ``QUERIES``."""
    out: dict[str, dict[str, Any]] = {}
    for label, query in QUERIES.items():
        mode = label.split()[0]
        cold = [_cpu_ms(partial(search, query, mode, MemoryIndexCache())) for _ in range(COLD_RUNS)]
        warm_search = partial(search, query, mode, MemoryIndexCache())
        warm_search()
        warm = [_cpu_ms(warm_search) for _ in range(rounds)]
        out[label] = {
            "query": query,
            "cold": round(statistics.median(cold), 2),
            "warm": round(statistics.median(warm), 2),
        }
    return out


def memory_cpu(
    files: dict[str, str], history: list[TurnRecord], rounds: int
) -> dict[str, dict[str, float]]:
    rt = make_runtime()
    user = User.from_id("bench")
    store_memory(rt, user, files, history)
    return cpu_per_mode(
        lambda q, m, cache: search_memory(rt, user, q, m, 20, cache),  # type: ignore[arg-type]
        rounds,
    )


def thread_cpu(records: list[TurnRecord], files: dict[str, str], rounds: int) -> tuple[dict, int]:
    rt = make_runtime()
    user = User.from_id("bench")
    store_memory(rt, user, files, records)  # the ledgers name turns of the first 90 days
    size = sum(i.size for i in rt.store.list(user, "index/threads"))
    cpu = cpu_per_mode(
        lambda q, m, cache: search_threads(rt, user, q, m, 20, cache),  # type: ignore[arg-type]
        rounds,
    )
    return cpu, size


# the benchmark ----------------------------------------------------------------------------
def run(quick: bool = False) -> dict[str, object]:
    days, lines_total, thread_days, rounds = SIZES["quick" if quick else "full"]
    files = ledger_files(days, lines_total)
    history = turn_records(days)  # what the ledgers were flushed from
    records = turn_records(thread_days)
    cpu, segment_bytes = thread_cpu(records, files, rounds)
    scenarios, growth = thread_requests(records)
    return {
        "budget_ms": BUDGET_MS,
        "rounds": rounds,
        "cold_runs": COLD_RUNS,
        "counted_query": list(COUNTED_QUERY),
        "memory": {
            "ledgers": days,
            "months": len(by_month(history)),
            "files": len(files),
            "lines": sum(c.count("\n") + 1 for p, c in files.items() if p != "MEMORY.md"),
            "bytes": sum(len(c.encode()) for c in files.values()),
            "cpu_ms": memory_cpu(files, history, rounds),
            "requests": memory_requests(files, history),
        },
        "threads": {
            "days": thread_days,
            "turns_per_day": TURNS_PER_DAY,
            "turns": len(records),
            "messages": 2 * len(records),
            "months": len(by_month(records)),
            "bytes": segment_bytes,
            "cpu_ms": cpu,
            "requests": scenarios,
            "growth": growth,
        },
    }


# expectations from docs/design.md#budgets ----------------------------------------------------
def memory_expectation(
    mode: str, scenario: str, ledgers: int, months: int
) -> tuple[str, int, int, int]:
    """(what docs/design.md#budgets expects, and the LISTs, ledger GETs and segment GETs that
    means): ranked adds a LIST of the thread segments and GETs of those not cached (see
    docs/architecture.md#facts-read-with-their-turns)."""
    ranked = mode == "ranked"
    lists = 2 if ranked else 1
    listing = "2 LISTs (memory/, index/threads/)" if ranked else "1 LIST"
    if scenario == COLD:
        segments = f" and {months} segment GETs" if ranked else ""
        text = f"{listing}, {ledgers} ledger GETs{segments}, issued concurrently"
        return text, lists, ledgers, months if ranked else 0
    if scenario == LEDGER_CHANGED:
        return f"{listing}, 1 ledger GET (the changed one)", lists, 1, 0
    return f"{listing}, 0 GETs (all cached by ETag)", lists, 0, 0


def memory_verdict(
    row: dict[str, int], mode: str, scenario: str, ledgers: int, months: int
) -> bool:
    _, lists, gets, segments = memory_expectation(mode, scenario, ledgers, months)
    concurrent = row.get("peak_in_flight", 0) > 1 if gets > 1 else True
    return (
        row.get("LIST", 0) == lists
        and row.get("GET ledgers", 0) == gets
        and row.get("GET segments", 0) == segments
        and concurrent
    )


def memory_verdicts(mem: dict[str, Any]) -> bool:
    return all(
        memory_verdict(row, mode, scenario, mem["ledgers"], mem["months"])
        for mode, rows in mem["requests"].items()
        for scenario, row in rows.items()
    )


def thread_verdict(row: dict[str, int], months: int, scenario: str) -> bool:
    if scenario == INDEX_TURN:
        return True
    bound = {COLD: months, NEW_TURN: 1}.get(scenario, 0)
    return row.get("LIST", 0) == 1 and row.get("GET", 0) <= bound


def thread_expectation(scenario: str, months: int) -> str:
    if scenario == COLD:
        return f"1 LIST, at most {months} GETs (one per month)"
    if scenario == INDEX_TURN:
        return "(not budgeted: the append's GET + conditional PUT)"
    if scenario == NEW_TURN:
        return "1 LIST, at most 1 GET (the month that changed)"
    return "1 LIST, 0 GETs"


# console ------------------------------------------------------------------------------------
def _counts(row: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in row.items() if k not in ("total", "peak_in_flight"))


def report(result: dict[str, Any]) -> str:
    mem, thr = result["memory"], result["threads"]
    out = [
        f"memory_search over {mem['ledgers']} ledgers / {mem['lines']} lines "
        f"(CPU ms, in-memory store; cold = fresh cache, warm = median):"
    ]
    out += [f"  {k:<16} cold {v['cold']:>7}  warm {v['warm']:>6}" for k, v in mem["cpu_ms"].items()]
    out.append(f"  budget: < {result['budget_ms']} ms CPU (docs/design.md#budgets)")
    out.append("  S3 requests per query (moto):")
    for mode, rows in mem["requests"].items():
        for scenario, row in rows.items():
            ok = memory_verdict(row, mode, scenario, mem["ledgers"], mem["months"])
            out.append(
                f"    {mode + ', ' + scenario:<34} {_counts(row)}; peak in flight "
                f"{row['peak_in_flight']}  {'ok' if ok else 'OVER BUDGET'}"
            )
    out.append(
        f"thread_search over {thr['days']} days x {thr['turns_per_day']} turns "
        f"({thr['messages']} messages, {thr['months']} month segments, {thr['bytes']:,} bytes):"
    )
    out += [f"  {k:<16} cold {v['cold']:>7}  warm {v['warm']:>6}" for k, v in thr["cpu_ms"].items()]
    for scenario, row in thr["requests"].items():
        ok = thread_verdict(row, thr["months"], scenario)
        out.append(f"    {scenario:<34} {_counts(row)}  {'ok' if ok else 'OVER BUDGET'}")
    return "\n".join(out)


# docs ---------------------------------------------------------------------------------------
def _cpu_table(cpu: dict[str, dict[str, Any]], budget: int | None) -> list[str]:
    """CPU per mode; with a budget, a verdict for cold and for warm."""
    if budget is None:
        rows = ["| mode | query | cold ms | warm ms |", "|---|---|---:|---:|"]
        rows += [f"| {k} | `{r['query']}` | {r['cold']} | {r['warm']} |" for k, r in cpu.items()]
        return rows
    rows = [
        f"| mode | query | cold ms | cold < {budget} ms | warm ms | warm < {budget} ms |",
        "|---|---|---:|---|---:|---|",
    ]
    for label, row in cpu.items():
        cold, warm = ("yes" if row[k] < budget else "**no**" for k in ("cold", "warm"))
        rows.append(
            f"| {label} | `{row['query']}` | {row['cold']} | {cold} | {row['warm']} | {warm} |"
        )
    return rows


def _cpu_plot(
    path: Path, title: str, cpu: dict[str, dict[str, Any]], budget: int, label: str | None = None
) -> None:
    bars(
        path,
        title,
        "CPU ms per query",
        list(cpu),
        {
            "cold (new container)": [row["cold"] for row in cpu.values()],
            "warm (cached)": [row["warm"] for row in cpu.values()],
        },
        hline=(budget, label or f"budget {budget} ms"),
    )


def _memory_section(result: dict[str, Any], img_dir: Path) -> list[str]:
    mem, budget = result["memory"], result["budget_ms"]
    _cpu_plot(img_dir / "memory_search-cpu.png", "memory_search CPU", mem["cpu_ms"], budget)
    out = [
        f"### memory_search: {mem['ledgers']} daily ledgers, {mem['lines']:,} lines "
        f"({mem['bytes']:,} bytes), plus MEMORY.md",
        "",
        "S3 requests per query on the real S3 store (moto in-process), counted by a botocore "
        f"hook; the query is `{result['counted_query'][1]}`. The files are read before any "
        "matching, so the words do not change the count; the mode does: `phrase`, `all` "
        "and `any` read the memory files, `ranked` also the thread-search segments of the "
        f"turns the ledger sections name (the ledgers are flushes of {mem['months']} months "
        "of history).",
        "",
        "| mode | container | LIST | GET MEMORY.md | GET ledgers | GET segments | "
        "peak in flight | expected ([budget](design.md#budgets); `ranked`: "
        "[facts with their turns](architecture.md#facts-read-with-their-turns)) | verdict |",
        "|---|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for mode, rows in mem["requests"].items():
        for scenario, row in rows.items():
            expect = memory_expectation(mode, scenario, mem["ledgers"], mem["months"])[0]
            ok = memory_verdict(row, mode, scenario, mem["ledgers"], mem["months"])
            out.append(
                f"| {mode} | {scenario} | {row.get('LIST', 0)} | {row.get('GET MEMORY.md', 0)} | "
                f"{row.get('GET ledgers', 0)} | {row.get('GET segments', 0)} | "
                f"{row['peak_in_flight']} | {expect} | {'ok' if ok else '**over**'} |"
            )
    out += [
        "",
        "MEMORY.md is read on every query: it is not under the listed `memory/` prefix, so "
        "its ETag is unknown without a request (a conditional GET or a HEAD would cost the "
        "same one request).",
        "",
        f"CPU per query on the in-memory store (cold: fresh cache, median of "
        f"{result['cold_runs']}; warm: median of {result['rounds']}); budget {budget} ms:",
        "",
        *_cpu_table(mem["cpu_ms"], budget),
        "",
        "![memory_search CPU per mode](img/memory_search-cpu.png)",
    ]
    return out


def _thread_section(result: dict[str, Any], img_dir: Path) -> list[str]:
    thr, budget = result["threads"], result["budget_ms"]
    _cpu_plot(
        img_dir / "memory_search-thread-cpu.png",
        "thread_search CPU",
        thr["cpu_ms"],
        budget,
        f"memory_search's {budget} ms budget, for scale",
    )
    growth = thr["growth"]
    lines(
        img_dir / "memory_search-thread-gets.png",
        "thread_search: S3 GETs of a cold query vs history",
        "months of history",
        "count (log)",
        {
            "GETs per cold query (measured)": (
                [g["months"] for g in growth],
                [g.get("GET", 0) for g in growth],
            ),
            "turns in the history (one GET per turn would be this)": (
                [g["months"] for g in growth],
                [g["turns"] for g in growth],
            ),
        },
        logy=True,
    )
    out = [
        f"### thread_search: {thr['days']} days of history",
        "",
        f"{thr['turns_per_day']} turns a day (one session a day; a user message and a reply "
        f"per turn): {thr['turns']:,} turns, {thr['messages']:,} messages in "
        f"{thr['months']} month segments ({thr['bytes']:,} bytes), written by `index_turns`.",
        "",
        "| container | LIST | GET | PUT | the [budget](design.md#budgets) expects | verdict |",
        "|---|---:|---:|---:|---|---|",
    ]
    for scenario, row in thr["requests"].items():
        ok = "ok" if thread_verdict(row, thr["months"], scenario) else "**over**"
        out.append(
            f"| {scenario} | {row.get('LIST', 0)} | {row.get('GET', 0)} | {row.get('PUT', 0)} "
            f"| {thread_expectation(scenario, thr['months'])} | {ok} |"
        )
    out += [
        "",
        "![thread_search GETs vs months of history](img/memory_search-thread-gets.png)",
        "",
        "CPU per query on the in-memory store (same method as above). The "
        "[budgets](design.md#budgets) give thread_search no CPU "
        f"limit; the plot shows memory_search's {budget} ms for scale:",
        "",
        *_cpu_table(thr["cpu_ms"], None),
        "",
        "![thread_search CPU per mode](img/memory_search-thread-cpu.png)",
    ]
    return out


def _summary(result: dict[str, Any]) -> str:
    """What the numbers say, in words (computed from them, not assumed)."""
    mem, thr, budget = result["memory"], result["threads"], result["budget_ms"]
    cpu = mem["cpu_ms"]
    warm_max = max(row["warm"] for row in cpu.values())
    cold_over = [f"`{k}` ({r['cold']} ms)" for k, r in cpu.items() if r["cold"] >= budget]
    text = (
        f"Warm, every memory_search mode "
        f"{'stays under' if warm_max < budget else 'does not stay under'} the {budget} ms CPU "
        f"budget (slowest {warm_max} ms). "
    )
    if cold_over:
        text += (
            f"The first query of a new container is over it for {', '.join(cold_over)}: it "
            "reads and indexes every ledger (for `ranked`, builds the BM25 postings) once, "
            "after which only changed files are fetched and re-indexed. "
        )
    else:
        text += "So is the first query of a new container, which reads and indexes every file. "
    ok = memory_verdicts(mem)
    text += (
        "The requests match the [budget](design.md#budgets) in every scenario (for `ranked`, "
        "with the segment reads of "
        "[facts with their turns](architecture.md#facts-read-with-their-turns)). "
        if ok
        else "**The ledger requests do not match the [budget](design.md#budgets)** (see the "
        "table). "
    )
    cold, grew = thr["requests"][COLD], thr["requests"][NEW_TURN]
    slowest = max(thr["cpu_ms"], key=lambda k: thr["cpu_ms"][k]["cold"])
    text += (
        f"thread_search over {thr['turns']:,} turns ({thr['months']} months, "
        f"{thr['messages']:,} messages) cost {cold.get('LIST', 0)} LIST and "
        f"{cold.get('GET', 0)} GETs cold and {grew.get('GET', 0)} GET warm after a new turn, "
        f"with up to {thr['cpu_ms'][slowest]['cold']} ms CPU cold (`{slowest}`) and at most "
        f"{max(r['warm'] for r in thr['cpu_ms'].values())} ms warm."
    )
    return text


def markdown(result: dict[str, Any], img_dir: Path) -> str:
    return "\n".join(
        [
            _summary(result),
            "",
            *_memory_section(result, img_dir),
            "",
            *_thread_section(result, img_dir),
        ]
    )
