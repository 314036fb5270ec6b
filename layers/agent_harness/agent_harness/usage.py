"""What each user spends, per day and role: the one owner of how spend is counted.

    agent, compaction   a turn's own calls, metered as each returns (``meter``): added by
                        the write that ends the request, its commit or its pause (no
                        extra request on the hot path), or by one write on the way out
                        of a request that failed after a call (``count_unfinished``)
    memory              each flush and consolidation call: added right after the call,
                        so a job retried after a failure counts what it really spent
    turns               completed turns
    imported            imported turns and memory saves (``import_budget``)

The day is the user's day in ``HARNESS_TIMEZONE``. Counters live in the user's
partition of the state table (``keys.usage_sk``); ``forget`` deletes them with the rest.
CloudWatch gets the same spend as metrics by role, never by user (``models.resilience``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING, NoReturn

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.errors import BudgetExhaustedError, HarnessError, ValidationFailedError
from agent_harness.ports import ROLES, TURN_ROLES, AdmissionCheck, Budget, UsageDelta

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_harness.ids import User
    from agent_harness.meter import Spend
    from agent_harness.models.base import Usage
    from agent_harness.ports import Admission, DayUsage
    from agent_harness.runtime import Runtime

__all__ = [
    "DEFAULT_IMPORTED_TURNS",
    "DEFAULT_MEMORY_TOKENS",
    "MAX_USAGE_DAYS",
    "UsageReport",
    "admission_check",
    "budget_view",
    "budgets_on",
    "combine",
    "count_unfinished",
    "effective_budget",
    "imported_turns_limit",
    "known_override",
    "learn_turn_cost",
    "memory_budget_exhausted",
    "merged_budget",
    "note_override",
    "record_spend",
    "refuse_turn",
    "release_turn",
    "renewal",
    "set_user_budget",
    "stack_budget",
    "today",
    "token_guard",
    "top_report",
    "turn_delta",
    "usage_report",
]

#: the longest window GET /v1/usage answers
MAX_USAGE_DAYS = 90

logger = Logger(child=True)
metrics = Metrics()


def today(rt: Runtime) -> str:
    return rt.clock.now().astimezone(rt.settings.zone).date().isoformat()


def renewal(rt: Runtime) -> datetime:
    """When today's budgets renew: the next midnight in ``HARNESS_TIMEZONE``."""
    now = rt.clock.now().astimezone(rt.settings.zone)
    tomorrow = datetime.combine(now.date() + timedelta(days=1), time(), tzinfo=rt.settings.zone)
    return tomorrow.astimezone(UTC)


#: how long a memory job trusts a user's override as read (``rt.budget_cache``); a turn
#: needs no fresh read: its admission checks the override it used in the same write
OVERRIDE_SECONDS = 60.0


#: memory-model tokens a user may spend a day when an operator sets another daily limit
#: and leaves this one unset: turns, imports and saves drive flushes, so a budget on
#: them caps the memory model too unless the operator says otherwise (0: unlimited)
DEFAULT_MEMORY_TOKENS = 500_000
#: imported turns a day, likewise (one full import of 2,000 messages is about 1,000)
DEFAULT_IMPORTED_TURNS = 1_000


def _limits_set(rt: Runtime) -> bool:
    s = rt.settings
    return bool(
        s.user_daily_tokens
        or s.user_daily_turns
        or s.user_daily_memory_tokens
        or s.user_daily_imported_turns
    )


def stack_budget(rt: Runtime) -> Budget:
    settings = rt.settings
    memory = settings.user_daily_memory_tokens
    if memory is None:
        memory = DEFAULT_MEMORY_TOKENS if _limits_set(rt) else 0
    return Budget(settings.user_daily_tokens, settings.user_daily_turns, memory)


def imported_turns_limit(rt: Runtime) -> int:
    """Imported turns a user may add a day (0: unlimited)."""
    limit = rt.settings.user_daily_imported_turns
    if limit is None:
        return DEFAULT_IMPORTED_TURNS if _limits_set(rt) else 0
    return limit


def effective_budget(rt: Runtime, user: User, *, fresh: bool = False) -> Budget:
    """The user's daily limits: the stack's, each replaced by the operator's override
    where it sets one. Overrides apply on a stack with budgets on (any limit above 0);
    read at most once a minute per container (``fresh``: now)."""
    base = stack_budget(rt)
    if not budgets_on(rt):
        return base
    now = rt.clock.now().timestamp()
    cached = rt.budget_cache.get(user.key)
    if fresh or cached is None or now - cached[0] >= OVERRIDE_SECONDS:
        cached = (now, rt.table.get_budget(user))
        rt.budget_cache[user.key] = cached
    return merged_budget(base, cached[1])


def merged_budget(base: Budget, override: Budget | None) -> Budget:
    """The stack's limits, each replaced by the override's where it sets one."""
    if override is None:
        return base
    return Budget(
        *(
            mine if mine is not None else default
            for mine, default in zip(
                (override.tokens, override.turns, override.memory_tokens),
                (base.tokens, base.turns, base.memory_tokens),
                strict=True,
            )
        )
    )


def set_user_budget(rt: Runtime, user: User, budget: Budget | None) -> dict[str, object]:
    """An operator's override for one user (None removes it); returns ``budget_view``.
    A turn in any container sees it at once; a memory job within ``OVERRIDE_SECONDS``."""
    for value in (budget.tokens, budget.turns, budget.memory_tokens) if budget else ():
        if value is not None and (isinstance(value, bool) or value < 0):
            raise ValidationFailedError("budget limits are whole numbers, 0 or more")
    empty = budget is not None and budget == Budget()
    rt.table.set_budget(user, None if empty else budget)
    rt.budget_cache.pop(user.key, None)
    return budget_view(rt, user)


def budget_view(rt: Runtime, user: User) -> dict[str, object]:
    """The stack's limits, the user's override and what applies (0: unlimited)."""
    base = stack_budget(rt)
    override = rt.table.get_budget(user)  # the one read: effective is derived from it
    on = budgets_on(rt)
    if on:
        note_override(rt, user, override)
    return {
        "user_id": user.id,
        "stack": asdict(base),
        "override": asdict(override) if override else None,
        "effective": asdict(merged_budget(base, override) if on else base),
        "budgets_on": on,
    }


def memory_budget_exhausted(rt: Runtime, user: User) -> bool:
    """Has the user spent today's ``HARNESS_USER_DAILY_MEMORY_TOKENS`` (memory-model
    and embedding tokens)? (One read when a
    budget is set; a job checks before its first model call, so a job that starts under
    the budget may end above it by what that one job spends.)"""
    limit = effective_budget(rt, user).memory_tokens or 0
    if limit <= 0:
        return False
    day = today(rt)
    days = rt.table.usage_days(user, day, day)
    spent = sum(sum(d.tokens["memory"]) + sum(d.tokens["embedding"]) for d in days)
    return spent >= limit


#: what a running turn reserves of a token budget, at least (before this container has
#: seen the user's turns cost anything)
MIN_ESTIMATE = 1_000
#: a refusal because the user's own running turns hold the rest: ask again this soon
HELD_RETRY_SECONDS = 5


def budgets_on(rt: Runtime) -> bool:
    """Does the stack set any daily limit? (Overrides apply only then.)"""
    return _limits_set(rt)


def known_override(rt: Runtime, user: User) -> Budget | None:
    """The user's override as this container last saw it, however old (None: none seen).
    A turn's admission checks it in its own write, so it needs no fresh read."""
    cached = rt.budget_cache.get(user.key)
    return cached[1] if cached else None


def note_override(rt: Runtime, user: User, override: Budget | None) -> None:
    """Remember the override a refused admission found stored."""
    rt.budget_cache[user.key] = (rt.clock.now().timestamp(), override)


def admission_check(
    rt: Runtime, user: User, *, counts_a_turn: bool, override: Budget | None
) -> AdmissionCheck:
    """What a turn's lease write checks: the limits under ``override`` (which the write
    verifies is still the stored one) and, under a token limit, the reservation. A
    resumed turn (tool results) is checked against the tokens, not counted again."""
    limits = merged_budget(stack_budget(rt), override)
    token_limit, turn_limit = limits.tokens or 0, limits.turns or 0
    estimate = max(MIN_ESTIMATE, rt.turn_costs.get(user.key, 0)) if token_limit else 0
    return AdmissionCheck(today(rt), estimate, counts_a_turn, turn_limit, token_limit, override)


def refuse_turn(rt: Runtime, user: User, found: Admission, check: AdmissionCheck) -> NoReturn:
    """Raise the ``BudgetExhaustedError`` for an admission refused with the day's counts
    ``found``. The turn limit is exact; a token budget admits while committed tokens plus
    the estimates of the user's running turns are under it, so concurrent turns at the
    edge overspend by at most the last one admitted (if a turn costs about the average).
    Refused while only running turns hold the rest: ask again in a few seconds."""
    if found.turns > 0 and found.turn_tokens:  # the user's average turn, for estimates
        rt.turn_costs[user.key] = found.turn_tokens // found.turns
    metrics.add_metric("TurnsRefusedOverBudget", MetricUnit.Count, 1)  # never per user
    spent_turns = check.count_turn and 0 < check.turn_limit <= found.turns
    spent_tokens = 0 < check.token_limit <= found.turn_tokens
    if spent_turns or spent_tokens:
        wait = max(1, int((renewal(rt) - rt.clock.now()).total_seconds()) + 1)
        what = "turns" if spent_turns else "tokens"
        raise BudgetExhaustedError(
            f"today's budget of {what} is spent; it renews at midnight ({rt.settings.timezone})",
            retry_after=wait,
        )
    raise BudgetExhaustedError(
        "the rest of today's token budget is held by this user's running turns",
        retry_after=HELD_RETRY_SECONDS,
        retryable=True,
    )


def learn_turn_cost(rt: Runtime, user: User, delta: UsageDelta) -> None:
    """Keep a moving average (each new turn weighs half) of what the user's committed
    turns cost in this container, for the next admission's reservation."""
    if delta.turns > 0:
        cost = delta.turn_tokens // delta.turns
        before = rt.turn_costs.get(user.key)
        rt.turn_costs[user.key] = cost if before is None else (before + cost) // 2


def release_turn(rt: Runtime, user: User, admission: AdmissionCheck, *, keep_turn: bool) -> None:
    """Give back what a turn reserved when it ends without a commit that spends it:
    failed (the turn too) or paused (``keep_turn``: its resume is not a new turn)."""
    try:
        rt.table.release_admission(
            user,
            admission.day,
            estimate=admission.estimate,
            count_turn=admission.count_turn and not keep_turn,
        )
    except HarnessError as exc:  # fail-safe: a lost release only lowers today's budget
        logger.warning("budget reservation not released", extra={"error": str(exc)})


def turn_delta(
    rt: Runtime,
    spend: Spend,
    *,
    completed: bool,
    admission: AdmissionCheck | None = None,
    counted: bool = False,
) -> UsageDelta:
    """What a request's own calls spent (its meter's ``spend``), for the write that ends
    it: its ``admission`` (this call's, not yet spent) reserved an estimate that the real
    tokens replace; a ``completed`` turn neither admitted now nor ``counted`` when it
    began (a paused turn was) is counted now."""
    return UsageDelta(
        day=today(rt),
        tokens={r: (u.input_tokens, u.output_tokens) for r, u in spend.tokens.items()},
        model_calls=dict(spend.calls),
        turns=1 if completed else 0,
        released=admission.estimate if admission else 0,
        unadmitted=1 if completed and admission is None and not counted else 0,
    )


def count_unfinished(
    rt: Runtime,
    user: User,
    spend: Spend,
    admission: AdmissionCheck | None,
    held: UsageDelta | None,
    *,
    keep_turn: bool = False,
) -> None:
    """A request that ends without the write that counts it (failed, out of time, a
    budget spent mid-turn): the calls it made, and a turn it completed without a write of
    its own (``held``), are counted now, in one write. A turn that
    called the model keeps its admission (it did the work a turn is counted for);
    one that made no call gives it back."""
    if spend.empty() and held is None:
        if admission is not None:
            release_turn(rt, user, admission, keep_turn=keep_turn)
        return
    delta = combine(held, turn_delta(rt, spend, completed=False, admission=admission))
    try:
        rt.table.add_usage(user, delta)
    except HarnessError as exc:  # the original error matters; the log keeps the spend
        logger.warning("usage not counted", extra={"tokens": delta.turn_tokens, "error": str(exc)})


def token_guard(
    rt: Runtime, user: User, admission: AdmissionCheck | None
) -> Callable[[int], None] | None:
    """Before each model call of a turn after its first: refuse it (429) once the day's
    counted agent and compaction tokens plus this turn's reach the token limit, so one
    turn overspends by at most its last call. The day is read once, at the turn's
    second call (one Query, only under a token limit)."""
    if admission is None or admission.token_limit <= 0:
        return None
    limit, day = admission.token_limit, admission.day
    counted: list[int] = []

    def guard(spent: int) -> None:
        if not counted:
            found = rt.table.usage_days(user, day, day)
            counted.append(sum(sum(d.tokens[r]) for d in found for r in TURN_ROLES))
        if counted[0] + spent >= limit:
            metrics.add_metric("TurnsStoppedOverBudget", MetricUnit.Count, 1)
            wait = max(1, int((renewal(rt) - rt.clock.now()).total_seconds()) + 1)
            raise BudgetExhaustedError(
                "today's budget of tokens was spent during this turn; it stopped before "
                f"its next model call. It renews at midnight ({rt.settings.timezone})",
                retry_after=wait,
            )

    return guard


def combine(first: UsageDelta | None, second: UsageDelta) -> UsageDelta:
    """Two deltas as one, on the later one's day."""
    if first is None:
        return second
    roles = set(first.tokens) | set(second.tokens)
    return UsageDelta(
        day=second.day,
        tokens={r: _add(first.tokens.get(r, (0, 0)), second.tokens.get(r, (0, 0))) for r in roles},
        model_calls={
            r: first.model_calls.get(r, 0) + second.model_calls.get(r, 0)
            for r in set(first.model_calls) | set(second.model_calls)
        },
        turns=first.turns + second.turns,
        released=first.released + second.released,
        unadmitted=first.unadmitted + second.unadmitted,
    )


def _add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return a[0] + b[0], a[1] + b[1]


def record_spend(rt: Runtime, user: User, role: str, usage: Usage) -> None:
    """Count one model call of a background job. Best effort: the call has happened and
    its work must not be lost because a counter could not be written."""
    delta = UsageDelta(
        day=today(rt),
        tokens={role: (usage.input_tokens, usage.output_tokens)},
        model_calls={role: 1},
    )
    try:
        rt.table.add_usage(user, delta)
    except HarnessError as exc:
        logger.warning("usage not counted", extra={"role": role, "error": str(exc)})


@dataclass(frozen=True)
class UsageReport:
    first_day: str
    last_day: str
    days: list[DayUsage]

    def series(self) -> dict[str, list[tuple[str, int]]]:
        """Tokens (input + output) per role, one point per day with spend: for charts."""
        return {role: [(d.day, sum(d.tokens[role])) for d in self.days] for role in ROLES}

    def view(self) -> dict[str, object]:
        """The JSON of GET /v1/usage (and the CLI's ``usage``): every day of the window,
        days without spend included, oldest first, and the window's totals."""
        by_day = {d.day: d for d in self.days}
        days = []
        totals = {role: [0, 0] for role in ROLES}
        calls = dict.fromkeys(ROLES, 0)
        turns = imported = 0
        day = _parse(self.first_day)
        while day.isoformat() <= self.last_day:
            usage = by_day.get(day.isoformat())
            days.append(_day_view(day.isoformat(), usage))
            if usage:
                for role in ROLES:
                    totals[role][0] += usage.tokens[role][0]
                    totals[role][1] += usage.tokens[role][1]
                    calls[role] += usage.model_calls[role]
                turns += usage.turns
                imported += usage.imported
            day += timedelta(days=1)
        return {
            "first_day": self.first_day,
            "last_day": self.last_day,
            "days": days,
            "totals": {
                "tokens": sum(i + o for i, o in totals.values()),
                "by_role": {r: _tokens(totals[r][0], totals[r][1], calls[r]) for r in ROLES},
                "turns": turns,
                "imported_turns": imported,
                "model_calls": sum(calls.values()),
            },
        }


def usage_report(rt: Runtime, user: User, days: int) -> UsageReport:
    """The last ``days`` days of the user's spend, today included (one Query)."""
    if not 1 <= days <= MAX_USAGE_DAYS:
        raise ValidationFailedError(f"days must be between 1 and {MAX_USAGE_DAYS}")
    last = _parse(today(rt))
    first = last - timedelta(days=days - 1)
    found = rt.table.usage_days(user, first.isoformat(), last.isoformat())
    return UsageReport(first.isoformat(), last.isoformat(), found)


#: the most users ``top`` lists
MAX_TOP = 100


def top_report(rt: Runtime, day: str | None, limit: int) -> dict[str, object]:
    """The heaviest users of ``day`` (default today) by tokens, for an operator."""
    from agent_harness.ids import User, validate_day

    day = validate_day(day) if day else today(rt)
    if not 1 <= limit <= MAX_TOP:
        raise ValidationFailedError(f"limit must be between 1 and {MAX_TOP}")
    rows = []
    for key, usage in rt.table.top_users(day, limit):
        rows.append({"user": User.from_key(key).id, **_day_view(day, usage)})
    return {"day": day, "users": rows}


def _day_view(day: str, usage: DayUsage | None) -> dict[str, object]:
    tokens = usage.tokens if usage else dict.fromkeys(ROLES, (0, 0))
    calls = usage.model_calls if usage else dict.fromkeys(ROLES, 0)
    return {
        "day": day,
        "tokens": usage.total_tokens if usage else 0,
        "by_role": {r: _tokens(*tokens[r], calls[r]) for r in ROLES},
        "turns": usage.turns if usage else 0,
        "imported_turns": usage.imported if usage else 0,
        "model_calls": sum(calls.values()),
    }


def _tokens(input_tokens: int, output_tokens: int, calls: int) -> dict[str, int]:
    return {"input_tokens": input_tokens, "output_tokens": output_tokens, "model_calls": calls}


def _parse(day: str) -> date:
    return date.fromisoformat(day)
