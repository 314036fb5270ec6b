"""The page frame and the HTML helpers every view uses. Everything from the stack is
text and is escaped here (``esc``); a view never builds markup from data any other way."""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import TYPE_CHECKING, Literal
from urllib.parse import quote, urlencode

from agent_harness.errors import InvalidRequestError

if TYPE_CHECKING:
    from agent_harness.runtime import Runtime

__all__ = [
    "REVIEW_ACTIONS",
    "Ctx",
    "Page",
    "authority_badge",
    "clipped",
    "decide_forms",
    "error_page",
    "esc",
    "form",
    "ledger_url",
    "link",
    "notice",
    "review_choice",
    "table",
    "user_url",
]

ReviewAction = Literal["approve", "reject"]
REVIEW_ACTIONS: dict[str, ReviewAction] = {"approve": "approve", "reject": "reject"}
#: a line shown in a button's accessible name or a choice: at most this many characters
NAME_CHARS = 60


def esc(value: object) -> str:
    return escape("" if value is None else str(value), quote=True)


def user_url(user_id: str, *rest: str, **query: object) -> str:
    """``/users/<id>/<rest>?query``; the id is one percent-encoded path segment."""
    path = "/users/" + quote(user_id, safe="") + "".join("/" + quote(r, safe="") for r in rest)
    params = {k: str(v) for k, v in query.items() if v not in (None, "")}
    return path + ("?" + urlencode(params) if params else "")


def ledger_url(user_id: str, path: str, line: int) -> str | None:
    """The ledgers page at ``path``'s line (an active or archived day), or None when
    ``path`` is not a ledger."""
    from agent_harness.paths import archive_day, ledger_day

    if day := ledger_day(path):
        return user_url(user_id, "ledgers", day=day) + f"#L{line}"
    if day := archive_day(path):
        return user_url(user_id, "ledgers", day=day, archived=1) + f"#L{line}"
    return None


def link(href: str, text: object, **attrs: str) -> str:
    extra = "".join(f' {k.rstrip("_").replace("_", "-")}="{esc(v)}"' for k, v in attrs.items())
    return f'<a href="{esc(href)}"{extra}>{esc(text)}</a>'


#: what each authority means (agent_harness.memory.facts.authority), and how trusted
#: it is: ``ok`` a person or the user, ``""`` a caller's save, ``warn`` the agent or a tool
_AUTHORITIES = {
    "operator": ("ok", "a person: the API's PUT, the console, the CLI, an approved review item"),
    "user": ("ok", "stated in the user's own message"),
    "import": ("ok", "the user's words in imported history"),
    "save:api": ("", "memory_save over the HTTP API"),
    "save:mcp": ("", "memory_save by an MCP client"),
    "save:agent": ("warn", "memory_save by the agent model"),
    "assistant": ("warn", "the agent's own statement"),
}


def authority_badge(authority: str | None) -> str:
    """Who a fact's words come from, as a badge (its meaning in the tooltip); a fact
    line without a tag was written before authorities existed, or by hand."""
    if not authority:
        return (
            '<span class="badge authority none" title="no authority tag: written before '
            'authorities existed, or by hand">no authority</span>'
        )
    if authority.startswith("tool:"):
        kind, meaning = "warn", f"a tool result ({authority.removeprefix('tool:')})"
    else:
        kind, meaning = _AUTHORITIES.get(
            authority, ("warn", "an authority this console does not know")
        )
    klass = f"badge authority {kind}".strip()
    return f'<span class="{klass}" title="{esc(meaning)}">{esc(authority)}</span>'


def table(headers: list[str], rows: list[list[str]], *, caption: str = "", cls: str = "") -> str:
    """A table of already-escaped cells (``rows``) under plain-text ``headers``."""
    head = "".join(f'<th scope="col">{esc(h)}</th>' for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    klass = f' class="{esc(cls)}"' if cls else ""
    return f"<table{klass}>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def form(
    action: str,
    token: str,
    fields: str,
    button: str,
    *,
    danger: bool = False,
    describe: str = "",
) -> str:
    """A POST form with the console's anti-forgery token; ``describe`` completes the
    button's accessible name where several buttons share a text (one per version)."""
    klass = ' class="danger"' if danger else ""
    label = f' aria-label="{esc(f"{button}: {describe}")}"' if describe else ""
    return (
        f'<form method="post" action="{esc(action)}">'
        f'<input type="hidden" name="csrf" value="{esc(token)}">{fields}'
        f'<button type="submit"{klass}{label}>{esc(button)}</button></form>'
    )


def clipped(text: str) -> str:
    """``text`` cut to ``NAME_CHARS``, an ellipsis marking the cut."""
    return text if len(text) <= NAME_CHARS else text[: NAME_CHARS - 1] + "…"


def decide_forms(action: str, token: str, item_id: str, text: str) -> str:
    """Approve and Reject of one review item: each posts ``id`` and ``action`` to
    ``action``, its button named with the item's (clipped) text."""
    keep = f'<input type="hidden" name="id" value="{esc(item_id)}">'
    return "".join(
        form(
            action,
            token,
            keep + f'<input type="hidden" name="action" value="{verb}">',
            verb.capitalize(),
            danger=verb == "reject",
            describe=clipped(text),
        )
        for verb in REVIEW_ACTIONS
    )


@dataclass
class Page:
    """One HTML page: a title, its body, and the user whose tabs it shows (if any)."""

    title: str
    body: str
    status: int = 200
    user_id: str | None = None
    tab: str = ""
    headers: dict[str, str] = field(default_factory=dict)

    def render(self, target: str) -> str:
        nav = [link("/", "Users"), link("/scopes", "Scopes"), link("/operations", "Operations")]
        tabs = ""
        if self.user_id is not None:
            names = [
                ("", "MEMORY.md"),
                ("versions", "Versions"),
                ("ledgers", "Ledgers"),
                ("review", "Review"),
                ("sessions", "Sessions"),
                ("search", "Search"),
            ]
            items = []
            for path, name in names:
                href = user_url(self.user_id, *([path] if path else []))
                current = ' aria-current="page"' if path == self.tab else ""
                items.append(f'<li><a href="{esc(href)}"{current}>{esc(name)}</a></li>')
            tabs = (
                f'<nav class="tabs" aria-label="User {esc(self.user_id)}">'
                f'<span class="who">{esc(self.user_id)}</span><ul>{"".join(items)}</ul></nav>'
            )
        return (
            "<!doctype html>\n"
            '<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(self.title)} · agent memory console</title>"
            '<link rel="stylesheet" href="/static/console.css">'
            '<script src="/static/console.js" defer></script></head><body>'
            '<header class="top"><a class="brand" href="/">agent memory console</a>'
            f'<nav aria-label="Console">{" ".join(nav)}</nav>'
            f'<span class="target" title="loopback only">{esc(target)}</span></header>'
            f'{tabs}<main id="main"><h1>{esc(self.title)}</h1>{self.body}</main></body></html>'
        )


def notice(text: str, kind: str = "info") -> str:
    """A message box: ``info``, ``ok`` or ``error`` (errors are announced to readers)."""
    role = ' role="alert"' if kind == "error" else ' role="status"'
    return f'<p class="notice {esc(kind)}"{role}>{esc(text)}</p>'


def error_page(status: int, title: str, message: str, user_id: str | None = None) -> Page:
    return Page(title, notice(message, "error"), status=status, user_id=user_id)


@dataclass
class Ctx:
    """What a view gets: the stack's runtime, the query string, the posted form (POST)
    and the console's anti-forgery token for the forms it renders."""

    rt: Runtime
    query: dict[str, str]
    form: dict[str, str]
    token: str

    def q(self, name: str, default: str = "") -> str:
        return self.query.get(name, default)


def review_choice(ctx: Ctx) -> tuple[str, ReviewAction]:
    """The item and the action a review decision's POST names (400 for none, or for
    anything but approve or reject)."""
    item_id = ctx.form.get("id", "").strip()
    action = REVIEW_ACTIONS.get(ctx.form.get("action", ""))
    if not item_id:
        raise InvalidRequestError("choose a review item")
    if action is None:
        raise InvalidRequestError("the action must be approve or reject")
    return item_id, action
