"""One ledger fact: where it stands, its history, and an operator's correction (the
fact superseded by corrected text, or retracted when the text is empty). The decisions
are ``agent_harness.memory.facts.corrections``'s, as in the API: written with
``operator`` authority and ``> source: console via=correct``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_harness.errors import InvalidRequestError
from agent_harness.memory.facts.authority import parse_fact
from agent_harness.memory.facts.corrections import correct_fact, fact_view, find_fact
from agent_harness.memory.facts.lifecycle import ledger_fact_id
from console.page import Page, authority_badge, esc, link, notice, table, user_url
from console.views import existing_user

if TYPE_CHECKING:
    from agent_harness.ids import User
    from console.page import Ctx

__all__ = ["correct", "fact_link", "fact_page"]


def fact_link(user: User, day: str, line: str) -> str:
    """The id of a ledger's fact line, linked to its page (where it can be corrected);
    empty for a line that is not a fact."""
    fact = parse_fact(line)
    if fact is None:
        return ""
    fact_id = ledger_fact_id(day, fact.text)
    href = user_url(user.id, "facts", id=fact_id)
    return f' <span class="meta">{link(href, fact_id, title="this fact: history, Correct")}</span>'


def fact_page(ctx: Ctx, user: User) -> Page:
    existing_user(ctx, user)
    fact, life = find_fact(ctx.rt, user, ctx.q("id"))
    view = fact_view(fact, life)
    title = f"Fact {fact.id} of {user.id}"
    state = view["state"] + (f" by {view['by']}" if view["by"] else "")
    state += f" on {view['at']}" if view["at"] else ""
    where = link(user_url(user.id, "ledgers", day=fact.day) + f"#L{fact.line}", fact.day)
    about = (
        f'<p class="line">{esc(fact.text)} {authority_badge(fact.authority)}</p>'
        f'<p class="meta">recorded {esc(fact.recorded)} · ledger {where} line {fact.line}'
        f" · <strong>{esc(state)}</strong></p>"
    )
    rows = [
        [
            link(user_url(user.id, "facts", id=h["id"]), h["id"]),
            f'<span class="line">{esc(h["text"])}</span>',
            authority_badge(h["authority"]),
            esc(h["recorded"]),
            esc(h["state"] + (f" by {h['by']}" if h["by"] else "")),
        ]
        for h in view["history"]
    ]
    history = table(
        ["fact", "text", "authority", "recorded", "state"],
        rows,
        caption="History: what it superseded and what superseded it, in recorded order",
        cls="history",
    )
    body = _done(ctx) + about + history
    if life.current(fact.id):
        body += _correct_form(ctx, user, fact.id)
    return Page(title, body, user_id=user.id, tab="ledgers")


def _correct_form(ctx: Ctx, user: User, fact_id: str) -> str:
    return (
        '<section aria-labelledby="correct-h"><h2 id="correct-h">Correct</h2>'
        '<p class="hint">The corrected fact supersedes this one (written to today\'s ledger '
        "with <code>operator</code> authority, through the write gate); leave it empty to "
        "retract the fact.</p>"
        f'<form method="post" action="{esc(user_url(user.id, "facts"))}">'
        f'<input type="hidden" name="csrf" value="{esc(ctx.token)}">'
        f'<input type="hidden" name="id" value="{esc(fact_id)}">'
        '<label>Corrected fact <input type="text" name="by" size="60"></label> '
        '<label>Reason (a retraction) <input type="text" name="reason" size="30"></label> '
        '<button type="submit">Correct</button></form></section>'
    )


def _done(ctx: Ctx) -> str:
    done, record = ctx.q("done"), ctx.q("record")
    if done not in ("superseded", "retracted") or not record:
        return ""
    return notice(f"The fact is {done}: the record {record} is in today's ledger.", "ok")


def correct(ctx: Ctx, user: User) -> str:
    """The correction's POST (``id``, ``by``: empty retracts, ``reason``)."""
    existing_user(ctx, user)
    fact_id = ctx.form.get("id", "").strip()
    if not fact_id:
        raise InvalidRequestError("choose a fact")
    by = ctx.form.get("by", "").strip() or None
    reason = ctx.form.get("reason", "").strip() or None
    done = correct_fact(
        ctx.rt,
        user,
        fact_id,
        by,
        authority="operator",
        writer="console",
        via="correct",
        reason=reason,
    )
    return user_url(user.id, "facts", id=fact_id, done=done.state, record=done.id)
