"""The embedded AWS (moto's server) behind a door no browser passes.

moto's server answers every origin with CORS headers (flask-cors), so any web page the
developer opens could list and read the bucket, or a page whose name rebinds to
127.0.0.1 could drive it. boto3 and the SAM CLI send no ``Origin``; a browser always does
on a cross-origin request: such a request is refused (403), a foreign ``Host`` is
refused (421, the rule of ``agent_harness.api.origins``), and no answer carries an
``Access-Control-*`` header.

Lambda's Invoke API (``POST /2015-03-31/functions/<name>/invocations``) is answered by
the local stack's own containers, not moto's (which would need Docker): one function
invoking another (the agent's ``DELETE /v1/memory`` runs in the forget function) takes
the same path as in AWS.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote

from moto.server import ThreadedMotoServer

from agent_harness.api.origins import is_local_host

__all__ = ["GuardedMotoServer", "guard"]

Wsgi = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
#: ``invoke(function name or ARN, payload) -> (answer, error)``: the handler's JSON answer,
#: or its error message (Lambda's ``X-Amz-Function-Error``); raises KeyError if unknown
Invoker = Callable[[str, bytes], tuple[bytes, str | None]]
_INVOKE = re.compile(r"^/2015-03-31/functions/([^/]+)/invocations$")


def guard(app: Wsgi, port: int, invoke: Invoker | None = None) -> Wsgi:
    """``app`` refusing browsers and foreign hosts, with its CORS headers removed; Lambda
    invocations go to ``invoke``."""

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if not is_local_host(environ.get("HTTP_HOST"), port):
            return _refuse(start_response, "421 Misdirected Request", "misdirected_request")
        if "HTTP_ORIGIN" in environ:
            return _refuse(start_response, "403 Forbidden", "forbidden_origin")
        called = _INVOKE.match(environ.get("PATH_INFO", ""))
        if invoke is not None and called and environ.get("REQUEST_METHOD") == "POST":
            return _invoke(invoke, unquote(called.group(1)), environ, start_response)

        def without_cors(status: str, headers: list[tuple[str, str]], *rest: Any) -> Any:
            kept = [(k, v) for k, v in headers if not k.lower().startswith("access-control-")]
            return start_response(status, kept, *rest)

        return app(environ, without_cors)

    return guarded


def _invoke(
    invoke: Invoker, name: str, environ: dict[str, Any], start_response: Callable[..., Any]
) -> list[bytes]:
    length = int(environ.get("CONTENT_LENGTH") or 0)
    payload = environ["wsgi.input"].read(length) if length else b"{}"
    headers = [("Content-Type", "application/json"), ("X-Amz-Executed-Version", "$LATEST")]
    try:
        answer, error = invoke(name, payload)
    except KeyError:
        body = json.dumps({"Type": "User", "message": f"Function not found: {name}"}).encode()
        headers += [("x-amzn-ErrorType", "ResourceNotFoundException")]
        start_response("404 Not Found", [*headers, ("Content-Length", str(len(body)))])
        return [body]
    if error is not None:
        answer = json.dumps({"errorMessage": error, "errorType": "Unhandled"}).encode()
        headers.append(("X-Amz-Function-Error", "Unhandled"))
    start_response("200 OK", [*headers, ("Content-Length", str(len(answer)))])
    return [answer]


def _refuse(start_response: Callable[..., Any], status: str, code: str) -> list[bytes]:
    message = "the embedded AWS answers only SDKs on 127.0.0.1, never a web page"
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    start_response(
        status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]


class GuardedMotoServer(ThreadedMotoServer):
    """moto's threaded server, its WSGI app behind ``guard``."""

    def __init__(self, *args: Any, invoke: Invoker | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._invoke = invoke

    def _server_entry(self) -> None:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        app = guard(DomainDispatcherApplication(create_backend_app), self._port, self._invoke)
        self._server = make_server(
            self._ip_address, self._port, app, True, request_handler=MotoRequestHandler
        )
        self._server_ready_event.set()
        self._server.serve_forever()
