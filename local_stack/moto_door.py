"""The embedded AWS (moto's server) behind a door no browser passes.

moto's server answers every origin with CORS headers (flask-cors), so any web page the
developer opens could list and read the bucket, or a page whose name rebinds to
127.0.0.1 could drive it. boto3 and the SAM CLI send no ``Origin``; a browser always does
on a cross-origin request: such a request is refused (403), a foreign ``Host`` is
refused (421, the rule of ``agent_harness.api.origins``), and no answer carries an
``Access-Control-*`` header.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from moto.server import ThreadedMotoServer

from agent_harness.api.origins import is_local_host

__all__ = ["GuardedMotoServer", "guard"]

Wsgi = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def guard(app: Wsgi, port: int) -> Wsgi:
    """``app`` refusing browsers and foreign hosts, with its CORS headers removed."""

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if not is_local_host(environ.get("HTTP_HOST"), port):
            return _refuse(start_response, "421 Misdirected Request", "misdirected_request")
        if "HTTP_ORIGIN" in environ:
            return _refuse(start_response, "403 Forbidden", "forbidden_origin")

        def without_cors(status: str, headers: list[tuple[str, str]], *rest: Any) -> Any:
            kept = [(k, v) for k, v in headers if not k.lower().startswith("access-control-")]
            return start_response(status, kept, *rest)

        return app(environ, without_cors)

    return guarded


def _refuse(start_response: Callable[..., Any], status: str, code: str) -> list[bytes]:
    message = "the embedded AWS answers only SDKs on 127.0.0.1, never a web page"
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    start_response(
        status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]


class GuardedMotoServer(ThreadedMotoServer):
    """moto's threaded server, its WSGI app behind ``guard``."""

    def _server_entry(self) -> None:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        app = guard(DomainDispatcherApplication(create_backend_app), self._port)
        self._server = make_server(
            self._ip_address, self._port, app, True, request_handler=MotoRequestHandler
        )
        self._server_ready_event.set()
        self._server.serve_forever()
