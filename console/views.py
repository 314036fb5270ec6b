"""Pages of users and MEMORY.md: find a user; a user's workspace at a glance with
MEMORY.md, where each line came from, the edit form and the charts; the versions with
who wrote them, a side-by-side diff and rollback."""

from __future__ import annotations

import difflib
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from agent_harness import overview
from agent_harness.errors import NotFoundError
from agent_harness.ids import User
from agent_harness.memory import files
from agent_harness.memory.facts.authority import parse_fact
from agent_harness.paths import MEMORY_FILE
from agent_harness.usage import usage_report
from console.charts import line_chart
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
from console.views_scopes import promote_section

if TYPE_CHECKING:
    from agent_harness.records import TurnRecord
    from console.page import Ctx

__all__ = [
    "existing_user",
    "fact_html",
    "memory_page",
    "rollback",
    "save_memory",
    "user_of",
    "users_page",
    "versions_page",
]

#: the days the usage chart covers
CHART_DAYS = 30
#: users shown on the users page (each costs a LIST and a user-item read)
MAX_USERS = 50


def user_of(user_id: str) -> User:
    """The user a URL names; a malformed id is a 400 page (``InvalidRequestError``)."""
    return User.from_id(user_id)


def users_page(ctx: Ctx) -> Page:
    wanted = ctx.q("q").strip()
    found = overview.find_users(ctx.rt, wanted, limit=MAX_USERS)
    with ThreadPoolExecutor(max_workers=8) as pool:
        views = list(pool.map(lambda u: overview.user_overview(ctx.rt, u), found))
    search = (
        '<form method="get" action="/" class="inline" role="search">'
        '<label for="q">User id or prefix</label>'
        f'<input id="q" name="q" value="{esc(wanted)}" autocomplete="off">'
        '<button type="submit">Find</button></form>'
    )
    if not views:
        what = f"whose id starts with {wanted!r}" if wanted else "in this stack yet"
        return Page("Users", search + notice(f"No users {what}."))
    rows = [
        [
            link(user_url(v.user.id), v.user.id),
            esc(f"{v.memory_bytes:,}"),
            esc(f"{v.ledger_days} · {v.ledger_bytes:,}"),
            esc(f"{v.sessions} · {v.turns}"),
            esc(v.last_activity or "–"),
            esc(_due(v)),
        ]
        for v in views
    ]
    headers = ["user", "MEMORY.md bytes", "ledger days · bytes", "sessions · turns"]
    more = (
        notice(f"Showing the first {MAX_USERS}; narrow the prefix.")
        if len(views) >= MAX_USERS
        else ""
    )
    return Page(
        "Users",
        search + table([*headers, "last activity", "consolidation"], rows) + more,
    )


def _due(v: overview.UserOverview) -> str:
    pending = v.unmerged_bytes
    state = "due" if v.state.is_due else "not due"
    if v.state.failures:
        state = f"FAILING ({v.state.failures} in a row; retry at {v.state.retry_at})"
    return f"{state}; {pending:,} ledger bytes not merged yet"


def existing_user(ctx: Ctx, user: User) -> overview.UserOverview:
    """The user's overview, or a 404 page when nothing is stored under the id."""
    view = overview.user_overview(ctx.rt, user)
    if not view.exists:
        raise NotFoundError(f"no user {user.id!r} in this stack: nothing is stored under that id")
    return view


def memory_page(ctx: Ctx, user: User, *, draft: str | None = None, message: str = "") -> Page:
    view = existing_user(ctx, user)
    document = files.get_memory(ctx.rt, user)
    lines = document.content.splitlines()
    chosen = _int(ctx.q("line"))
    facts = _summary(view, _spend(ctx, user))
    if document.etag is None:
        text = notice("No MEMORY.md yet: consolidation writes it from the ledgers.")
    else:
        items = []
        for number, line in enumerate(lines, start=1):
            here = ' class="chosen" aria-current="true"' if number == chosen else ""
            body = esc(line) if line.strip() else "&nbsp;"
            if line.strip() and not line.lstrip().startswith("#"):
                href = user_url(user.id, line=number) + "#origin"
                fact = parse_fact(line)
                body = (
                    authority_badge(fact.authority) + link(href, fact.text)
                    if fact is not None
                    else link(href, line)
                )
            items.append(f'<li id="line-{number}" value="{number}"{here}>{body}</li>')
        text = f'<ol class="memory" aria-label="MEMORY.md lines">{"".join(items)}</ol>'
    origin = _origin(ctx, user, lines[chosen - 1]) if chosen and 0 < chosen <= len(lines) else ""
    edit = _edit_form(ctx, user, draft if draft is not None else document.content, document.etag)
    charts = line_chart("Memory size", "bytes", overview.memory_sizes(ctx.rt, user)) + line_chart(
        f"Tokens per day by role, last {CHART_DAYS} days",
        "tokens",
        usage_report(ctx.rt, user, CHART_DAYS).series(),
    )
    if not message and ctx.q("saved"):
        message = notice("Saved: MEMORY.md has a new version.", "ok")
    if not message and ctx.q("promoted"):
        message = notice(f"The fact is {ctx.q('promoted')}.", "ok")
    failing = view.state.failing()  # a consolidation that keeps failing is said first
    body = (
        (notice(failing, "error") if failing else "")
        + message
        + facts
        + '<section aria-labelledby="memory-h"><h2 id="memory-h">MEMORY.md</h2>'
        + '<p class="hint">Select a line to see where it came from. The badge before a '
        + "fact is its authority: whose words it holds.</p>"
        + text
        + "</section>"
        + origin
        + promote_section(ctx, user, lines)
        + edit
        + f'<section class="charts" aria-label="Charts">{charts}</section>'
    )
    return Page(f"MEMORY.md of {user.id}", body, user_id=user.id, tab="")


def _spend(ctx: Ctx, user: User) -> list[tuple[str, str]]:
    """Today's spend against the user's daily budget (the usage counters)."""
    from agent_harness.usage import effective_budget, imported_turns_limit

    days = usage_report(ctx.rt, user, 1).days
    limits = effective_budget(ctx.rt, user, fresh=True)
    turns = sum(d.turns for d in days)
    agent = sum(d.turn_tokens for d in days)
    memory = sum(sum(d.tokens["memory"]) for d in days)
    imported = sum(d.imported for d in days)
    return [
        ("Turns today", f"{turns:,}{_of(limits.turns)}"),
        ("Agent tokens today", f"{agent:,}{_of(limits.tokens)}"),
        ("Memory tokens today", f"{memory:,}{_of(limits.memory_tokens)}"),
        ("Imported turns today", f"{imported:,}{_of(imported_turns_limit(ctx.rt))}"),
    ]


def _of(limit: int | None) -> str:
    return f" of {limit:,}" if limit else " (no daily limit)"


def _summary(v: overview.UserOverview, spend: list[tuple[str, str]]) -> str:
    total = v.ledger_bytes
    merged = total - v.unmerged_bytes
    items = [
        ("MEMORY.md", f"{v.memory_bytes:,} bytes" if v.memory_etag else "none yet"),
        ("Ledgers", f"{v.ledger_days} days, {v.ledger_bytes:,} bytes"),
        ("Archive", f"{v.archive_days} days, {v.archive_bytes:,} bytes"),
        ("Sessions", f"{v.sessions} sessions, {v.turns} turns"),
        ("Derived indexes", f"{v.derived_bytes:,} bytes (rebuildable)"),
        ("Last activity", v.last_activity or "–"),
        ("Consolidation", "due" if v.state.is_due else "not due"),
        ("Last consolidated", v.state.last_consolidated_at or "never"),
        ("Watermark", f"{merged:,} of {total:,} ledger bytes merged"),
        *spend,
    ]
    rows = "".join(f"<div><dt>{esc(k)}</dt><dd>{esc(val)}</dd></div>" for k, val in items)
    return f'<dl class="facts">{rows}</dl>'


def _origin(ctx: Ctx, user: User, text: str) -> str:
    found = overview.line_origins(ctx.rt, user, text)
    head = (
        '<section id="origin" aria-labelledby="origin-h">'
        '<h2 id="origin-h">Where it came from</h2>'
        f"<blockquote>{fact_html(text)}</blockquote>"
    )
    if not found:
        return (
            head
            + notice("No ledger line matches it (written by hand, or its ledger was forgotten).")
            + "</section>"
        )
    parts = []
    for item in found:
        o = item.origin
        href = ledger_url(user.id, o.path, o.line)
        where = link(href, f"{o.path}#{o.line}") if href else esc(f"{o.path}#{o.line}")
        turns = "".join(_turn(user, item.session_id, record) for record in item.turns)
        parts.append(
            '<article class="origin">'
            f'<h3>{where}</h3><p class="line">{fact_html(o.text)}</p>'
            f'<p class="meta">{esc(o.section or "no section")} · {esc(o.at or "–")} · '
            f"{esc(o.source or 'no source line')}</p>"
            f"{turns}</article>"
        )
    return head + "".join(parts) + "</section>"


def fact_html(line: str) -> str:
    """A fact line as its authority badge and its text (any other line as it is)."""
    fact = parse_fact(line)
    if fact is None:
        return esc(line)
    return authority_badge(fact.authority) + esc(fact.text)


def _turn(user: User, session_id: str | None, record: TurnRecord) -> str:
    href = user_url(user.id, "sessions", session_id or record.session_id) + f"#turn-{record.turn}"
    said = "".join(
        f'<li class="msg {esc(m.role)}"><span class="role">{esc(m.role)}</span> '
        f"{esc(m.content)}</li>"
        for m in record.messages
        if m.content
    )
    title = link(href, f"session {record.session_id}, turn {record.turn}")
    return (
        f'<div class="turn source-turn"><p>{title}'
        f" · {esc(record.created_at)} · model {esc(record.model or '–')}</p><ul>{said}</ul></div>"
    )


def _edit_form(ctx: Ctx, user: User, content: str, etag: str | None) -> str:
    fields = (
        f'<input type="hidden" name="etag" value="{esc(etag or "")}">'
        '<label for="memory-text">MEMORY.md text</label>'
        f'<textarea id="memory-text" name="content" rows="14">{esc(content)}</textarea>'
    )
    action = user_url(user.id, "memory")
    return (
        '<section aria-labelledby="edit-h"><h2 id="edit-h">Edit</h2>'
        '<p class="hint">Saved only if nobody wrote MEMORY.md since this page was loaded.</p>'
        + form(action, ctx.token, fields, "Save MEMORY.md")
        + "</section>"
    )


def save_memory(ctx: Ctx, user: User) -> Page | str:
    """The edit form's POST: written over the ETag it was loaded with; a stale ETag is
    a 412 page that keeps the operator's text and writes nothing."""
    from agent_harness.errors import PreconditionFailedError

    existing_user(ctx, user)
    content, etag = ctx.form.get("content", ""), ctx.form.get("etag", "")
    try:
        files.put_memory(
            ctx.rt,
            user,
            content.replace("\r\n", "\n"),
            if_match=etag or None,
            if_none_match=None if etag else "*",
            writer="console",
        )
    except PreconditionFailedError:
        message = notice(
            "MEMORY.md changed since this page was loaded (consolidation or another person "
            "wrote it), so nothing was saved. Your text is kept below; reload to see the "
            "current version.",
            "error",
        )
        page = memory_page(ctx, user, draft=content, message=message)
        page.status = 412
        return page
    return user_url(user.id, saved=1)


def versions_page(ctx: Ctx, user: User) -> Page:
    existing_user(ctx, user)
    cursor = ctx.q("older") or None  # the next_cursor of the page before
    versions, older = overview.memory_version_page(ctx.rt, user, cursor=cursor)
    if not versions:
        return Page(
            f"Versions of {user.id}",
            notice("MEMORY.md has no versions yet."),
            user_id=user.id,
            tab="versions",
        )
    a, b = ctx.q("a"), ctx.q("b")
    rows = []
    for n, v in enumerate(versions):
        pick = "".join(
            f'<label class="pick"><input type="radio" name="{side}" value="{esc(v.version_id)}"'
            f' aria-label="{side.upper()}: the version of {esc(v.at or v.version_id)}"'
            f"{' checked' if v.version_id == chosen or (not chosen and n == default) else ''}> "
            f"{side.upper()}</label>"
            for side, chosen, default in (("a", a, 1), ("b", b, 0))
        )
        restore = (
            "current"
            if v.is_latest
            else form(
                user_url(user.id, "rollback"),
                ctx.token,
                f'<input type="hidden" name="version_id" value="{esc(v.version_id)}">',
                "Roll back to this",
                describe=f"the version of {v.at or v.version_id}",
            )
        )
        rows.append(
            [
                pick,
                esc(v.at or "–"),
                esc(f"{v.size:,}"),
                esc(v.writer or "unknown (written before writers were recorded)"),
                f"<code>{esc(v.version_id)}</code>",
                restore,
            ]
        )
    listing = (
        f'<form method="get" action="{esc(user_url(user.id, "versions"))}">'
        + table(
            ["compare", "written", "bytes", "written by", "version", "rollback"],
            [[*r[:5], ""] for r in rows],
            caption="MEMORY.md versions, newest first",
        )
        + (f'<input type="hidden" name="older" value="{esc(cursor)}">' if cursor else "")
        + '<button type="submit">Compare A with B</button></form>'
        + (
            f"<p>{link(user_url(user.id, 'versions', older=older), 'Older versions')}</p>"
            if older
            else ""
        )
    )
    # the rollback forms cannot nest in the compare form: they get their own column list
    restores = "".join(
        f"<li><span>{esc(v.at or '–')} · <code>{esc(v.version_id)}</code></span> {r[5]}</li>"
        for v, r in zip(versions, rows, strict=True)
    )
    diff = _diff(ctx, user, a, b) if a and b else ""
    done = ctx.q("restored")
    body = (
        (
            notice(f"Rolled back: version {done} is MEMORY.md again, as a new version.", "ok")
            if done
            else ""
        )
        + diff
        + listing
        + '<section aria-labelledby="rb-h"><h2 id="rb-h">Roll back</h2>'
        + '<p class="hint">A rollback writes the old text as a new version; nothing is lost.</p>'
        + f'<ul class="restores">{restores}</ul></section>'
    )
    return Page(f"Versions of {user.id}", body, user_id=user.id, tab="versions")


#: lines of each version the console compares past their common head and tail (a
#: line diff is quadratic in the worst case), and rows of the diff it shows
MAX_DIFF_LINES, MAX_DIFF_ROWS, DIFF_CONTEXT = 2000, 1000, 3


def _diff(ctx: Ctx, user: User, a: str, b: str) -> str:
    """The changed lines of two versions with a few lines of context around each: the
    page stays small however large the versions are."""
    left = ctx.rt.store.get_version(user, MEMORY_FILE, a)
    right = ctx.rt.store.get_version(user, MEMORY_FILE, b)
    if left is None or right is None:
        raise NotFoundError("MEMORY.md has no such version (it may have been forgotten)")
    old, new = left.content.splitlines(), right.content.splitlines()
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    mid_old, mid_new = old[head : len(old) - tail], new[head : len(new) - tail]
    opcodes: list[tuple[str, int, int, int, int]] = [
        ("replace", 0, len(mid_old), 0, len(mid_new))  # too far apart to align
    ]
    if len(mid_old) <= MAX_DIFF_LINES and len(mid_new) <= MAX_DIFF_LINES:
        matcher = difflib.SequenceMatcher(None, mid_old, mid_new, autojunk=False)
        opcodes = list(matcher.get_opcodes())
    opcodes = [
        ("equal", 0, head, 0, head),
        *((t, i1 + head, i2 + head, j1 + head, j2 + head) for t, i1, i2, j1, j2 in opcodes),
        ("equal", len(old) - tail, len(old), len(new) - tail, len(new)),
    ]
    rows: list[str] = []
    changed = 0
    for tag, i1, i2, j1, j2 in opcodes:
        if tag != "equal":
            changed += max(i2 - i1, j2 - j1)
            pieces = [("row", k) for k in range(max(i2 - i1, j2 - j1))]
        else:  # only the context next to a change; the rest is one "unchanged" row
            pieces = _context(i2 - i1, first=i1 == 0, last=i2 == len(old))
        for kind, k in pieces:
            if len(rows) < MAX_DIFF_ROWS:
                rows.append(
                    _diff_row(tag, old, new, i1 + k, i2, j1 + k, j2)
                    if kind == "row"
                    else f'<tr class="equal"><td class="no"></td><td class="l" colspan="3">'
                    f"… {k:,} unchanged lines</td></tr>"
                )
    more = f" · the first {MAX_DIFF_ROWS:,} rows are shown" if len(rows) >= MAX_DIFF_ROWS else ""
    return (
        '<section aria-labelledby="diff-h"><h2 id="diff-h">Diff</h2>'
        f'<p class="hint">A: {esc(a)} · B: {esc(b)} · {changed} changed lines{more}</p>'
        '<table class="diff"><thead><tr><th scope="col">#</th><th scope="col">A</th>'
        '<th scope="col">#</th><th scope="col">B</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></section>"
    )


def _context(size: int, *, first: bool, last: bool) -> list[tuple[str, int]]:
    """An unchanged run of ``size`` lines: ("row", k) for the lines kept next to a change
    (none before the first change, none after the last), ("skip", n) for n left out."""
    keep = set(range(min(DIFF_CONTEXT, size))) if not first else set()
    keep |= set(range(max(0, size - DIFF_CONTEXT), size)) if not last else set()
    pieces: list[tuple[str, int]] = []
    k = 0
    while k < size:
        if k in keep:
            pieces.append(("row", k))
            k += 1
            continue
        start = k
        while k < size and k not in keep:
            k += 1
        pieces.append(("skip", k - start))
    return pieces


def _diff_row(tag: str, old: list[str], new: list[str], li: int, i2: int, rj: int, j2: int) -> str:
    lt = old[li] if li < i2 else None
    rt_ = new[rj] if rj < j2 else None
    left_no, left_text = (li + 1, esc(lt)) if lt is not None else ("", "")
    right_no, right_text = (rj + 1, esc(rt_)) if rt_ is not None else ("", "")
    return (
        f'<tr class="{tag}"><td class="no">{left_no}</td><td class="l">{left_text}</td>'
        f'<td class="no">{right_no}</td><td class="r">{right_text}</td></tr>'
    )


def rollback(ctx: Ctx, user: User) -> str:
    version_id = ctx.form.get("version_id", "").strip()
    if not version_id:
        from agent_harness.errors import InvalidRequestError

        raise InvalidRequestError("choose a version to roll back to")
    files.rollback_memory(ctx.rt, user, version_id, writer="console")
    return user_url(user.id, "versions", restored=version_id)


def _int(value: str) -> int | None:
    return int(value) if value.isdigit() else None
