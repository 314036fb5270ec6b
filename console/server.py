"""The console's HTTP server: loopback only, one thread per request.

    GET  /                               users (``?q=`` an id or prefix)
    GET  /users/<id>                     MEMORY.md, provenance (``?line=N``), edit, charts
    GET  /users/<id>/versions            versions, diff (``?a=&b=``), rollback
    GET  /users/<id>/ledgers             ledger days and one day's sections (``?day=``)
    GET  /users/<id>/review              the lines the write gate held, to approve or reject
    GET  /users/<id>/facts?id=<fact>     one ledger fact: its state, history, Correct
    GET  /users/<id>/sessions[/<sid>]    sessions and a session's thread log, each turn's
                                         memory record
    GET  /users/<id>/search              four match modes side by side, recall preview
    GET  /operations                     dead letters, forget
    GET  /scopes[/<scope>]               shared scopes; a scope's members, MEMORY.md,
                                         review queue and spend
    POST /users/<id>/memory | rollback   edit over an ETag, restore a version
    POST /users/<id>/review              approve (``operator``) or reject a held line
    POST /users/<id>/facts               correct a fact (``operator``): supersede, retract
    POST /operations/redrive | forget    redrive a DLQ, forget a user (typed confirmation)
    POST /scopes[/<scope>/members]       grant a role; /remove a member; /review decide
    POST /users/<id>/promote             promote a MEMORY.md line into a scope of the user's

Every request must name the console's own host (DNS rebinding) and carry the cookie its
launch link set (console.launch: another local process has no way in), and a POST must
also carry the console's token (in its forms) and come from its own origin: another site
in the operator's browser cannot drive it. Errors are pages with the
library's message and status; an unexpected one is logged here, never shown as a trace.
"""

from __future__ import annotations

import logging
import secrets
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, unquote, urlsplit

from agent_harness.errors import HarnessError
from console import views, views_data, views_facts, views_review, views_scopes, views_sessions
from console.launch import LAUNCH_PATH, Launch
from console.page import Ctx, Page, error_page
from console.target import TargetError

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_harness.ids import User
    from console.target import Target

__all__ = ["LOOPBACK", "ConsoleServer"]

LOOPBACK = "127.0.0.1"
STATIC = Path(__file__).resolve().parent / "static"
STATIC_TYPES = {
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}
MAX_FORM_BYTES = 2_000_000
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
        "frame-ancestors 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

UNEXPECTED = "The console hit an unexpected error; its terminal shows the details."

logger = logging.getLogger("console")


class ConsoleServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, target: Target, port: int) -> None:
        self.target = target
        self.token = secrets.token_urlsafe(24)
        super().__init__((LOOPBACK, port), _Handler)
        self.launch = Launch(self.server_address[1])

    @property
    def origin(self) -> str:
        return f"http://{LOOPBACK}:{self.server_address[1]}"

    @property
    def launch_url(self) -> str:
        """What `make console` prints: opened once, it signs this browser in."""
        return self.origin + self.launch.link

    def hosts(self) -> set[str]:
        port = self.server_address[1]
        return {f"{LOOPBACK}:{port}", f"localhost:{port}"}


Result = Page | str  # a page, or where to redirect (303) after a POST


def _route(method: str, parts: list[str]) -> Callable[[Ctx], Result] | None:
    """The view for a path, its path parameters bound; None for no such page."""
    if method == "GET":
        if parts in ([], ["users"]):
            return views.users_page
        if parts == ["operations"]:
            return views_data.operations_page
        if parts == ["scopes"]:
            return views_scopes.scopes_page
        if len(parts) == 2 and parts[0] == "scopes":
            return lambda ctx: views_scopes.scope_page(ctx, parts[1])
        if parts and parts[0] == "users" and len(parts) >= 2:
            user = parts[1]
            tail = parts[2:]
            pages: dict[tuple[str, ...], Callable[[Ctx, User], Page]] = {
                (): views.memory_page,
                ("versions",): views.versions_page,
                ("ledgers",): views_data.ledgers_page,
                ("review",): views_review.review_page,
                ("facts",): views_facts.fact_page,
                ("sessions",): views_sessions.sessions_page,
                ("search",): views_data.search_page,
            }
            if tuple(tail) in pages:
                page = pages[tuple(tail)]
                return lambda ctx: page(ctx, views.user_of(user))
            if len(tail) == 2 and tail[0] == "sessions":
                return lambda ctx: views_sessions.session_page(ctx, views.user_of(user), tail[1])
    if method == "POST":
        if parts == ["operations", "redrive"]:
            return views_data.redrive
        if parts == ["operations", "forget"]:
            return views_data.forget
        if parts == ["scopes"]:
            return views_scopes.add_member
        if len(parts) == 3 and parts[0] == "scopes":
            scope_actions: dict[str, Callable[[Ctx, str], Result]] = {
                "members": views_scopes.add_member,
                "remove": views_scopes.remove_member,
                "review": views_scopes.decide_scope_review,
            }
            if parts[2] in scope_actions:
                scope_action = scope_actions[parts[2]]
                return lambda ctx: scope_action(ctx, parts[1])
        if len(parts) == 3 and parts[0] == "users":
            user = parts[1]
            actions: dict[str, Callable[[Ctx, User], Result]] = {
                "memory": views.save_memory,
                "rollback": views.rollback,
                "review": views_review.decide_review,
                "facts": views_facts.correct,
                "promote": views_scopes.promote,
            }
            if parts[2] in actions:
                action = actions[parts[2]]
                return lambda ctx: action(ctx, views.user_of(user))
    return None


class _Handler(BaseHTTPRequestHandler):
    server: ConsoleServer
    server_version = "agent-memory-console"

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == LAUNCH_PATH and self._own_host():
            self._sign_in(dict(parse_qsl(url.query)).get("token", ""))
        elif self._admitted():
            if url.path.startswith("/static/"):
                self._static(url.path.removeprefix("/static/"))
            else:
                self._handle("GET")

    def do_POST(self) -> None:
        if self._admitted():
            self._handle("POST")

    def _own_host(self) -> bool:
        if self.headers.get("Host", "") in self.server.hosts():
            return True
        message = "This console answers only on its loopback address."
        self._send_page(error_page(421, "Wrong host", message))
        return False

    def _admitted(self) -> bool:
        """The host is the console's and the request carries this launch's cookie; else
        the refusal is sent (a page that shows nothing of the stack)."""
        if not self._own_host():
            return False
        if self.server.launch.admits(self.headers.get("Cookie")):
            return True
        message = (
            "Open the launch link `make console` printed in its terminal (it works once; "
            "restart the console for a new one). Nothing was shown or changed."
        )
        self._send_page(error_page(401, "Not signed in", message))
        return False

    def _sign_in(self, token: str) -> None:
        if self.server.launch.admits(self.headers.get("Cookie")):  # signed in: a reload
            self._send(303, b"", "text/plain", {"Location": "/"})
            return
        cookie = self.server.launch.exchange(token)
        if cookie is None:
            message = (
                "This launch link was used already or is not this console's: restart "
                "`make console` for a new one."
            )
            self._send_page(error_page(403, "Launch link spent", message))
            return
        self._send(303, b"", "text/plain", {"Location": "/", "Set-Cookie": cookie})

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        user_id = None
        try:
            parts = [unquote(p) for p in url.path.strip("/").split("/") if p]
            user_id = parts[1] if len(parts) > 1 and parts[0] == "users" else None
            form: dict[str, str] = {}
            if method == "POST":
                form = self._form()
                if not self._same_origin(form):
                    self._send_page(
                        error_page(
                            403,
                            "Refused",
                            "This form did not come from this console's own page "
                            "(reload it and try again); nothing was changed.",
                            user_id,
                        )
                    )
                    return
            view = _route(method, parts)
            if view is None:
                status = 404 if method == "GET" else 405
                self._send_page(
                    error_page(
                        status,
                        "Not found",
                        f"There is no page {url.path!r} in the console.",
                        user_id,
                    )
                )
                return
            ctx = Ctx(self.server.target.get(), dict(parse_qsl(url.query)), form, self.server.token)
            result = view(ctx)
        except TargetError as exc:
            self._send_page(error_page(503, "Stack unreachable", str(exc)))
            return
        except HarnessError as exc:
            status = exc.status if 400 <= exc.status < 600 else 500
            title = (
                "Bad request"
                if status in (400, 422)
                else "Not found"
                if status == 404
                else "Cannot do that"
            )
            if status == 503:
                title = "Stack unavailable"
            message = str(exc) + (" Nothing was changed." if method == "POST" else "")
            self._send_page(error_page(status, title, message, user_id if status != 400 else None))
            return
        except Exception:
            logger.exception("console request failed: %s %s", method, url.path)
            detail = " Nothing was changed by this request." if method == "POST" else ""
            self._send_page(error_page(500, "Console error", UNEXPECTED + detail))
            return
        if isinstance(result, str):
            self._send(303, b"", "text/plain", {"Location": result})
        else:
            self._send_page(result)

    def _form(self) -> dict[str, str]:
        from agent_harness.errors import InvalidRequestError, PayloadTooLargeError

        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_FORM_BYTES:
            raise PayloadTooLargeError("the form is too large")
        kind = self.headers.get("Content-Type", "").split(";")[0].strip()
        if kind != "application/x-www-form-urlencoded":
            raise InvalidRequestError("send the console's own forms")
        raw = self.rfile.read(length).decode("utf-8", errors="replace")
        return dict(parse_qsl(raw, keep_blank_values=True))

    def _same_origin(self, form: dict[str, str]) -> bool:
        origin = self.headers.get("Origin")
        if origin is not None and origin not in {f"http://{h}" for h in self.server.hosts()}:
            return False
        return secrets.compare_digest(form.get("csrf", ""), self.server.token)

    def _static(self, name: str) -> None:
        file = (STATIC / name).resolve()
        if file.parent != STATIC or not file.is_file() or file.suffix not in STATIC_TYPES:
            self._send_page(error_page(404, "Not found", "No such file."))
            return
        self._send(200, file.read_bytes(), STATIC_TYPES[file.suffix])

    def _send_page(self, page: Page) -> None:
        body = page.render(self.server.target.label).encode("utf-8")
        self._send(page.status, body, "text/html; charset=utf-8", page.headers)

    def _send(
        self, status: int, body: bytes, kind: str, extra: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in {**SECURITY_HEADERS, **(extra or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """One line per request, without secrets: the launch link's token (spent or
        not) and every query string are left out."""
        path = urlsplit(self.path).path
        sys.stderr.write(f"console: {self.command} {path} -> {args[1] if len(args) > 1 else ''}\n")
