"""Imports and memory saves under the daily budgets: writes that call no model on their
way in, but whose flushes and consolidations do.

    unit            each imported turn (a turn begins at each user message: POST /import,
                    each MCP record_conversation, a chat-completions history) and each
                    memory save (HTTP, MCP) counts one imported turn
    admitted while  the day's turns and tokens are under their limits, and the imported
                    turns stay within HARNESS_USER_DAILY_IMPORTED_TURNS (one conditional
                    write, before anything else is written)
    refused         429 budget_exhausted, nothing written; an import larger than the
                    whole daily cap: 413
    their flushes   memory tokens, under HARNESS_USER_DAILY_MEMORY_TOKENS (on whenever
                    another limit is set, unless the operator sets it to 0)

An import that fails after its admission gives its turns back. Without budgets nothing
is checked and nothing is written here.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.errors import BudgetExhaustedError, HarnessError, PayloadTooLargeError
from agent_harness.ports import ImportCheck
from agent_harness.usage import budgets_on, effective_budget, imported_turns_limit, renewal, today

if TYPE_CHECKING:
    from collections.abc import Iterator

    from agent_harness.ids import User
    from agent_harness.runtime import Runtime

__all__ = ["admit_imports", "imports_admitted", "release_imports"]

logger = Logger(child=True)
metrics = Metrics()


@contextmanager
def imports_admitted(rt: Runtime, user: User, turns: int, what: str = "import") -> Iterator[None]:
    """Admit ``turns`` imported turns for the block, which writes the import; a block
    that raises gives them back."""
    check = admit_imports(rt, user, turns, what)
    try:
        yield
    except BaseException:
        release_imports(rt, user, check)
        raise


def release_imports(rt: Runtime, user: User, check: ImportCheck | None) -> None:
    """Give back the turns of an admitted import that wrote nothing."""
    if check is None:
        return
    try:
        rt.table.release_imports(user, check.day, check.turns)
    except HarnessError as exc:  # fail-safe: a lost release only lowers today's cap
        logger.warning("imported turns not given back", extra={"error": str(exc)})


def admit_imports(rt: Runtime, user: User, turns: int, what: str = "import") -> ImportCheck | None:
    """Admit ``turns`` imported turns (429 or 413 when refused); None: nothing to check."""
    if not budgets_on(rt) or turns <= 0:
        return None
    limits = effective_budget(rt, user)
    cap = imported_turns_limit(rt)
    if 0 < cap < turns:
        raise PayloadTooLargeError(
            f"this {what} has {turns} turns; at most {cap} can be imported a day"
        )
    check = ImportCheck(today(rt), turns, limits.turns or 0, limits.tokens or 0, cap)
    found = rt.table.admit_imports(user, check)
    if found is None:
        return check
    metrics.add_metric("ImportsRefusedOverBudget", MetricUnit.Count, 1)  # never per user
    if 0 < check.turn_limit <= found.turns:
        spent = "turns"
    elif 0 < check.token_limit <= found.reserved:
        spent = "tokens"
    else:
        spent = "imported turns"
    wait = max(1, int((renewal(rt) - rt.clock.now()).total_seconds()) + 1)
    raise BudgetExhaustedError(
        f"today's budget of {spent} is spent, so this {what} is refused; it renews at "
        f"midnight ({rt.settings.timezone})",
        retry_after=wait,
    )
