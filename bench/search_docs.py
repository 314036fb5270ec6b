"""The console report and the docs section of the search benchmark
(bench/memory_search.py), written from its saved result: every sentence is computed
from the numbers, and every verdict from bench/search_requests.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bench.plots import bars, lines
from bench.search_requests import (
    COLD,
    MEMORY_COLUMNS,
    NEW_TURN,
    THREAD_COLUMNS,
    growth_verdict,
    memory_expectation,
    memory_verdict,
    memory_verdicts,
    thread_expectation,
    thread_verdict,
)

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["markdown", "report"]

#: a cold query with snapshots is called slower than without past this ratio (the runs
#: of one query vary by more than a few percent)
SLOWER = 1.1


# console ------------------------------------------------------------------------------------
def _counts(row: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in row.items() if k not in ("total", "peak_in_flight"))


def _cpu_lines(cpu: dict[str, dict[str, Any]]) -> list[str]:
    return [
        f"  {k:<16} cold {_cold(v):>22}  cold, no snapshots {v['cold_no_snapshots']:>8}  "
        f"warm {v['warm']:>6}  same hits {'yes' if v['same_hits'] else 'NO'}"
        for k, v in cpu.items()
    ]


def report(result: dict[str, Any]) -> str:
    mem, thr = result["memory"], result["threads"]
    out = [
        f"memory_search over {mem['ledgers']} ledgers / {mem['lines']} lines "
        f"(CPU ms, in-memory store; cold = fresh cache, warm = median):",
        *_cpu_lines(mem["cpu_ms"]),
        f"  budget: < {result['budget_ms']} ms CPU cold (with snapshots) and warm "
        "(docs/design.md#budgets)",
    ]
    rec, stored, refresh = mem["recall_ms"], mem["stored"], mem["refresh"]
    out.append(
        f"  recall (load_ledgers + select_lines): cold {_cold(rec)}, cold, no snapshots "
        f"{rec['cold_no_snapshots']}, warm {rec['warm']}; {rec['lines']} lines, same "
        f"{'yes' if rec['same_lines'] else 'NO'}"
    )
    for name, row in (mem.get("imported") or {}).items():
        if isinstance(row, dict):
            out.append(
                f"  imported whole, {name} ranked: cold {_cold(row)}, alignment off "
                f"{row['cold_unaligned']}, no snapshots {row['cold_no_snapshots']}, warm "
                f"{row['warm']}; same {'yes' if row['same_hits'] else 'NO'}"
            )
    if isinstance(rec.get("messages"), dict):
        row = rec["messages"]
        out.append(
            f"  recall with past messages: cold {_cold(row)}, cold, no snapshots "
            f"{row['cold_no_snapshots']}, warm {row['warm']}; {row['lines']} lines "
            f"({row['messages']} messages), same {'yes' if row['same_lines'] else 'NO'}"
        )
    out.append(
        f"  snapshots: {stored['snapshots_memory']:,} bytes for {stored['ledgers']:,} of "
        f"ledgers, {stored['snapshots_threads']:,} for {stored['segments']:,} of segments; "
        f"writing all {mem['refresh_all_ms']} ms; the job's refresh of one month "
        f"{refresh['cpu_ms']} ms ({refresh['written']} written)"
    )
    out.append("  S3 requests per query (moto):")
    for mode, rows in mem["requests"].items():
        for scenario, row in rows.items():
            ok = memory_verdict(row, mode, scenario, mem)
            out.append(
                f"    {mode + ', ' + scenario:<38} {_counts(row)}; peak in flight "
                f"{row['peak_in_flight']}  {'ok' if ok else 'NOT AS EXPECTED'}"
            )
    out.append(
        f"thread_search over {thr['days']} days x {thr['turns_per_day']} turns "
        f"({thr['messages']} messages, {thr['months']} month segments, {thr['bytes']:,} bytes):"
    )
    out += _cpu_lines(thr["cpu_ms"])
    for scenario, row in thr["requests"].items():
        ok = thread_verdict(row, thr["months"], scenario)
        out.append(
            f"    {scenario:<38} {_counts(row)}; peak in flight {row['peak_in_flight']}  "
            f"{'ok' if ok else 'NOT AS EXPECTED'}"
        )
    out.append(
        f"    growth (cold after each month): {'ok' if growth_verdict(thr['growth']) else 'NO'}"
    )
    return "\n".join(out)


# docs ---------------------------------------------------------------------------------------
def _yes(ok: bool) -> str:
    return "yes" if ok else "**no**"


def _imported_table(imp: dict[str, Any] | None, budget: int) -> list[str]:
    """The ranked searches over a history imported whole (results from before it was
    measured have none), and how they stand against the cold budget."""
    if not imp:
        return []
    names = ("memory_search", "thread_search")
    over = [n for n in names if imp[n]["cold"] >= budget]
    over_off = [n for n in names if imp[n]["cold_unaligned"] >= budget]
    verdict = (
        f"Cold, both stay under the {budget} ms budget."
        if not over
        else f"Cold, {' and '.join(f'`{n}`' for n in over)} "
        f"{'is' if len(over) == 1 else 'are'} **over** the {budget} ms budget here"
        + (
            f" (also with the alignment off: {', '.join(f'`{n}`' for n in over_off)})."
            if over_off
            else ", and under it with the alignment off."
        )
    )
    out = [
        "",
        "A history imported whole: the same ledgers, every section naming all "
        f"{imp['turns']} turns of its day's session (as the flush of an imported session "
        "does), so `ranked` reads each fact with the turns it aligns with "
        "([alignment](architecture.md#facts-read-with-their-turns)), the split kept in the "
        f"snapshots; `ranked` for `{imp['query']}`, CPU ms (*alignment off*: every fact read "
        "with its whole session, as before the alignment):",
        "",
        "| search | cold (runs) | cold, alignment off | cold, no snapshots | warm | same hits |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name in ("memory_search", "thread_search"):
        row = imp[name]
        out.append(
            f"| {name} | {_cold(row)} | {row['cold_unaligned']} | {row['cold_no_snapshots']} | "
            f"{row['warm']} | {_yes(row['same_hits'])} |"
        )
    ratios = ", ".join(f"`{n}` {imp[n]['cold'] / imp[n]['cold_unaligned']:.2f}×" for n in names)
    verdict += f" Cold with the alignment against without it, in this run: {ratios}."
    return [*out, "", verdict]


def _recall_rows(rec: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
    """Recall's rows: memory lines, then with past messages (when measured)."""
    rows = [("memory lines only", rec, "")]
    if isinstance(rec.get("messages"), dict):
        row = rec["messages"]
        rows.append(("with past messages (default)", row, f" ({row['messages']} messages)"))
    return rows


def _cold(row: dict[str, Any]) -> str:
    """The cold median, and the range of its runs."""
    low, high = row["cold_range"]
    return f"{row['cold']} ({low}–{high})"


def _cpu_table(cpu: dict[str, dict[str, Any]], budget: int | None) -> list[str]:
    """CPU per mode; with a budget, a verdict for cold (with snapshots) and for warm."""
    head = "| mode | query | cold ms (runs) | "
    if budget is None:
        rows = [
            head + "cold, no snapshots ms | warm ms | same hits |",
            "|---|---|---:|---:|---:|---|",
        ]
        rows += [
            f"| {k} | `{r['query']}` | {_cold(r)} | {r['cold_no_snapshots']} | {r['warm']} "
            f"| {_yes(r['same_hits'])} |"
            for k, r in cpu.items()
        ]
        return rows
    rows = [
        head + f"cold < {budget} ms | cold, no snapshots ms | warm ms | warm < {budget} ms | "
        "same hits |",
        "|---|---|---:|---|---:|---:|---|---|",
    ]
    for label, r in cpu.items():
        cold, warm = (_yes(r[k] < budget) for k in ("cold", "warm"))
        rows.append(
            f"| {label} | `{r['query']}` | {_cold(r)} | {cold} | {r['cold_no_snapshots']} | "
            f"{r['warm']} | {warm} | {_yes(r['same_hits'])} |"
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
            "cold (new container, snapshots)": [row["cold"] for row in cpu.values()],
            "cold, no snapshots": [row["cold_no_snapshots"] for row in cpu.values()],
            "warm (cached)": [row["warm"] for row in cpu.values()],
        },
        hline=(budget, label or f"budget {budget} ms"),
    )


def _ratio(part: float, whole: float) -> str:
    return f"{part / whole:.2f}×" if whole else "n/a"


def _memory_section(result: dict[str, Any], img_dir: Path) -> list[str]:
    mem, budget = result["memory"], result["budget_ms"]
    _cpu_plot(img_dir / "memory_search-cpu.png", "memory_search CPU", mem["cpu_ms"], budget)
    rec, stored, refresh = mem["recall_ms"], mem["stored"], mem["refresh"]
    out = [
        f"### memory_search: {mem['ledgers']} daily ledgers, {mem['lines']:,} lines "
        f"({mem['bytes']:,} bytes), plus MEMORY.md",
        "",
        "The workspace is stored as the product leaves it: the ledgers, the thread history "
        "indexed, and every ranked-index snapshot (`index/ranked/`, a month of ledgers or "
        "of thread segments each, with their BM25 postings; see "
        "[reading and repairing memory](operations.md#reading-and-repairing-a-users-memory)) "
        "written, as consolidation writes them. *Cold, no snapshots* deletes them first: a "
        "user whose snapshots are not written yet.",
        "",
        "S3 requests per query on the real S3 store (moto in-process), counted by a botocore "
        f"hook that also holds each request {result['request_latency_ms']:g} ms (a stand-in "
        "for the network, so that requests issued together are seen in flight together); "
        f"the query is `{result['counted_query'][1]}`. The files are read before any "
        "matching, so the words do not change the count; the mode does: `phrase`, `all` "
        "and `any` read the memory files, `ranked` also the thread-search segments of the "
        f"turns the ledger sections name (the {mem['ledgers']} ledgers span "
        f"{mem['ledger_months']} months and are flushes of {mem['months']} months of history). "
        "*GET snapshots* counts reads under `index/ranked/`, found or not.",
        "",
        "| mode | container | " + " | ".join(MEMORY_COLUMNS) + " | peak in flight | expected "
        "([budget](design.md#budgets); `ranked`: "
        "[facts with their turns](architecture.md#facts-read-with-their-turns)) | as expected |",
        "|---|---|" + "---:|" * (len(MEMORY_COLUMNS) + 1) + "---|---|",
    ]
    for mode, rows in mem["requests"].items():
        for scenario, row in rows.items():
            expect = memory_expectation(mode, scenario, mem)[0]
            counts = " | ".join(str(row.get(k, 0)) for k in MEMORY_COLUMNS)
            ok = "ok" if memory_verdict(row, mode, scenario, mem) else "**no**"
            out.append(
                f"| {mode} | {scenario} | {counts} | {row['peak_in_flight']} | {expect} | {ok} |"
            )
    out += [
        "",
        "MEMORY.md is read on every query: it is not under the listed `memory/` prefix, so "
        "its ETag is unknown without a request (a conditional GET or a HEAD would cost the "
        "same one request).",
        "",
        f"CPU per query on the in-memory store (cold: a fresh cache and word cache, median "
        f"of {result['cold_runs']} runs, their fastest and slowest in brackets; warm: median "
        f"of {result['rounds']}); budget {budget} ms "
        "for cold with snapshots and for warm. *Same hits*: the cold query returned the "
        "same hits, scores included, with and without the snapshots.",
        "",
        *_cpu_table(mem["cpu_ms"], budget),
        "",
        "![memory_search CPU per mode](img/memory_search-cpu.png)",
        "",
        "Automatic recall runs in a turn's hot path: `load_ledgers` and `select_lines` "
        f"(MEMORY.md indexed too, as the turn does) for `{rec['query']}`, CPU ms; with "
        "past messages (the default; `HARNESS_RECALL_MESSAGES=false` leaves them out), "
        "also `load_segments` (the thread segments of the same history) and the ledger "
        "facts naming their turns:",
        "",
        "| recall | cold (runs) | cold, no snapshots | warm | lines recalled | same lines |",
        "|---|---:|---:|---:|---:|---|",
        *(
            f"| {name} | {_cold(row)} | {row['cold_no_snapshots']} | {row['warm']} | "
            f"{row['lines']}{extra} | {_yes(row['same_lines'])} |"
            for name, row, extra in _recall_rows(rec)
        ),
        *_imported_table(mem.get("imported"), budget),
        "",
        "What the snapshots cost, in bytes stored and in CPU of the writers (in-memory store):",
        "",
        "| snapshots of | snapshot bytes | bytes of the files | ratio |",
        "|---|---:|---:|---:|",
        f"| the ledgers (`memory-*`) | {stored['snapshots_memory']:,} | {stored['ledgers']:,} | "
        f"{_ratio(stored['snapshots_memory'], stored['ledgers'])} |",
        f"| the segments (`threads-*`) | {stored['snapshots_threads']:,} | "
        f"{stored['segments']:,} | {_ratio(stored['snapshots_threads'], stored['segments'])} |",
        "",
        f"Writing all {stored['snapshot_files']} from nothing (consolidation's first run) took "
        f"{mem['refresh_all_ms']} ms CPU. After one more turn flushed to the last ledger and "
        f"indexed into its segment, the post-turn job's `refresh_snapshots` of that month "
        f"({', '.join(f'`{n}`' for n in refresh['snapshots'])}, {refresh['bytes']:,} bytes) "
        f"took {refresh['cpu_ms']} ms CPU (median of {result['cold_runs']} turns) and wrote "
        f"{refresh['written']} snapshots.",
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
            "GETs per cold query (measured: snapshots and segments)": (
                [g["months"] for g in growth],
                [g.get("GET", 0) + g.get("GET snapshots", 0) for g in growth],
            ),
            "turns in the history (one GET per turn would be this)": (
                [g["months"] for g in growth],
                [g["turns"] for g in growth],
            ),
        },
        logy=True,
    )
    stored = thr["stored"]
    out = [
        f"### thread_search: {thr['days']} days of history",
        "",
        f"{thr['turns_per_day']} turns a day (one session a day; a user message and a reply "
        f"per turn): {thr['turns']:,} turns, {thr['messages']:,} messages in "
        f"{thr['months']} month segments ({thr['bytes']:,} bytes), written by `index_turns` "
        "a month at a time, each month's snapshots refreshed after it as the post-turn job "
        f"does ({stored['snapshots_threads']:,} bytes of segment snapshots, "
        f"{_ratio(stored['snapshots_threads'], stored['segments'])} the segments).",
        "",
        "| container | " + " | ".join(THREAD_COLUMNS) + " | peak in flight | expected "
        "([budget](design.md#budgets)) | as expected |",
        "|---|" + "---:|" * (len(THREAD_COLUMNS) + 1) + "---|---|",
    ]
    for scenario, row in thr["requests"].items():
        ok = "ok" if thread_verdict(row, thr["months"], scenario) else "**no**"
        counts = " | ".join(str(row.get(k, 0)) for k in THREAD_COLUMNS)
        out.append(
            f"| {scenario} | {counts} | {row['peak_in_flight']} | "
            f"{thread_expectation(scenario, thr['months'])[0]} | {ok} |"
        )
    out += [
        "",
        f"A cold query after each month of history read one snapshot per month and no "
        f"segment: {_yes(growth_verdict(growth))}.",
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
    slowest = max(cpu, key=lambda k: cpu[k]["cold"])
    cold_over = [f"`{k}` ({r['cold']} ms)" for k, r in cpu.items() if r["cold"] >= budget]
    warm_max = max(row["warm"] for row in cpu.values())
    text = (
        "With the ranked-index snapshots written, the first memory_search of a new container "
        + (
            f"stays under the {budget} ms CPU budget in every mode (slowest `{slowest}`, "
            f"{cpu[slowest]['cold']} ms), "
            if not cold_over
            else f"is over the {budget} ms CPU budget for {', '.join(cold_over)}, "
        )
        + "reading one snapshot per month instead of indexing every ledger. "
    )
    close = [
        f"`{k}` {r['cold_range'][0]}–{r['cold_range'][1]} ms"
        for k, r in cpu.items()
        if r["cold_range"][0] < budget <= r["cold_range"][1]
    ]
    if close:
        text += (
            f"The verdict is on the median, and a close one: runs of the same cold query "
            f"ranged across the budget ({', '.join(close)} over {result['cold_runs']} runs; "
            "the machine is shared). "
        )
    bare = cpu["ranked"]["cold_no_snapshots"]
    text += (
        f"Without them a cold `ranked` query costs {bare} ms "
        f"({_ratio(bare, cpu['ranked']['cold'])} the cold query with them). "
    )
    slower = {k: r for k, r in cpu.items() if r["cold"] > SLOWER * r["cold_no_snapshots"]}
    if slower:
        costs = "; ".join(
            f"`{k}` {r['cold']} ms with, {r['cold_no_snapshots']} without"
            for k, r in slower.items()
        )
        text += (
            f"The other way round, the cold query is over {SLOWER:g}× slower with the "
            f"snapshots for {costs}: "
            "a snapshot also holds the postings, which these modes do not use. "
        )
    text += (
        f"Warm, every mode {'stays under' if warm_max < budget else 'does not stay under'} "
        f"the budget (slowest {warm_max} ms). "
    )
    differ = [f"`{k}`" for k, r in {**cpu, **thr["cpu_ms"]}.items() if not r["same_hits"]]
    text += (
        "**Some cold queries returned other hits with the snapshots than without** "
        f"({', '.join(differ)}). "
        if differ
        else "Every query returned the same hits with and without them. "
    )
    rec = mem["recall_ms"]
    text += (
        f"Automatic recall's reading and selection cost {rec['cold']} ms cold with snapshots, "
        f"{rec['cold_no_snapshots']} ms without, {rec['warm']} ms warm. The post-turn job "
        f"pays {mem['refresh']['cpu_ms']} ms CPU to refresh a month's snapshots after a turn. "
    )
    text += (
        "The requests are as expected in every scenario: cold, one snapshot GET per month "
        "and no file GETs (for `ranked`, with the segment reads of "
        "[facts with their turns](architecture.md#facts-read-with-their-turns)). "
        if memory_verdicts(mem)
        else "**The memory_search requests are not as expected** (see the table). "
    )
    cold, grew = thr["requests"][COLD], thr["requests"][NEW_TURN]
    thr_cpu = thr["cpu_ms"]
    worst = max(thr_cpu, key=lambda k: thr_cpu[k]["cold"])
    thread_ok = all(
        thread_verdict(row, thr["months"], s) for s, row in thr["requests"].items()
    ) and growth_verdict(thr["growth"])
    text += (
        f"thread_search over {thr['turns']:,} turns ({thr['months']} months, "
        f"{thr['messages']:,} messages) cost {cold.get('LIST', 0)} LIST and "
        f"{cold.get('GET snapshots', 0)} snapshot GETs and {cold.get('GET', 0)} segment GETs "
        f"cold, and {grew.get('GET', 0)} GET warm after a new turn "
        f"({'as expected' if thread_ok else '**not as expected**'}), with up to "
        f"{thr_cpu[worst]['cold']} ms CPU cold (`{worst}`; "
        f"{thr_cpu[worst]['cold_no_snapshots']} ms without snapshots) and at most "
        f"{max(r['warm'] for r in thr_cpu.values())} ms warm."
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
