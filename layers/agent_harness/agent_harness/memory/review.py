"""The review queue: what the gate keeps out of memory, until a person decides.

    review/queue.jsonl      one JSON object per held line, oldest first (CAS rewrite)

A line lands here when it must not be written as a plain fact (memory.facts.gate): an
instruction from below the user, or what a tool result or the agent claims about the
user's payment details, accounts, credentials, contacts or identity. Nothing here is
injected or searchable: the queue is outside ``memory/``. ``approve`` writes the line
into MEMORY.md and the day's ledger with the decider's authority (a person vouched for
it); ``reject`` drops it.

A decision has exactly one winner. It claims the item first (a conditional rewrite of
the queue); a second decision while the claim stands, or after the item was decided,
is ``409 review_item_decided`` and writes nothing. The decided item stays in the file
as a tombstone (``decided``, never listed) for ``DECIDED_DAYS``, so a late second
decision is told what happened rather than 404. A claim whose decider crashed expires
after ``CLAIM_SECONDS``; an approval run again then finds its ledger section and does
not write the line twice.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.clock import iso, parse_iso
from agent_harness.errors import (
    ConflictError,
    NotFoundError,
    PreconditionFailedError,
    StoreError,
)
from agent_harness.memory.facts.authority import OPERATOR
from agent_harness.memory.facts.ledger import (
    BY_FIELD,
    Source,
    day_of,
    render_section,
    saved_by,
    source_of,
)
from agent_harness.paths import MEMORY_FILE, REVIEW_FILE, ledger_path

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_harness.ids import User
    from agent_harness.memory.facts.gate import Held
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
Action = Literal["approve", "reject"]


class ReviewItemDecidedError(ConflictError):
    code = "review_item_decided"


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


@dataclass(frozen=True)
class Decision:
    id: str
    action: Action
    #: the lines written into MEMORY.md (approve)
    written: list[str]

    def view(self) -> dict[str, object]:
        return asdict(self)


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


def _update(
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
            if current is None:
                rt.store.put(user, REVIEW_FILE, _render(changed), create_only=True)
            else:
                rt.store.put(user, REVIEW_FILE, _render(changed), if_match=current.etag)
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

    _update(rt, user, add)
    metrics.add_metric("ReviewItemsHeld", MetricUnit.Count, len(new))
    logger.info("lines held for review", extra={"writer": writer, "items": len(new)})
    return new


def list_review(rt: Runtime, user: User) -> list[ReviewItem]:
    """The items awaiting a decision, oldest first (one GET)."""
    current = rt.store.get(user, REVIEW_FILE)
    return [i for i in _parse(current.content) if i.pending] if current else []


def _without_old_tombstones(rt: Runtime, items: list[ReviewItem]) -> list[ReviewItem]:
    cutoff = rt.clock.now() - timedelta(days=DECIDED_DAYS)
    return [i for i in items if i.pending or _stamp(i.decided) >= cutoff]


def _stamp(field_value: str) -> datetime:
    """The time a claim or a tombstone ends with."""
    return parse_iso(field_value.rsplit(" ", 1)[-1])


def decide(
    rt: Runtime, user: User, item_id: str, action: Action, *, authority: str = OPERATOR
) -> Decision:
    """Approve (write it as ``authority``'s: the person deciding) or reject one item;
    404 when it was never queued, 409 when another decision has it (see the module)."""
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
        if item.claim and _stamp(item.claim) > now - timedelta(seconds=CLAIM_SECONDS):
            raise ReviewItemDecidedError(
                f"review item {item_id} is being decided by another request",
                details={"action": item.claim.split(" ")[1], "at": None},
            )
        mine = replace(item, claim=f"{token} {action} {iso(now)}")
        claimed[:] = [mine]
        return [mine if i.id == item_id else i for i in items]

    _update(rt, user, claim)
    item = claimed[0]
    written: list[str] = []
    if action == "approve":
        # a person vouched for it: secrets and structure are still seen to
        admitted = admit([Candidate(item.text, authority)], Policy.of(rt.settings), decided=True)
        written = admitted.lines
        _write_approved(rt, user, item, written, authority)
    stamp = f"{action} {iso(rt.clock.now())}"

    def settle(items: list[ReviewItem]) -> list[ReviewItem]:
        return [replace(i, claim="", decided=stamp) if i.id == item_id else i for i in items]

    _update(rt, user, settle)
    metrics.add_metric(f"ReviewItems_{action}", MetricUnit.Count, 1)
    return Decision(id=item_id, action=action, written=written)


def drop_where(rt: Runtime, user: User, names: Callable[[str], bool]) -> int:
    """Drop every item whose source or writer ``names`` matches (forgetting a member
    drops the proposals they made); how many were dropped."""
    dropped = 0

    def keep(items: list[ReviewItem]) -> list[ReviewItem] | None:
        nonlocal dropped
        kept = [i for i in items if not (names(i.source) or names(i.writer))]
        dropped = len(items) - len(kept)
        return kept if dropped else None

    _update(rt, user, keep)
    return dropped


def _write_approved(
    rt: Runtime, user: User, item: ReviewItem, lines: list[str], authority: str
) -> None:
    """MEMORY.md and the ledger of today, each once: a retry after a crash finds the
    ledger section that names the item, and MEMORY.md lines already there."""
    if not lines:
        return
    at = rt.clock.now()
    path = ledger_path(day_of(at, rt.settings.zone))
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
    rt.store.append(
        user,
        MEMORY_FILE,
        lambda existing: _missing(rt, existing, lines),
        writer=f"{authority}: review approve {item.id}",
    )
    section = render_section("Review", at, rt.settings.zone, lines, source)
    rt.store.append(user, path, lambda existing: section)


def _missing(rt: Runtime, existing: str, lines: list[str]) -> str:
    from agent_harness.memory.capacity import within_cap

    have = set(existing.splitlines())
    block = "".join(f"{line}\n" for line in lines if line not in have)
    if not block:
        return ""
    return within_cap(
        rt, existing, ("\n" if existing and not existing.endswith("\n") else "") + block
    )
