"""Pages of a user's ledgers, sessions and search, and the stack's operations (dead
letters with redrive, forget behind a typed confirmation)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from agent_harness import overview
from agent_harness.agent.recall import preview_recall
from agent_harness.aws import dlq
from agent_harness.errors import InvalidRequestError
from agent_harness.ids import validate_day
from agent_harness.memory.facts.authority import parse_fact
from agent_harness.memory.jobs.forget import forget_user
from agent_harness.memory.search import search_memory
from agent_harness.memory.threads import search_threads
from console.page import (
    Page,
    authority_badge,
    esc,
    form,
    ledger_url,
    link,
    notice,
    table,
    user_url,
)
from console.views import existing_user, fact_html, user_of
from console.views_facts import fact_link

if TYPE_CHECKING:
    from agent_harness.ids import User
    from agent_harness.memory.engine.index import Hit, Mode
    from console.page import Ctx

__all__ = [
    "forget",
    "ledgers_page",
    "operations_page",
    "redrive",
    "score_text",
    "search_page",
    "source_link",
    "turn_link",
]

MODES: tuple[Mode, ...] = ("phrase", "all", "any", "ranked")
SEARCH_LIMIT = 10
QUEUES = ("flush", "consolidation")


def ledgers_page(ctx: Ctx, user: User) -> Page:
    view = existing_user(ctx, user)
    days, archived = list(view.watermarks), list(view.archived)
    if not days and not archived:
        return Page(
            f"Ledgers of {user.id}", notice("No ledgers yet."), user_id=user.id, tab="ledgers"
        )
    in_archive = bool(ctx.q("archived")) or not days
    day = validate_day(ctx.q("day") or (archived if in_archive else days)[-1])
    listing = _day_tables(user, view, day, in_archive)
    sections, consumed, size = overview.ledger_sections(ctx.rt, user, day, archived=in_archive)
    rendered = []
    for s in sections:
        badge = (
            '<span class="badge ok">merged</span>'
            if s.merged
            else '<span class="badge">not merged yet</span>'
        )
        source = esc(s.source or "no source line")
        if s.origin is not None:
            href = user_url(user.id, "sessions", s.origin.session_id)
            source = link(f"{href}#turn-{s.origin.turns[0]}", s.source or "")
        lines = "".join(
            f'<li id="L{n}" value="{n}">{fact_html(text)}{fact_link(user, day, text)}</li>'
            for n, text in s.lines
        )
        kind = esc(s.kind or "(before the first section)")
        rendered.append(
            f'<article class="section{" merged" if s.merged else ""}">'
            f"<h3>{kind} · {esc(s.at or '–')} {badge}</h3>"
            f'<p class="meta">source: {source} · bytes {s.start:,}–{s.end:,}</p>'
            f'<ol class="ledger">{lines}</ol></article>'
        )
    where = f"memory/archive/{day}.md" if in_archive else f"memory/{day}.md"
    body = (
        listing
        + f'<section aria-labelledby="day-h"><h2 id="day-h">{esc(where)}</h2>'
        + f'<p class="hint">Watermark: consolidation has merged {consumed:,} of {size:,} bytes.</p>'
        + "".join(rendered)
        + "</section>"
    )
    return Page(f"Ledgers of {user.id}", body, user_id=user.id, tab="ledgers")


def _day_tables(user: User, view: overview.UserOverview, day: str, in_archive: bool) -> str:
    """The active days with their watermark, then the archived days (all merged)."""
    rows = []
    for d in reversed(view.watermarks):
        done, size = view.watermarks[d]
        name = f"{d} (shown)" if d == day and not in_archive else d
        rows.append(
            [
                link(user_url(user.id, "ledgers", day=d), name),
                esc(f"{size:,}"),
                esc(f"{done:,}"),
                esc("all" if done >= size else f"{size - done:,} bytes to merge"),
            ]
        )
    out = (
        table(
            ["day", "bytes", "merged bytes (watermark)", "consolidation"],
            rows,
            caption="Active ledger days, newest first",
        )
        if rows
        else notice("No active ledgers.")
    )
    if view.archived:
        links = [
            link(
                user_url(user.id, "ledgers", day=d, archived=1),
                f"{d} (shown)" if d == day and in_archive else d,
            )
            for d in reversed(view.archived)
        ]
        out += (
            '<details class="archive"' + (" open" if in_archive else "") + ">"
            f"<summary>Archived days ({len(links)}, consolidated, still searchable)</summary>"
            f'<p class="days">{" ".join(links)}</p></details>'
        )
    return out


def search_page(ctx: Ctx, user: User) -> Page:
    query, message = ctx.q("q").strip(), ctx.q("message").strip()
    controls = (
        f'<form method="get" action="{esc(user_url(user.id, "search"))}" role="search" '
        'class="stack">'
        '<label for="q">Search memory and threads</label>'
        f'<input id="q" name="q" value="{esc(query)}">'
        '<label for="message">Preview automatic recall for a message</label>'
        f'<input id="message" name="message" value="{esc(message)}" '
        'placeholder="a user message, as the agent would get it">'
        '<button type="submit">Search</button></form>'
    )
    parts = [controls]
    if query:
        columns = "".join(_mode_column(ctx, user, query, mode) for mode in MODES)
        parts.append(f'<div class="modes">{columns}</div>')
    if message:
        parts.append(_recall_section(ctx, user, message))
    return Page(f"Search {user.id}", "".join(parts), user_id=user.id, tab="search")


def _mode_column(ctx: Ctx, user: User, query: str, mode: Mode) -> str:
    """One match mode's hits in MEMORY.md and the ledgers, and in the threads."""
    hits = search_memory(ctx.rt, user, query, mode, SEARCH_LIMIT, ctx.rt.search_cache)
    threads = search_threads(ctx.rt, user, query, mode, SEARCH_LIMIT, ctx.rt.search_cache)
    memory_items = (
        "".join(
            f'<li><span class="score">{score_text(h.score)}</span> '
            f"{source_link(user, h.path, h.line)} {_hit_text(h)}{_fact_of(user, h)}</li>"
            for h in hits
        )
        or '<li class="none">no match</li>'
    )
    thread_items = (
        "".join(
            f'<li><span class="score">{score_text(h.score)}</span> '
            f"{turn_link(user, h.session_id, h.turn)} "
            f'<span class="role">{esc(h.role)}</span> {esc(h.text)}</li>'
            for h in threads
        )
        or '<li class="none">no match</li>'
    )
    return (
        f'<section class="mode" aria-labelledby="mode-{mode}"><h2 id="mode-{mode}">{mode}</h2>'
        f'<h3>Memory</h3><ol class="hits">{memory_items}</ol>'
        f'<h3>Threads</h3><ol class="hits">{thread_items}</ol></section>'
    )


def _hit_text(hit: Hit) -> str:
    """A memory hit's words after its authority badge (``Hit.authority``); a line that
    is no fact (a heading, a source line) as it is."""
    fact = parse_fact(hit.text)
    if fact is None:
        return esc(hit.text)
    return authority_badge(hit.authority) + esc(fact.text)


def _fact_of(user: User, hit: Hit) -> str:
    """A ledger hit's fact id, linked to the fact's page (its history, Correct)."""
    if hit.fact_id is None or hit.path == "MEMORY.md":
        return ""
    href = user_url(user.id, "facts", id=hit.fact_id)
    return (
        f' <span class="meta">{link(href, hit.fact_id, title="this fact: history, Correct")}</span>'
    )


def _recall_section(ctx: Ctx, user: User, message: str) -> str:
    """What automatic recall would inject for ``message``, or why nothing."""
    preview = preview_recall(ctx.rt, user, message)
    if preview.off:
        text = notice(
            "Automatic recall is off on this stack "
            "(HARNESS_RECALL_MAX_TOKENS=0 or HARNESS_DISABLE_MEMORY_HOOKS)."
        )
    elif preview.content is None:
        text = notice(
            "Recall would inject nothing: no line clears the score floor "
            "(HARNESS_RECALL_MIN_SCORE)."
        )
    else:
        text = (
            f'<p class="hint">{preview.tokens:,} tokens · {len(preview.sources)} lines: '
            f"{esc(', '.join(preview.sources))}</p>"
            f'<pre class="recall">{esc(preview.content)}</pre>'
        )
    return (
        '<section id="recall" aria-labelledby="recall-h">'
        f'<h2 id="recall-h">What recall would inject</h2>{text}</section>'
    )


def turn_link(user: User, session_id: str, turn: int) -> str:
    href = user_url(user.id, "sessions", session_id) + f"#turn-{turn}"
    return link(href, f"{session_id}#{turn}")


def score_text(score: float | None) -> str:
    return esc(f"{score:.3f}") if score is not None else "–"


def source_link(user: User, path: str, line: int) -> str:
    href = ledger_url(user.id, path, line)
    if href:
        return link(href, f"{path}#{line}", class_="src")
    if path == "MEMORY.md":
        return link(user_url(user.id, line=line) + "#origin", f"{path}#{line}", class_="src")
    return f'<span class="src">{esc(path)}#{line}</span>'


def operations_page(ctx: Ctx) -> Page:
    parts = []
    done = ctx.q("redriven")
    if done:
        parts.append(notice(f"Redrove {done} {ctx.q('queue')} job(s) back to their queue.", "ok"))
    if ctx.q("forgotten"):
        parts.append(
            notice(
                f"Forgot {ctx.q('forgotten')!r}: {ctx.q('versions')} object versions and "
                f"{ctx.q('items')} items deleted.",
                "ok",
            )
        )
    for queue in QUEUES:
        source = _queue_url(ctx, queue)
        dead = dlq.dead_letter_queue(ctx.rt.clients["sqs"], source)
        letters = dlq.peek(ctx.rt.clients["sqs"], dead, 50)
        rows = [
            [
                f"<code>{esc(x.message_id)}</code>",
                esc(x.receives),
                esc(_sent(x.sent_at)),
                f"<pre>{esc(json.dumps(x.body, ensure_ascii=False)[:400])}</pre>",
            ]
            for x in letters
        ]
        listing = (
            table(["message", "receives", "sent", "job"], rows)
            if rows
            else notice("No dead letters.")
        )
        redrive_form = (
            form(
                "/operations/redrive",
                ctx.token,
                f'<input type="hidden" name="queue" value="{queue}">',
                f"Redrive {queue} dead letters",
            )
            if rows
            else ""
        )
        parts.append(
            f'<section aria-labelledby="q-{queue}">'
            f'<h2 id="q-{queue}">{queue.capitalize()} dead-letter queue</h2>'
            f"{listing}{redrive_form}</section>"
        )
    fields = (
        '<label for="forget-user">User id</label>'
        '<input id="forget-user" name="user" autocomplete="off" required>'
        '<label for="forget-confirm">Type the user id again to confirm</label>'
        '<input id="forget-confirm" name="confirm" autocomplete="off">'
    )
    parts.append(
        '<section aria-labelledby="forget-h"><h2 id="forget-h">Forget a user</h2>'
        '<p class="hint">Deletes every object version and item of the user. '
        "This cannot be undone.</p>"
        + form("/operations/forget", ctx.token, fields, "Forget this user", danger=True)
        + "</section>"
    )
    return Page("Operations", "".join(parts))


def _queue_url(ctx: Ctx, queue: str) -> str:
    if queue not in QUEUES:
        raise InvalidRequestError(f"queue must be one of {', '.join(QUEUES)}")
    return (
        ctx.rt.settings.flush_queue_url
        if queue == "flush"
        else ctx.rt.settings.consolidation_queue_url
    )


def _sent(ms: str | None) -> str:
    from datetime import UTC, datetime

    if not ms or not ms.isdigit():
        return "–"
    return datetime.fromtimestamp(int(ms) / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def redrive(ctx: Ctx) -> str:
    queue = ctx.form.get("queue", "")
    source = _queue_url(ctx, queue)
    sqs = ctx.rt.clients["sqs"]
    moved = dlq.redrive(sqs, dlq.dead_letter_queue(sqs, source), source)
    return f"/operations?redriven={moved}&queue={queue}"


def forget(ctx: Ctx) -> str:
    """Forget a user only when the confirmation repeats the id exactly; otherwise a 400
    page, and nothing is deleted."""
    user_id, confirm = ctx.form.get("user", ""), ctx.form.get("confirm", "")
    user = user_of(user_id)
    if confirm != user_id:
        raise InvalidRequestError(
            f"type the user id {user_id!r} exactly to confirm; nothing was deleted"
        )
    outcome = forget_user(ctx.rt, user)
    from urllib.parse import urlencode

    query = urlencode(
        {"forgotten": user.id, "versions": outcome.object_versions, "items": outcome.items}
    )
    return f"/operations?{query}"
