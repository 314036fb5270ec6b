"""Pages of sessions: a user's sessions, and one session's thread log turn by turn, each
turn with its memory record (what memory reached its model and why)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_harness import overview
from agent_harness.agent.history import list_turns
from agent_harness.errors import NotFoundError
from agent_harness.ids import validate_session_id
from agent_harness.memory.chain import memory_tools_of
from agent_harness.memory.facts.authority import parse_fact
from console.page import Page, authority_badge, esc, link, notice, table, user_url
from console.views import existing_user
from console.views_data import score_text, source_link, turn_link

if TYPE_CHECKING:
    from agent_harness.ids import User
    from agent_harness.records import RecalledLine, TurnRecord
    from console.page import Ctx

__all__ = ["session_page", "sessions_page"]


def sessions_page(ctx: Ctx, user: User) -> Page:
    sessions = overview.list_sessions(ctx.rt, user)
    if not sessions:
        existing_user(ctx, user)
        return Page(
            f"Sessions of {user.id}", notice("No sessions yet."), user_id=user.id, tab="sessions"
        )
    rows = [
        [
            link(user_url(user.id, "sessions", s.session_id), s.session_id),
            esc(s.turns),
            esc(s.first_at or "–"),
            esc(s.last_at or "–"),
        ]
        for s in sessions
    ]
    return Page(
        f"Sessions of {user.id}",
        table(["session", "turns", "first", "last"], rows, caption="Most recently active first"),
        user_id=user.id,
        tab="sessions",
    )


def session_page(ctx: Ctx, user: User, session_id: str) -> Page:
    validate_session_id(session_id)
    records, _ = list_turns(ctx.rt, user, session_id, limit=500)
    if not records:
        raise NotFoundError(f"{user.id!r} has no session {session_id!r}")
    body = "".join(_turn_view(user, r) for r in records)
    return Page(f"Session {session_id}", body, user_id=user.id, tab="sessions")


def _turn_view(user: User, record: TurnRecord) -> str:
    usage = record.usage
    marks = []
    if record.compacted:
        marks.append('<span class="badge warn">compacted: older turns were summarised here</span>')
    if record.source == "import":
        marks.append('<span class="badge">imported</span>')
    messages = []
    if record.instructions is not None:  # a chat completion's own system messages
        messages.append(
            '<li class="msg system"><span class="role">instructions</span> '
            f"<pre>{esc(record.instructions)}</pre></li>"
        )
    for m in record.messages:
        calls = "".join(
            '<div class="call"><span class="role">tool call</span> '
            f'<code>{esc(c.name)}</code> <code class="id">{esc(c.id)}</code>'
            f"<pre>{esc(c.arguments)}</pre></div>"
            for c in m.tool_calls
        )
        if m.role == "tool":
            content = (
                '<span class="role">tool result</span> '
                f"<code>{esc(m.name or '')}</code> "
                f'<code class="id">{esc(m.tool_call_id or "")}</code>'
                f"<pre>{esc(m.content)}</pre>"
            )
        else:
            content = (
                f'<span class="role">{esc(m.role)}</span> '
                f'<span class="text">{esc(m.content)}</span>'
            )
        messages.append(f'<li class="msg {esc(m.role)}">{content}{calls}</li>')
    return (
        f'<article class="turn" id="turn-{record.turn}">'
        f"<h2>Turn {record.turn} {''.join(marks)}</h2>"
        f'<p class="meta">{esc(record.created_at)} · model {esc(record.model or "–")} · '
        f"{usage.input_tokens:,} in / {usage.output_tokens:,} out tokens · "
        f"memory {record.memory.total_tokens:,} tokens</p>"
        f'<ol class="messages">{"".join(messages)}</ol>{_memory_record(user, record)}</article>'
    )


def _memory_record(user: User, record: TurnRecord) -> str:
    """What memory reached the turn (the record ``memory.chain.turn_memory`` serves): the
    MEMORY.md version injected, each recalled line and why, what recall cut, and the
    memory tools the turn ran with what they returned."""
    memory, turn = record.memory, record.turn
    if memory.tokens:
        version = (
            link(
                user_url(user.id, "versions", b=memory.version_id),
                f"version {memory.version_id}",
            )
            if memory.version_id
            else "version –"
        )
        size = f"{memory.tokens:,} tokens"
        if memory.truncated:
            size += f", truncated from {memory.original_tokens:,}"
        injected = f"{version} · ETag <code>{esc(memory.etag or '–')}</code> · {esc(size)}"
    else:
        injected = "not injected (no MEMORY.md then, or memory hooks off)"
    lines, cut = memory.lines, memory.cut
    if lines:
        recall = f"{memory.recall_tokens:,} tokens · {len(lines)} line{'s' * (len(lines) != 1)}"
    elif memory.recalled:  # a turn recorded before the lines were: their sources only
        recall = f"{memory.recall_tokens:,} tokens · " + esc(", ".join(memory.recalled))
    else:
        recall = "nothing recalled"
    budget = (
        f"token budget: {len(cut.budget)} line{'s' * (len(cut.budget) != 1)} "
        f"({esc(', '.join(cut.budget))})"
        if cut.budget
        else "token budget: none"
    )
    cuts = f"{budget} · under the score floor: {cut.floor} · held by the checks: {cut.held}"
    tools = memory_tools_of(record)
    items = [
        ("MEMORY.md", injected),
        ("Recall", recall),
        ("Recall cut", cuts),
        ("Memory tools", f"{len(tools)} call{'s' * (len(tools) != 1)}" if tools else "none"),
    ]
    facts = "".join(f"<div><dt>{esc(k)}</dt><dd>{v}</dd></div>" for k, v in items)
    shown = (
        table(
            ["authority", "fact id", "score", "day", "source", "line"],
            [_recalled_row(user, line) for line in lines],
            caption=f"Lines recalled for turn {turn}, in the order shown",
            cls="compact recalled",
        )
        if lines
        else ""
    )
    ran = (
        table(
            ["tool", "call", "arguments", "result"],
            [
                [
                    f"<code>{esc(t['name'])}</code>",
                    f'<code class="id">{esc(t["call_id"])}</code>',
                    f"<pre>{esc(t['arguments'])}</pre>",
                    f"<pre>{esc(t['result'])}</pre>"
                    if t["result"] is not None
                    else '<span class="meta">no result recorded</span>',
                ]
                for t in tools
            ],
            caption=f"Memory tools of turn {turn}",
            cls="compact tools",
        )
        if tools
        else ""
    )
    return (
        f'<section class="memory-record" aria-labelledby="mem-{turn}">'
        f'<h3 id="mem-{turn}">Memory record</h3><dl class="record">{facts}</dl>'
        f"{shown}{ran}</section>"
    )


def _recalled_row(user: User, line: RecalledLine) -> list[str]:
    fact = parse_fact(line.text)
    return [
        authority_badge(line.authority),
        f'<code class="id">{esc(line.fact_id)}</code>',
        score_text(line.score),
        esc(line.day or "–"),
        _recalled_source(user, line),
        esc(fact.text if fact is not None else line.text),
    ]


def _recalled_source(user: User, line: RecalledLine) -> str:
    """A ledger or MEMORY.md line links to where it is; a past message to its turn."""
    if line.session_id and line.turn:
        return turn_link(user, line.session_id, line.turn)
    path, _, number = line.source.rpartition("#")
    if path and number.isdigit():
        return source_link(user, path, int(number))
    return f'<span class="src">{esc(line.source)}</span>'
