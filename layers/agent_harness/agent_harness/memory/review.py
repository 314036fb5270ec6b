"""Deciding the review queue's items (memory.review_queue owns the file): a person
approves or rejects what the gate held. ``approve`` writes the line into MEMORY.md and
the day's ledger with the decider's authority (a person vouched for it), or, for a
proposed correction, applies the correction as the decider's; ``reject`` drops it.

A decision has exactly one winner. It claims the item first (a conditional rewrite of
the queue); a second decision while the claim stands, or after the item was decided,
is ``409 review_item_decided`` and writes nothing. The decided item stays in the file
as a tombstone (``decided``, never listed) for ``review_queue.DECIDED_DAYS``, so a late second
decision is told what happened rather than 404. A claim whose decider crashed expires
after ``CLAIM_SECONDS``; an approval run again then finds its ledger section and does
not write the line twice.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Literal

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.clock import iso
from agent_harness.errors import (
    ConflictError,
    NotFoundError,
)
from agent_harness.memory.facts.authority import OPERATOR
from agent_harness.memory.facts.ledger import (
    BY_FIELD,
    Source,
    day_of,
    saved_by,
    source_of,
)
from agent_harness.memory.owner import Memory
from agent_harness.memory.review_queue import (
    CLAIM_SECONDS,
    MAX_PENDING,
    ReviewItem,
    drop_where,
    hold,
    list_review,
    stamp_of,
    update,
)
from agent_harness.paths import ledger_path

if TYPE_CHECKING:
    from agent_harness.ids import User
    from agent_harness.runtime import Runtime

__all__ = [
    "MAX_PENDING",
    "Decision",
    "ReviewItem",
    "ReviewItemDecidedError",
    "decide",
    "drop_where",
    "hold",
    "list_review",
]

metrics = Metrics()

Action = Literal["approve", "reject"]


class ReviewItemDecidedError(ConflictError):
    code = "review_item_decided"


@dataclass(frozen=True)
class Decision:
    id: str
    action: Action
    #: the lines written into MEMORY.md (approve)
    written: list[str]

    def view(self) -> dict[str, object]:
        return asdict(self)


def decide(
    rt: Runtime, user: User, item_id: str, action: Action, *, authority: str = OPERATOR
) -> Decision:
    """Approve (write it as ``authority``'s: the person deciding) or reject one item;
    404 when it was never queued, 409 when another decision has it (see the module)."""
    from agent_harness.memory.facts.corrections import CORRECTION, apply_proposal
    from agent_harness.memory.facts.gate import Candidate, Policy, admit

    token = uuid.uuid4().hex
    now = rt.clock.now()
    claimed: list[ReviewItem] = []

    def claim(items: list[ReviewItem]) -> list[ReviewItem]:
        item = next((i for i in items if i.id == item_id), None)
        if item is None:
            raise NotFoundError(f"no review item {item_id!r}")
        if item.decided:
            done, at = item.decided.split(" ", 1)
            raise ReviewItemDecidedError(
                f"review item {item_id} was decided already ({done}, {at})",
                details={"action": done, "at": at},
            )
        if item.claim and stamp_of(item.claim) > now - timedelta(seconds=CLAIM_SECONDS):
            raise ReviewItemDecidedError(
                f"review item {item_id} is being decided by another request",
                details={"action": item.claim.split(" ")[1], "at": None},
            )
        mine = replace(item, claim=f"{token} {action} {iso(now)}")
        claimed[:] = [mine]
        return [mine if i.id == item_id else i for i in items]

    update(rt, user, claim)
    item = claimed[0]
    written: list[str] = []
    try:
        if action == "approve" and item.reason == CORRECTION:
            # a proposed correction: applied as the person who approved it
            written = apply_proposal(rt, user, item.text, authority)
        elif action == "approve":
            # a person vouched for it: secrets and structure are still seen to
            policy = Policy.of(rt.settings)
            written = admit([Candidate(item.text, authority)], policy, decided=True).lines
            _write_approved(rt, user, item, written, authority)
    except Exception:
        # nothing of it was written: the item is free for the next decision
        update(
            rt, user, lambda items: [replace(i, claim="") if i.id == item_id else i for i in items]
        )
        raise
    stamp = f"{action} {iso(rt.clock.now())}"

    def settle(items: list[ReviewItem]) -> list[ReviewItem]:
        return [replace(i, claim="", decided=stamp) if i.id == item_id else i for i in items]

    update(rt, user, settle)
    metrics.add_metric(f"ReviewItems_{action}", MetricUnit.Count, 1)
    return Decision(id=item_id, action=action, written=written)


def _write_approved(
    rt: Runtime, user: User, item: ReviewItem, lines: list[str], authority: str
) -> None:
    """MEMORY.md and the ledger of today, each once: a retry after a crash finds the
    ledger section that names the item, and MEMORY.md lines already there."""
    if not lines:
        return
    at = rt.clock.now()
    day = day_of(at, rt.settings.zone)
    path = ledger_path(day)
    origin = source_of(item.source)
    source = (
        Source(origin.session_id, origin.turns, via="review").render()
        if origin is not None
        else saved_by(authority, "review")
    ) + f" item={item.id}"
    promoter = BY_FIELD.search(item.source)  # a promotion keeps the member who proposed it
    if promoter is not None:
        source += f" {promoter.group(0)}"
    ledger = rt.store.get(user, path)
    if ledger is not None and f" item={item.id}" in ledger.content:
        return
    Memory(rt, user).add_approved(
        lines, source=source, writer=f"{authority}: review approve {item.id}"
    )
