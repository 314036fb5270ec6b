"""What one request of a turn spends, and which write counts it.

    commit      the turn's spend and its admission's estimate, in the commit's write
    pause       the spend so far, in the pause's write (its resume is admitted anew)
    closed      a forgotten paused turn closed before a new message: held, and counted
                by the write that ends the request
    anything    (a failed model call or tool, the deadline, a store error, a budget
    else        spent mid-turn) ``settle`` counts the calls that returned, in one write

The models of the turn are metered (``meter``), so a call is known the moment it
returns (its query embeddings too: ``queries``); a conversation's history imported with
a new session is admitted under the daily import budget, and given back if the turn
writes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_harness.import_budget import admit_imports, release_imports
from agent_harness.memory.vectors import query_vectors
from agent_harness.meter import Meter, Metered, Spend
from agent_harness.usage import combine, count_unfinished, token_guard, turn_delta

if TYPE_CHECKING:
    from agent_harness.embeddings.queries import QueryVectors
    from agent_harness.ids import User
    from agent_harness.models import Role
    from agent_harness.models.base import ChatModel, Usage
    from agent_harness.ports import AdmissionCheck, ImportCheck, UsageDelta
    from agent_harness.records import PendingTurn
    from agent_harness.runtime import Runtime

__all__ = ["TurnSpend", "pending_spend"]


def pending_spend(pending: PendingTurn) -> Spend:
    """What a paused turn spent before it paused, when its pause did not count it."""
    if pending.spend_counted:
        return Spend()
    compaction = pending.compaction_usage
    compacted = 1 if compaction.input_tokens or compaction.output_tokens else 0
    return Spend(
        {"agent": pending.usage, "compaction": compaction},
        {"agent": pending.model_calls, "compaction": compacted},
    )


class TurnSpend:
    """One request's spend: its admission under the budgets (a write that ends the
    request spends its estimate, once), its metered models, what is held for the next
    write, and a history's import admission."""

    def __init__(self, rt: Runtime, user: User, admission: AdmissionCheck | None) -> None:
        self.rt, self.user = rt, user
        self.admission = admission
        self.admission_spent = False
        #: a turn completed without its own write (closed before a new message)
        self.held: UsageDelta | None = None
        #: under a token limit, a call after the first is refused once the day is spent
        self.meter = Meter(token_guard(rt, user, admission))
        self._imports: ImportCheck | None = None
        self._queries: list[QueryVectors | None] = []

    @property
    def queries(self) -> QueryVectors | None:
        """The request's query vectors (recall's and the memory tools'), metered like its
        models under the ``embedding`` role; None without an embedding model."""
        if not self._queries:

            def spend(usage: Usage) -> None:
                self.meter.add("embedding", usage, guarded=False)

            metered = query_vectors(self.rt, self.user, spend)
            self._queries.append(metered)
        return self._queries[0]

    def model(self, role: Role) -> ChatModel:
        return Metered(self.rt.models.for_role(role), self.meter, role)

    def admit_history(self, turns: int) -> None:
        """A new session's history: an import of ``turns`` (429 over the day's budget)."""
        self._imports = admit_imports(self.rt, self.user, turns, "conversation's history")

    def delta(self, uncounted: Spend, *, completed: bool) -> UsageDelta:
        """What the write that ends this request adds (not yet counted: ``written``)."""
        admission = None if self.admission_spent else self.admission
        spent = self.meter.pending + uncounted
        return combine(
            self.held, turn_delta(self.rt, spent, completed=completed, admission=admission)
        )

    def hold_completed(self, uncounted: Spend) -> None:
        """A turn completed without a write of its own: the next write counts it (it
        was admitted when it began)."""
        delta = turn_delta(self.rt, self.meter.pending + uncounted, completed=True, counted=True)
        self.held = combine(self.held, delta)
        self.meter.take()

    def written(self) -> None:
        """The write of ``delta`` landed: its spend and the admission are counted."""
        self.meter.take()
        self.held = None
        self.admission_spent = True

    def settle(self, *, keep_turn: bool, history_unwritten: bool) -> None:
        """At the end of the request, count what no write counted (the calls of a
        request that failed or ran out of time) and give back what was not used."""
        admission = None if self.admission_spent else self.admission
        count_unfinished(
            self.rt, self.user, self.meter.take(), admission, self.held, keep_turn=keep_turn
        )
        self.held = None
        self.admission_spent = True
        if history_unwritten:
            release_imports(self.rt, self.user, self._imports)
