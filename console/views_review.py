"""A user's review queue: the lines the write gate held out of memory (an instruction
from below the user; what a tool result or the agent claims about the user's payment
details, accounts, credentials, contacts or identity), each with where it came from,
to approve (written into MEMORY.md and today's ledger with ``operator`` authority) or
reject (dropped). The decisions are ``agent_harness.memory.review``'s, as in the API."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_harness.memory.facts.ledger import source_of
from agent_harness.memory.review import decide, list_review
from console.page import (
    REVIEW_ACTIONS,
    Page,
    authority_badge,
    decide_forms,
    esc,
    link,
    notice,
    review_choice,
    table,
    user_url,
)
from console.views import existing_user

if TYPE_CHECKING:
    from agent_harness.ids import User
    from agent_harness.memory.review import ReviewItem
    from console.page import Ctx

__all__ = ["decide_review", "review_page"]

#: why the gate held a line (``ReviewItem.reason``), in words
REASONS = {
    "instruction": "an instruction (an injection, or a directive from below the user)",
    "payment": "a claim about the user's payment details or bank accounts",
    "credential": "a claim about the user's logins or credentials",
    "contact": "a claim about the user's contact details",
    "identity": "a claim about the user's identity",
}


def review_page(ctx: Ctx, user: User) -> Page:
    existing_user(ctx, user)
    items = list_review(ctx.rt, user)
    intro = (
        '<p class="hint">Nothing here is memory yet: a held line is neither injected nor '
        "searchable. <strong>Approve</strong> writes it into MEMORY.md and today's ledger "
        "with <code>operator</code> authority (you vouch for it; secrets are still "
        "redacted); <strong>Reject</strong> drops it.</p>"
    )
    done = _done(ctx)
    if done and ctx.q("done") == "approve":
        done += f"<p>{link(user_url(user.id), 'See MEMORY.md')}</p>"
    title = f"Review queue of {user.id}"
    if not items:
        empty = notice("No lines are waiting for review.")
        return Page(title, done + intro + empty, user_id=user.id, tab="review")
    rows = [
        [
            f'<p class="line">{esc(item.text)}</p>',
            authority_badge(item.authority),
            esc(REASONS.get(item.reason, item.reason)),
            _came_from(user, item),
            decide_forms(user_url(user.id, "review"), ctx.token, item.id, item.text),
        ]
        for item in items
    ]
    listing = table(
        ["held line", "authority", "held because", "came from", "decide"],
        rows,
        caption=f"{len(items)} line{'s' * (len(items) != 1)} held for review, oldest first",
        cls="review",
    )
    return Page(title, done + intro + listing, user_id=user.id, tab="review")


def _came_from(user: User, item: ReviewItem) -> str:
    """The writer that held it, the ``> source:`` fields of its write (linked to the
    session's turn when they name one), its day and when it was held."""
    origin = source_of(item.source)
    source = esc(item.source or "no source")
    if origin is not None:
        href = user_url(user.id, "sessions", origin.session_id) + f"#turn-{origin.turns[0]}"
        source = link(href, item.source)
    return (
        f"<div>held by <code>{esc(item.writer)}</code></div>"
        f'<div class="src">{source}</div>'
        f'<div class="meta">{esc(item.day)} · held {esc(item.created_at)}</div>'
    )


def _done(ctx: Ctx) -> str:
    """The notice of the decision just made (the redirect's query)."""
    item, action = ctx.q("item"), ctx.q("done")
    if not item or action not in REVIEW_ACTIONS:
        return ""
    if action == "reject":
        return notice(f"Rejected {item}: dropped from the queue; nothing was written.", "ok")
    written = [line for line in ctx.q("written").split("\n") if line]
    if not written:
        return notice(
            f"Approved {item}, but nothing was left to write once the gate had redacted it.",
            "ok",
        )
    return notice(
        f"Approved {item}: written into MEMORY.md and today's ledger with operator "
        f"authority: {' · '.join(written)}",
        "ok",
    )


def decide_review(ctx: Ctx, user: User) -> str:
    """A decision's POST (``id``, ``action``); a 404 page when the item is no longer
    queued (decided meanwhile, or pushed out), a 400 for anything but approve or reject."""
    existing_user(ctx, user)
    item_id, action = review_choice(ctx)
    decision = decide(ctx.rt, user, item_id, action)
    return user_url(
        user.id,
        "review",
        done=decision.action,
        item=decision.id,
        written="\n".join(decision.written),
    )
