"""What the search benchmark (bench/memory_search.py) expects of its S3 request counts:
the scenarios, how a request is classified (a GET under ``index/ranked/`` counts as a
snapshot read, found or not), and the exact count of each class per scenario, from the
budgets of docs/design.md#budgets. A verdict holds when every class is as expected,
nothing else was requested, and several GETs of one kind were in flight at once."""

from __future__ import annotations

from typing import Any

from agent_harness.paths import SNAPSHOT_DIR

#: the request-count scenarios
COLD = "cold container"
COLD_BARE = "cold container, no snapshots"
WARM = "warm, nothing changed"
LEDGER_CHANGED = "warm, one ledger changed"
INDEX_TURN = "index one new turn (post-turn job)"
NEW_TURN = "warm, one new turn"
MEMORY_SCENARIOS = (COLD, COLD_BARE, WARM, LEDGER_CHANGED)
THREAD_SCENARIOS = (COLD, COLD_BARE, WARM, INDEX_TURN, NEW_TURN)
#: the request-count columns (and what each counts)
MEMORY_COLUMNS = ("LIST", "GET MEMORY.md", "GET snapshots", "GET ledgers", "GET segments")
THREAD_COLUMNS = ("LIST", "GET snapshots", "GET", "PUT snapshots", "PUT")
SNAPSHOT_KEYS = f"/{SNAPSHOT_DIR}"


def classify_memory(operation: str, key: str) -> str:
    if operation == "ListObjectsV2":
        return "LIST"
    if operation == "GetObject":
        if SNAPSHOT_KEYS in key:
            return "GET snapshots"
        if "/index/threads/" in key:
            return "GET segments"
        return "GET MEMORY.md" if key.endswith("/MEMORY.md") else "GET ledgers"
    return operation


def classify_threads(operation: str, key: str) -> str:
    kind = {"ListObjectsV2": "LIST", "GetObject": "GET", "PutObject": "PUT"}.get(
        operation, operation
    )
    return f"{kind} snapshots" if kind in ("GET", "PUT") and SNAPSHOT_KEYS in key else kind


# expectations ----------------------------------------------------------------------------------
def memory_expectation(mode: str, scenario: str, mem: dict[str, Any]) -> tuple[str, dict[str, int]]:
    """(what is expected, in words, and the exact count of each column): the
    budget (docs/design.md#budgets) for a cold container with snapshots, a warm one and
    one ledger changed; the fallback's count without snapshots. ``ranked`` adds a LIST of
    the thread segments and reads of those not cached (see
    docs/architecture.md#facts-read-with-their-turns)."""
    ranked = mode == "ranked"
    ledgers, segments = mem["ledgers"], mem["months"] if ranked else 0
    snaps = mem["ledger_months"] + segments
    want = dict.fromkeys(MEMORY_COLUMNS, 0)
    want.update({"LIST": 2 if ranked else 1, "GET MEMORY.md": 1})
    text = "2 LISTs (memory/, index/threads/)" if ranked else "1 LIST"
    per_month = f"one per month of ledgers{' and of segments' if ranked else ''}"
    if scenario == COLD:
        want["GET snapshots"] = snaps
        return f"{text}, {snaps} snapshot GETs ({per_month}), no file GETs, concurrent", want
    if scenario == COLD_BARE:
        want.update({"GET snapshots": snaps, "GET ledgers": ledgers, "GET segments": segments})
        files = f"{ledgers} ledger GETs" + (f" and {segments} segment GETs" if ranked else "")
        return (
            f"not budgeted: {text}, {snaps} snapshot GETs finding none, then {files}, concurrent",
            want,
        )
    if scenario == LEDGER_CHANGED:
        want["GET ledgers"] = 1
        return f"{text}, 1 ledger GET (one file missing: no snapshot read)", want
    return f"{text}, no GETs but MEMORY.md (all cached by ETag)", want


def _exact(row: dict[str, int], want: dict[str, int]) -> bool:
    """Each column as expected, nothing else requested, and several GETs in flight at
    once wherever one kind of file takes several."""
    gets = max(v for k, v in want.items() if k.startswith("GET") and k != "GET MEMORY.md")
    return (
        all(row.get(k, 0) == v for k, v in want.items())
        and row.get("total", 0) == sum(want.values())
        and (row.get("peak_in_flight", 0) > 1 if gets > 1 else True)
    )


def memory_verdict(row: dict[str, int], mode: str, scenario: str, mem: dict[str, Any]) -> bool:
    return _exact(row, memory_expectation(mode, scenario, mem)[1])


def memory_verdicts(mem: dict[str, Any]) -> bool:
    return all(
        memory_verdict(row, mode, scenario, mem)
        for mode, rows in mem["requests"].items()
        for scenario, row in rows.items()
    )


def thread_expectation(scenario: str, months: int) -> tuple[str, dict[str, int] | None]:
    """(in words, the exact count of each column; None: not budgeted, reported only)."""
    want = dict.fromkeys(THREAD_COLUMNS, 0)
    want["LIST"] = 1
    if scenario == INDEX_TURN:
        return (
            "not budgeted: the segment's GET and conditional PUT, then the refresh: a LIST "
            "per folder, each snapshot's GET, the changed file's GET, a conditional PUT",
            None,
        )
    if scenario == COLD:
        want["GET snapshots"] = months
        return f"1 LIST, {months} snapshot GETs (one per month), no segment GETs", want
    if scenario == COLD_BARE:
        want.update({"GET snapshots": months, "GET": months})
        return (
            f"not budgeted: 1 LIST, {months} snapshot GETs finding none, then {months} "
            "segment GETs (one per month)",
            want,
        )
    if scenario == NEW_TURN:
        want["GET"] = 1
        return "1 LIST, 1 segment GET (one file missing: no snapshot read)", want
    return "1 LIST, no GETs", want


def thread_verdict(row: dict[str, int], months: int, scenario: str) -> bool:
    want = thread_expectation(scenario, months)[1]
    return True if want is None else _exact(row, want)


def growth_verdict(growth: list[dict[str, int]]) -> bool:
    """After each month: a cold query reads one snapshot per month, no segment."""
    return all(thread_verdict(g, g["months"], COLD) for g in growth)
