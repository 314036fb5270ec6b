"""The console's per-launch secret: loopback is no boundary between the local processes of
one machine, so every request must carry a cookie only the operator's browser holds.

    make console prints  http://127.0.0.1:<port>/launch?token=<one-time token>
    GET /launch?token=   the first time: sets the session cookie (HttpOnly, SameSite=
                         Strict) and redirects to /; the token is then spent
    every other request  without the cookie: 401, nothing shown

Both values are random per launch and live only in this process's memory; neither is
ever logged. A browser sends a 127.0.0.1 cookie to every port of that host, so the
cookie's name is bound to this launch and this port (``console-<port>-<launch id>``):
another console, or a console started again on the port, never takes or answers to
it, and a cookie of an earlier launch opens nothing.
"""

from __future__ import annotations

import secrets
import threading
from http.cookies import CookieError, SimpleCookie

__all__ = ["LAUNCH_PATH", "Launch"]

LAUNCH_PATH = "/launch"


class Launch:
    def __init__(self, port: int) -> None:
        self._token: str | None = secrets.token_urlsafe(24)
        self._secret = secrets.token_urlsafe(32)
        self._lock = threading.Lock()
        # cookies are per host, not per port: the name is this launch's and this port's
        self.cookie = f"console-{port}-{secrets.token_hex(6)}"
        self.link = f"{LAUNCH_PATH}?token={self._token}"

    def exchange(self, token: str) -> str | None:
        """The Set-Cookie value for the launch token, once; None for any other token."""
        with self._lock:
            if self._token is None or not secrets.compare_digest(token, self._token):
                return None
            self._token = None
        return f"{self.cookie}={self._secret}; HttpOnly; SameSite=Strict; Path=/"

    def admits(self, cookie_header: str | None) -> bool:
        """Whether the request's Cookie header carries this launch's session cookie."""
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(cookie_header or "")
        except CookieError:
            return False
        morsel = jar.get(self.cookie)
        return morsel is not None and secrets.compare_digest(morsel.value, self._secret)
