"""Consolidation (layer 2): merge new ledger content into MEMORY.md.

    schedule tick, POST /v1/memory/consolidate (memory.jobs.schedule)
    ConsolidationJob --consolidate-->
        user lease (DynamoDB, conditional)                   one run per user at a time
        LIST memory/ ; new = ledger[consumed:] per day       the per-file watermark
        the lifecycle of every ledger (memory.engine.truth)  LIST/GETs, cached
        facts whose ground changed re-checked               LLM, if any (memory.jobs.recheck)
        nothing new -> done, no model call (MEMORY.md lines restating a retired fact
                       are still dropped, deterministically)
        memory model: consolidation prompt, the new entries    LLM (memory role,
                       as current facts only, and the MEMORY.md  memory.jobs.calls:
                       lines no longer true named for removal    bounded, temperature 0)
        the answer repaired (echoed block tags, ledger headers, ids, repeated lines)
                       and checked; a broken format gets one corrective call
        the answer checked: authorities, the gate, precedence  memory.facts.precedence
        then no line restating a retired fact (a person's own  memory.engine.truth
                       kept unless the user or an operator retired it)
        PUT MEMORY.md If-Match (412: a human edited it -> re-merge onto their version),
                       then the gate's held lines queued       memory.owner.Memory.merge
        the second look: current facts the merge left out,     LLM, if any
                       asked about beside the new facts;         (memory.jobs.second_look)
                       those a new fact ended are
                       retracted on its day, then their cascade
                       re-checked and MEMORY.md's stale lines dropped
        retention: consolidated ledgers past the retention move to memory/archive/
        ranked-index snapshots of every month brought up to date  derived, best effort
        watermark := bytes read, only after the write; due mark cleared unless re-marked
        the next expiry (the soonest until of a current fact) marked for the tick

Appends that land while a run is going are past the bytes it read, so the next run
gets them. A failed model call raises before anything is written (the queue retries
it). An answer still malformed after its corrective call writes nothing either, but is
not retried blind: the run is recorded as failed on the user's state (its error, the
failures in a row, the retry time: GET /v1/usage, POST /v1/memory/consolidate and the
console show it; ConsolidationFailures counts it) and the schedule retries after a
doubling backoff (memory.jobs.schedule.retry_after).
An empty MEMORY.md with an old watermark is rebuilt from the newest ledgers, bounded
by ``consolidation_max_input_bytes`` (the reference lost history there:
docs/design.md#blank-memory-loses-history).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.clock import epoch_ms, iso
from agent_harness.errors import (
    ConflictError,
    HarnessError,
    ModelOutputError,
    PreconditionFailedError,
)
from agent_harness.ids import User
from agent_harness.memory.engine.corpus import load_ledgers, refresh_snapshots
from agent_harness.memory.engine.truth import Truth, truth_of
from agent_harness.memory.facts.authority import fact_line, parse_fact
from agent_harness.memory.facts.gate import Policy
from agent_harness.memory.facts.ledger import day_of
from agent_harness.memory.facts.precedence import merge_checked
from agent_harness.memory.files import ledger_files
from agent_harness.memory.jobs.calls import ask
from agent_harness.memory.jobs.formats import consolidation_request, memory_text
from agent_harness.memory.jobs.maintenance import archive_ledgers
from agent_harness.memory.jobs.prompts import (
    clean_memory_document,
    consolidation_messages,
)
from agent_harness.memory.jobs.recheck import recheck
from agent_harness.memory.jobs.schedule import next_expiry, parse_time, retry_after
from agent_harness.memory.jobs.second_look import second_look
from agent_harness.memory.owner import Memory
from agent_harness.memory.vectors import refresh_best_effort
from agent_harness.paths import MEMORY_FILE, ledger_path
from agent_harness.ports import UserState
from agent_harness.usage import memory_budget_exhausted

if TYPE_CHECKING:
    from agent_harness.jobs import ConsolidationJob
    from agent_harness.ports import StoredObject
    from agent_harness.runtime import Runtime

__all__ = ["ConsolidationOutcome", "consolidate", "current_entries"]

logger = Logger(child=True)
metrics = Metrics()

Status = Literal[
    "consolidated", "unchanged", "nothing_new", "busy", "too_soon", "over_budget", "failed"
]
WRITE_ATTEMPTS = 3


@dataclass
class ConsolidationOutcome:
    status: Status
    days: list[str] = field(default_factory=list)
    bytes_read: int = 0
    model_calls: int = 0
    archived: list[str] = field(default_factory=list)
    #: why a ``failed`` run failed (kept on the user's state too)
    error: str | None = None


@dataclass(frozen=True)
class _Pending:
    day: str
    start: int
    size: int


def consolidate(rt: Runtime, job: ConsolidationJob) -> ConsolidationOutcome:
    """Run one user's consolidation; raises on retryable failures."""
    metrics.add_metric("ConsolidationJobs", MetricUnit.Count, 1)
    user = User.for_scope(job.scope) if job.scope else User.from_id(job.user_id)
    owner = rt.new_id()
    now = rt.clock.now()
    lease_ms = rt.settings.consolidation_lease_seconds * 1000
    try:
        state = rt.table.acquire_consolidation_lease(user, owner, epoch_ms(now), lease_ms)
    except ConflictError:
        return ConsolidationOutcome("busy")
    finished = False
    try:
        outcome = _run(rt, user, owner, state, job.force)
        finished = True
        return outcome
    except ModelOutputError as exc:
        # the same request would get the same answer: no blind retry by the queue. The
        # failure is kept where people look (GET /v1/usage, POST /v1/memory/consolidate,
        # the console) and the schedule tries again after a backoff
        finished = True
        _failed(rt, user, owner, state, exc)
        return ConsolidationOutcome("failed", error=str(exc))
    finally:
        if not finished:
            # the queue retries it; the template's alarm watches this count
            metrics.add_metric("ConsolidationFailures", MetricUnit.Count, 1)
            rt.table.release_consolidation_lease(user, owner)


def _failed(rt: Runtime, user: User, owner: str, state: UserState, exc: Exception) -> None:
    metrics.add_metric("ConsolidationFailures", MetricUnit.Count, 1)
    metrics.add_metric("ConsolidationFormatFailures", MetricUnit.Count, 1)
    now = rt.clock.now()
    retry = now + retry_after(state.failures + 1)
    logger.warning(
        "consolidation failed; the schedule tries again",
        extra={"error": str(exc), "failures": state.failures + 1, "retry_at": iso(retry)},
    )
    try:
        rt.table.fail_consolidation(
            user, owner, str(exc), iso(now), iso(retry), rt.settings.due_shards
        )
    except HarnessError:
        logger.exception("recording the failed consolidation failed")
        rt.table.release_consolidation_lease(user, owner)


def _archive(rt: Runtime, user: User, sizes: dict[str, int], consumed: dict[str, int]) -> list[str]:
    """Retention, under the lease and after MEMORY.md is written, then every ranked-index
    snapshot brought up to date (archived days moved between them). Best effort: a
    failure is logged and the days move on a later run; the watermark forgets moved days."""
    try:
        moved = archive_ledgers(rt, user, sizes, consumed)
    except HarnessError:
        logger.exception("archiving old ledgers failed; they stay for the next run")
        moved = []
    refresh_snapshots(rt, user)
    refresh_best_effort(rt, user)
    for day in moved:
        consumed.pop(day, None)
    return moved


def _pending(sizes: dict[str, int], consumed: dict[str, int], rebuild: bool) -> list[_Pending]:
    """The ledger bytes past the watermark, per day (all of them for a rebuild)."""
    pending: list[_Pending] = []
    for day in sorted(sizes):
        done = 0 if rebuild else consumed.get(day, 0)
        if sizes[day] < done:  # rewritten by hand: read it again from the start
            done = 0
        if sizes[day] > done:
            pending.append(_Pending(day, done, sizes[day]))
    if rebuild:  # newest first, so the byte budget keeps the most recent history
        pending.reverse()
    return pending


def _schedule_expiry(rt: Runtime, user: User, truth: Truth) -> None:
    """Mark when the soonest current fact expires (best effort: a lost mark leaves the
    line to the user's next consolidation; readers drop it at once anyway)."""
    settings = rt.settings
    try:
        due = next_expiry(truth, day_of(rt.clock.now(), settings.zone))
        if due is None:
            rt.table.clear_expiry_due(user)
            return
        at = datetime.fromisoformat(due).replace(tzinfo=settings.zone)
        rt.table.mark_expiry_due(user, iso(at), settings.due_shards)
    except HarnessError:
        logger.exception("scheduling the next expiry failed")


def _truth(rt: Runtime, user: User) -> Truth:
    """The lifecycle of every ledger today (the search engine's cache, LIST and GETs)."""
    files = load_ledgers(rt, user, rt.search_cache, rt.listings)
    return truth_of(files, day_of(rt.clock.now(), rt.settings.zone))


def current_entries(day: str, text: str, truth: Truth) -> str:
    """New ledger bytes of ``day`` as the consolidation merges them: current facts only,
    without their lifecycle marks (MEMORY.md keeps facts, the ledgers their story);
    retired facts and records (retractions, confirmations) left out."""
    path = ledger_path(day)
    kept = []
    for line in text.splitlines():
        fact = truth.fact(path, line)
        if fact is None:
            kept.append(line)
        elif not fact.is_record and truth.status(fact).state == "current":
            parsed = parse_fact(line)
            kept.append(fact_line(parsed.authority if parsed else None, fact.text))
    return "\n".join(kept)


def _drop_stale(rt: Runtime, user: User, current: StoredObject | None, truth: Truth) -> None:
    """MEMORY.md without the lines that restate a retired fact, when it has any: no model
    call (an expired trip needs none). A person's edit meanwhile wins: a 412 leaves it
    for the next run."""
    if current is None:
        return
    document = truth.current_memory(current.content)
    if document == current.content:
        return
    try:
        Memory(rt, user).merge(document, current=current, writer="consolidation")
    except PreconditionFailedError:
        logger.info("MEMORY.md changed while dropping retired facts; the next run does it")
    metrics.add_metric("RetiredFactsDropped", MetricUnit.Count, 1)


def _run(
    rt: Runtime, user: User, owner: str, state: UserState, force: bool
) -> ConsolidationOutcome:
    settings = rt.settings
    now = rt.clock.now()
    last = parse_time(state.last_consolidated_at)
    gap = timedelta(seconds=settings.consolidation_min_gap_seconds)
    if not force and last is not None and now - last < gap:
        rt.table.release_consolidation_lease(user, owner)
        return ConsolidationOutcome("too_soon")
    if memory_budget_exhausted(rt, user):
        # the due mark stays: a tick after the budget renews runs it
        rt.table.release_consolidation_lease(user, owner)
        metrics.add_metric("MemoryBudgetExhausted", MetricUnit.Count, 1)
        return ConsolidationOutcome("over_budget")

    sizes = {day: info.size for day, info in ledger_files(rt, user).items()}
    current = rt.store.get(user, MEMORY_FILE)
    current_text = current.content if current else ""
    rebuild = not current_text.strip() and any(state.consumed.values())

    # the watermark keeps only days that still exist (archived days drop out)
    consumed = {day: n for day, n in state.consumed.items() if day in sizes}
    pending = _pending(sizes, consumed, rebuild)

    # nothing here and nothing ever was (e.g. the user was forgotten after this job was
    # queued): leave no item behind
    never_had_memory = current is None and not sizes and state == UserState()
    if never_had_memory and rt.table.abandon_consolidation(user, owner):
        return ConsolidationOutcome("nothing_new")
    truth = _truth(rt, user)
    if recheck(rt, user, truth):  # the cascade: facts whose ground changed, re-judged
        truth = _truth(rt, user)
        sizes = {day: info.size for day, info in ledger_files(rt, user).items()}
        pending = _pending(sizes, consumed, rebuild)
    if not pending:
        _drop_stale(rt, user, current, truth)
        _archive(rt, user, sizes, consumed)
        rt.table.complete_consolidation(user, owner, consumed, state.due_seq, iso(now))
        _schedule_expiry(rt, user, truth)
        return ConsolidationOutcome("nothing_new")

    parts: list[tuple[str, str]] = []
    budget = settings.consolidation_max_input_bytes
    for item in pending:
        if budget <= 0:
            break
        obj = rt.store.get_from(user, ledger_path(item.day), item.start)
        if obj is None or not obj.content:
            continue
        data = obj.content.encode("utf-8")
        if len(data) > budget:
            if parts and not rebuild:
                break  # the rest waits for the next run
            cut = data[:budget].rfind(b"\n") + 1 or budget
            data = data[:cut]
        parts.append((item.day, data.decode("utf-8", errors="ignore")))
        consumed[item.day] = item.start + len(data)
        budget -= len(data)
    if rebuild:
        parts.sort()
        for day, size in sizes.items():
            consumed[day] = max(consumed.get(day, 0), size)

    outcome = ConsolidationOutcome(
        "consolidated", days=[day for day, _ in parts], bytes_read=sum(len(t) for _, t in parts)
    )
    entries = "\n\n".join(
        f"### {day}\n{kept}"
        for day, text in parts
        if (kept := current_entries(day, text, truth).strip())
    )
    if not entries:
        outcome.status = "nothing_new"  # only whitespace or retired facts: no model call
        _drop_stale(rt, user, current, truth)
    else:
        model = rt.models.for_role("memory")
        for attempt in range(WRITE_ATTEMPTS):
            # reject runaway answers, yet never below what a person already wrote, and
            # never over MEMORY.md's hard cap (a consolidation is how a full one shrinks)
            cap = settings.max_memory_chars
            max_chars = min(
                cap, max(settings.consolidation_max_tokens * 8, len(current_text) * 5 // 4)
            )
            messages = consolidation_messages(
                current_text,
                entries,
                max_tokens=settings.consolidation_max_tokens,
                since=state.last_consolidated_at,
                rebuild=rebuild,
                prompt=settings.consolidation_prompt,
                retired=[current_text.splitlines()[n] for n in truth.stale(current_text)],
            )
            repairs: dict[str, int] = {}

            def parse(content: str, limit: int = max_chars, tally: dict[str, int] = repairs) -> str:
                text = memory_text(content)
                return clean_memory_document(text, max_chars=limit, counts=tally)

            # about 4 characters a token: room for the longest answer accepted
            request, expected = consolidation_request(rt, messages, max_chars // 3 + 64)
            answer = ask(rt, user, request, parse, expected=expected)
            outcome.model_calls += answer.calls
            proposed = answer.value
            for repair, count in repairs.items():
                if count:
                    metrics.add_metric(f"ConsolidationCheck_{repair}", MetricUnit.Count, count)
            document, admitted = merge_checked(
                proposed,
                current=current_text,
                entries=entries,
                policy=Policy.of(settings),
            )
            for check in (
                "unsupported_dropped",
                "contradictions_dropped",
                "rewordings_dropped",
                "protected_restored",
            ):
                if admitted.counts[check]:
                    metrics.add_metric(
                        f"ConsolidationCheck_{check}", MetricUnit.Count, admitted.counts[check]
                    )
            # whatever the model kept, and precedence restored: no retired fact stays
            document = truth.current_memory(document)
            if not document.strip():
                raise ModelOutputError("nothing of the consolidation answer passed the gate")
            if len(document) > cap:  # the facts precedence kept pushed it over
                raise ModelOutputError(
                    f"the consolidated MEMORY.md is {len(document):,} characters, over its "
                    f"{cap:,} limit"
                )
            try:
                # the owner's merge: MEMORY.md (unless unchanged), then what the gate
                # held queued; a 412 holds nothing (judged again on the next answer)
                written = Memory(rt, user).merge(
                    document,
                    current=current,
                    writer=f"consolidation model={answer.model}",
                    held=admitted.held,
                    source=f"consolidation model={model.name}",
                )
                if not written:
                    outcome.status = "unchanged"
                break
            except PreconditionFailedError:
                if attempt == WRITE_ATTEMPTS - 1:
                    raise
                # someone (a person, memory_save) changed MEMORY.md: merge onto theirs
                current = rt.store.get(user, MEMORY_FILE)
                current_text = current.content if current else ""

        # what the model left out (precedence may have put a person's line back) and a
        # new fact ended: retired on the change's day, and its cascade re-checked
        if outcome.status == "consolidated" and second_look(
            rt, user, truth, (current_text, proposed), parts
        ):
            truth = _truth(rt, user)
            if recheck(rt, user, truth):
                truth = _truth(rt, user)
            _drop_stale(rt, user, rt.store.get(user, MEMORY_FILE), truth)

    outcome.archived = _archive(rt, user, sizes, consumed)
    rt.table.complete_consolidation(user, owner, consumed, state.due_seq, iso(rt.clock.now()))
    _schedule_expiry(rt, user, truth)
    metrics.add_metric("ModelCallsConsolidation", MetricUnit.Count, outcome.model_calls)
    metrics.add_metric("LedgerBytesConsolidated", MetricUnit.Count, outcome.bytes_read)
    logger.info(
        "consolidated",
        extra={"status": outcome.status, "days": outcome.days, "bytes": outcome.bytes_read},
    )
    return outcome
