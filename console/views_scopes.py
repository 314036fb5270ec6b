"""Shared memory scopes: the scopes and their members; one scope's members (grant,
change, remove), its MEMORY.md, its review queue (members' promotions and what the gate
held, to approve or reject) and its own spend; and the promotion of a user's MEMORY.md
line into a scope they belong to. Every rule is the library's: ``scopes`` (roles, the
choke point ``resolve``), ``memory.facts.promotion`` and ``memory.review``, as in the API."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast
from urllib.parse import quote, urlencode

from agent_harness import scopes
from agent_harness.errors import InvalidRequestError, ValidationFailedError
from agent_harness.ids import User
from agent_harness.memory import files
from agent_harness.memory.facts.authority import ASSISTANT, parse_fact
from agent_harness.memory.review import decide, list_review
from agent_harness.usage import usage_report
from console.charts import line_chart
from console.page import (
    Page,
    authority_badge,
    clipped,
    decide_forms,
    esc,
    form,
    link,
    notice,
    review_choice,
    table,
    user_url,
)

if TYPE_CHECKING:
    from console.page import Ctx

__all__ = [
    "add_member",
    "decide_scope_review",
    "promote",
    "promote_section",
    "remove_member",
    "scope_page",
    "scope_url",
    "scopes_page",
]

ROLES = ("member", "maintainer")
CHART_DAYS = 30


def scope_url(scope: str, *rest: str, **query: object) -> str:
    path = "/scopes/" + "/".join([quote(scope, safe=":"), *rest])
    return path + (f"?{urlencode(query)}" if query else "")


def _role_select(name: str, chosen: str = "member", label: str = "Role") -> str:
    options = "".join(
        f'<option value="{r}"{" selected" if r == chosen else ""}>{r}</option>' for r in ROLES
    )
    select = f'<select id="{name}" name="role">{options}</select>'
    return f'<label for="{name}">{esc(label)}</label>{select}'


# -- the scopes ----------------------------------------------------------------------------


def scopes_page(ctx: Ctx) -> Page:
    listed = cast("list[dict[str, Any]]", scopes.list_scopes(ctx.rt)["scopes"])
    names = {str(s["scope"]) for s in listed}
    rows = [
        [
            link(scope_url(str(s["scope"])), s["scope"]),
            esc(s["members"]),
            esc(s["roles"]["maintainer"]),
        ]
        for s in listed
    ]
    if "org" not in names:  # every user's, members or not
        rows.insert(0, [link(scope_url("org"), "org"), "every user", "0"])
    listing = table(
        ["scope", "members", "maintainers"], rows, caption="Shared memory scopes", cls="scopes"
    )
    fields = (
        '<label for="scope">Scope</label>'
        '<input id="scope" name="scope" placeholder="project:apollo" required>'
        '<label for="user">User id</label><input id="user" name="user" required>'
        + _role_select("role")
    )
    grant = (
        '<section aria-labelledby="grant-h"><h2 id="grant-h">Grant a role</h2>'
        '<p class="hint">A scope is <code>project:&lt;name&gt;</code>, '
        "<code>agent:&lt;name&gt;</code> or <code>org</code>. A member reads its memory; "
        "a maintainer writes it and decides its review queue.</p>"
        + form("/scopes", ctx.token, fields, "Grant")
        + "</section>"
    )
    return Page("Scopes", listing + grant)


def add_member(ctx: Ctx, scope_text: str | None = None) -> str:
    """Grant a role (``scope`` from the path, or the form's on the scopes page)."""
    scope_text = scope_text or ctx.form.get("scope", "").strip()
    user_id = ctx.form.get("user", "").strip()
    if not user_id:
        raise InvalidRequestError("type the user id to grant the role to")
    done = scopes.set_member(ctx.rt, scope_text, User.from_id(user_id), ctx.form.get("role"))
    return scope_url(done["scope"], done=f"{done['user_id']} is a {done['role']}")


def remove_member(ctx: Ctx, scope_text: str) -> str:
    user_id = ctx.form.get("user", "").strip()
    if not user_id:
        raise InvalidRequestError("choose the member to remove")
    done = scopes.remove_member(ctx.rt, scope_text, User.from_id(user_id))
    return scope_url(str(done["scope"]), done=f"{done['user_id']} is no longer a member")


# -- one scope -----------------------------------------------------------------------------


def scope_page(ctx: Ctx, scope_text: str) -> Page:
    scope = scopes.shared_scope(scope_text)
    owner = User.for_scope(str(scope))
    name = str(scope)
    done = notice(ctx.q("done"), "ok") if ctx.q("done") else ""
    body = done + _members(ctx, name) + _memory(ctx, owner) + _queue(ctx, name, owner)
    spend = usage_report(ctx.rt, owner, CHART_DAYS)
    body += (
        '<section class="charts" aria-label="Charts">'
        + line_chart(f"Tokens per day by role, last {CHART_DAYS} days", "tokens", spend.series())
        + "</section>"
    )
    return Page(f"Scope {name}", body)


def _members(ctx: Ctx, name: str) -> str:
    listed = cast("list[dict[str, str]]", scopes.list_members(ctx.rt, name)["members"])
    rows = []
    for number, m in enumerate(listed):
        who = str(m["user_id"])
        keep = f'<input type="hidden" name="user" value="{esc(who)}">'
        change = form(
            scope_url(name, "members"),
            ctx.token,
            keep + _role_select(f"role-{number}", m["role"], f"Role of {who}"),
            "Set role",
            describe=who,
        )
        remove = form(
            scope_url(name, "remove"), ctx.token, keep, "Remove", danger=True, describe=who
        )
        rows.append([link(user_url(who), who), esc(m["role"]), esc(m["added_at"]), change + remove])
    hint = " (and every user of the stack reads it)" if name == "org" else ""
    members = (
        table(["user", "role", "since", "change"], rows, caption=f"Members of {name}{hint}")
        if rows
        else notice(f"{name} has no members yet{hint}.")
    )
    fields = '<label for="user">User id</label><input id="user" name="user" required>'
    add = form(scope_url(name, "members"), ctx.token, fields + _role_select("role"), "Add member")
    return (
        '<section aria-labelledby="members-h"><h2 id="members-h">Members</h2>'
        + members
        + add
        + "</section>"
    )


def _memory(ctx: Ctx, owner: User) -> str:
    document = files.get_memory(ctx.rt, owner)
    if document.etag is None:
        text = notice("No MEMORY.md yet: a maintainer's save or an approved promotion writes it.")
    else:
        items = []
        for line in document.content.splitlines():
            fact = parse_fact(line) if line.strip() else None
            shown = authority_badge(fact.authority) + esc(fact.text) if fact else esc(line)
            items.append(f"<li>{shown or '&nbsp;'}</li>")
        text = f'<ol class="memory" aria-label="{esc(owner.id)} MEMORY.md">{"".join(items)}</ol>'
    return (
        '<section aria-labelledby="memory-h"><h2 id="memory-h">MEMORY.md</h2>' + text + "</section>"
    )


def _queue(ctx: Ctx, name: str, owner: User) -> str:
    items = list_review(ctx.rt, owner)
    if not items:
        listing = notice("Nothing waits for review.")
    else:
        rows = []
        for item in items:
            rows.append(
                [
                    f'<p class="line">{esc(item.text)}</p>',
                    esc(item.reason),
                    f'<div class="src"><code>{esc(item.source)}</code></div>'
                    f'<div class="meta">{esc(item.created_at)}</div>',
                    decide_forms(scope_url(name, "review"), ctx.token, item.id, item.text),
                ]
            )
        listing = table(
            ["proposed line", "why", "from", "decide"],
            rows,
            caption=f"{len(items)} waiting for a maintainer, oldest first",
            cls="review",
        )
    return (
        '<section aria-labelledby="queue-h"><h2 id="queue-h">Review queue</h2>'
        '<p class="hint"><strong>Approve</strong> writes the line into the scope\'s '
        "MEMORY.md and ledger with <code>operator</code> authority, keeping who proposed "
        "it; <strong>Reject</strong> drops it.</p>" + listing + "</section>"
    )


def decide_scope_review(ctx: Ctx, scope_text: str) -> str:
    scope = scopes.shared_scope(scope_text)
    item_id, action = review_choice(ctx)
    decision = decide(ctx.rt, User.for_scope(str(scope)), item_id, action)
    verb = "Approved" if decision.action == "approve" else "Rejected"
    return scope_url(str(scope), done=f"{verb} {decision.id}")


# -- promotion from a user's MEMORY.md -----------------------------------------------------


def promote_section(ctx: Ctx, user: User, lines: list[str]) -> str:
    """On a user's MEMORY.md page: a fact of theirs proposed for a scope they belong to."""
    member_of = sorted({m.scope for m in ctx.rt.table.scopes_of(user)} - {"org"})
    facts = [(n, line) for n, line in enumerate(lines, 1) if parse_fact(line) is not None]
    if not facts:
        return ""
    choices = "".join(
        f'<option value="{n}">{esc(clipped(parse_fact(line).text))}</option>'  # type: ignore[union-attr]
        for n, line in facts
    )
    targets = "".join(f'<option value="{esc(s)}">{esc(s)}</option>' for s in [*member_of, "org"])
    fields = (
        f'<label for="promote-line">Fact</label><select id="promote-line" name="line">{choices}'
        f'</select><label for="promote-scope">Scope</label><select id="promote-scope" '
        f'name="scope">{targets}</select>'
    )
    return (
        '<section aria-labelledby="promote-h"><h2 id="promote-h">Promote to a shared '
        'scope</h2><p class="hint">Proposes the fact for a scope the user belongs to, with '
        "the user as its provenance: it waits in the scope's review queue, or is written "
        "at once when the user maintains the scope.</p>"
        + form(user_url(user.id, "promote"), ctx.token, fields, "Promote")
        + "</section>"
    )


def promote(ctx: Ctx, user: User) -> str:
    """The promote button: one line of the user's MEMORY.md, as theirs (their read grant
    through ``scopes.resolve``; a 403 page and nothing written when they are no member),
    with the authority it has there."""
    from agent_harness.memory.facts.promotion import promote as propose_lines

    try:
        number = int(ctx.form.get("line", ""))
    except ValueError:
        raise InvalidRequestError("choose a fact of MEMORY.md to promote") from None
    lines = files.get_memory(ctx.rt, user).content.splitlines()
    fact = parse_fact(lines[number - 1]) if 0 < number <= len(lines) else None
    if fact is None:
        raise ValidationFailedError("that line of MEMORY.md is not a fact (reload the page)")
    grant = scopes.resolve(ctx.rt, user, scopes.shared_scope(ctx.form.get("scope")), "read")
    # the line keeps whose words it holds (untagged: the gate's default): promoting it
    # vouches for nothing; a maintainer's approval is what makes a line ``operator``
    authority = fact.authority or ASSISTANT
    done = propose_lines(
        ctx.rt, user, grant, [f"- {fact.text}"], source=None, origin="console", authority=authority
    )
    what = (
        f"queued for review in {done.scope}"
        if done.status == "queued"
        else f"promoted into {done.scope}"
    )
    return user_url(user.id, promoted=what)
