"""The review queue's file: what the gate keeps out of memory, until a person decides.

    review/queue.jsonl      one JSON object per held line, oldest first (CAS rewrite)

A line lands here when it must not be written as a plain fact (memory.facts.gate): an
instruction from below the user, or what a tool result or the agent claims about the
user's payment details, accounts, credentials, contacts or identity; a promotion for a
scope's maintainers; a correction an exposed turn proposed (agent.exposure). Nothing
here is injected or searchable: the queue is outside ``memory/``. This module owns the
file: holding items, listing them, and the conditional rewrite every change makes;
deciding an item is memory.review's.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.clock import iso, parse_iso
from agent_harness.errors import PreconditionFailedError, StoreError
from agent_harness.memory.owner.writes import Writes
from agent_harness.paths import REVIEW_FILE

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_harness.ids import User
    from agent_harness.memory.facts.gate import Held
    from agent_harness.runtime import Runtime

__all__ = [
    "ATTEMPTS",
    "CLAIM_SECONDS",
    "DECIDED_DAYS",
    "MAX_PENDING",
    "ReviewItem",
    "drop_where",
    "hold",
    "list_review",
    "stamp_of",
    "update",
]

logger = Logger(child=True)
metrics = Metrics()

#: the queue keeps the newest this many items (a flood of held lines pushes out the
#: oldest, which were never memory anyway)
MAX_PENDING = 500
ATTEMPTS = 8
#: a claim on an item older than this is a crashed decider's: another may decide
CLAIM_SECONDS = 300
#: how long a decided item's tombstone answers a late decision with 409
DECIDED_DAYS = 30


@dataclass(frozen=True)
class ReviewItem:
    id: str
    text: str
    #: who the words came from (``tool:orders``, ``assistant``, ``save:agent``, ...)
    authority: str
    #: why it was held: ``instruction``, or a claim's subject (``payment``, ``credential``,
    #: ``contact``, ``identity``)
    reason: str
    #: the ``> source:`` fields of the write it came from
    source: str
    #: which writer held it: flush, memory_save, memory_put, rollback, consolidation
    writer: str
    day: str
    created_at: str
    #: "<token> <action> <at>" while a decision is being written (never shown)
    claim: str = ""
    #: "<action> <at>" once decided: a tombstone, never listed (never shown)
    decided: str = ""

    def view(self) -> dict[str, str]:
        return {k: v for k, v in asdict(self).items() if k not in _INTERNAL}

    @property
    def pending(self) -> bool:
        return not self.decided


_INTERNAL = ("claim", "decided")
_FIELDS = tuple(f.name for f in fields(ReviewItem) if f.name not in _INTERNAL)


def _item_id(held: Held, source: str) -> str:
    digest = hashlib.sha256(f"{held.authority}\n{held.text}\n{source}".encode()).hexdigest()
    return "r" + digest[:15]


def _parse(content: str) -> list[ReviewItem]:
    """The queue's items; a line that is not one (edited by hand) is skipped, not fatal."""
    items = []
    for line in content.splitlines():
        try:
            data = json.loads(line)
            extra = {k: str(data.get(k) or "") for k in _INTERNAL}
            items.append(ReviewItem(**{k: str(data[k]) for k in _FIELDS}, **extra))
        except (ValueError, TypeError, KeyError):
            if line.strip():
                logger.warning("skipping a review line that is not an item")
    return items


def _render(items: list[ReviewItem]) -> str:
    def stored(item: ReviewItem) -> dict[str, str]:
        return {k: v for k, v in asdict(item).items() if v or k not in _INTERNAL}

    return "".join(json.dumps(stored(i), ensure_ascii=False) + "\n" for i in items)


def update(
    rt: Runtime, user: User, change: Callable[[list[ReviewItem]], list[ReviewItem] | None]
) -> list[ReviewItem]:
    """Rewrite the queue with ``change(items)`` (None: leave it), If-Match on what was
    read, again after a lost race. Returns the items as stored."""
    for _ in range(ATTEMPTS):
        current = rt.store.get(user, REVIEW_FILE)
        items = _parse(current.content) if current else []
        changed = change(items)
        if changed is None:
            return items
        try:
            etag = current.etag if current is not None else None
            Writes(rt, user).write_review(_render(changed), etag=etag)
            return changed
        except PreconditionFailedError:
            continue
    raise StoreError("updating the review queue failed: too many concurrent writers")


def hold(
    rt: Runtime, user: User, held: list[Held], *, source: str, writer: str, day: str
) -> list[ReviewItem]:
    """Queue ``held`` lines of one write (``source``: its ``> source:`` fields). An item
    already queued (a retried job) is not queued twice."""
    if not held:
        return []
    now = iso(rt.clock.now())
    new = [
        ReviewItem(
            id=_item_id(h, source),
            text=h.text,
            authority=h.authority,
            reason=h.reason,
            source=source,
            writer=writer,
            day=day,
            created_at=now,
        )
        for h in held
    ]

    def add(items: list[ReviewItem]) -> list[ReviewItem] | None:
        known = {i.id for i in items}  # a decided item is not queued again by a retry
        fresh = [n for n in new if n.id not in known]
        if not fresh:
            return None
        kept = _without_old_tombstones(rt, items)
        pending = [i for i in kept if i.pending] + fresh
        over = len(pending) - MAX_PENDING
        if over > 0:
            metrics.add_metric("ReviewItemsDropped", MetricUnit.Count, over)
            dropped = {i.id for i in pending[:over]}
            kept = [i for i in kept if i.id not in dropped]
            fresh = [n for n in fresh if n.id not in dropped]
        return [*kept, *fresh]

    update(rt, user, add)
    metrics.add_metric("ReviewItemsHeld", MetricUnit.Count, len(new))
    logger.info("lines held for review", extra={"writer": writer, "items": len(new)})
    return new


def list_review(rt: Runtime, user: User) -> list[ReviewItem]:
    """The items awaiting a decision, oldest first (one GET)."""
    current = rt.store.get(user, REVIEW_FILE)
    return [i for i in _parse(current.content) if i.pending] if current else []


def _without_old_tombstones(rt: Runtime, items: list[ReviewItem]) -> list[ReviewItem]:
    cutoff = rt.clock.now() - timedelta(days=DECIDED_DAYS)
    return [i for i in items if i.pending or stamp_of(i.decided) >= cutoff]


def stamp_of(field_value: str) -> datetime:
    """The time a claim or a tombstone ends with."""
    return parse_iso(field_value.rsplit(" ", 1)[-1])


def drop_where(rt: Runtime, user: User, names: Callable[[str], bool]) -> int:
    """Drop every item whose source or writer ``names`` matches (forgetting a member
    drops the proposals they made); how many were dropped."""
    dropped = 0

    def keep(items: list[ReviewItem]) -> list[ReviewItem] | None:
        nonlocal dropped
        kept = [i for i in items if not (names(i.source) or names(i.writer))]
        dropped = len(items) - len(kept)
        return kept if dropped else None

    update(rt, user, keep)
    return dropped
