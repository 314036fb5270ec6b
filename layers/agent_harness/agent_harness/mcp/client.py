"""A small synchronous MCP client: JSON-RPC 2.0 over Streamable HTTP, one server.

    list_tools / call_tool        one time budget for the whole operation, handshake included
      ├─ no session yet -> initialize (offer 2025-11-25; accept 2024-11-05 .. 2025-11-25),
      │                    keep Mcp-Session-Id, then notifications/initialized
      ├─ POST, Accept: application/json, text/event-stream; at most 5 MB read
      │    application/json  -> one JSON-RPC message
      │    text/event-stream -> the event answering our id; the server's own notifications
      │                         and requests on the stream are skipped
      └─ 404 while holding a session id (the server forgot it) -> one handshake, one retry

Every failure is an ``McpError`` with a ``kind``:

    McpUnreachableError  unreachable  connection refused, DNS, TLS, a broken stream
    McpTimeoutError      timeout      the operation's budget ran out
    McpHttpError         http         a non-2xx status, a 3xx too: redirects are never
                                      followed, so no server sends our headers elsewhere
    McpRpcError          rpc          a JSON-RPC error answer (code, message)
    McpProtocolError     protocol     a malformed or oversized answer, an unknown version

Messages name neither the URL (it may carry a key) nor any header value. The official SDK
is not used: its import alone costs more than a Lambda cold start can spare.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from typing import TYPE_CHECKING, Any, ClassVar

import httpx
from aws_lambda_powertools import Logger

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

__all__ = [
    "MAX_ANSWER_BYTES",
    "PROTOCOL_VERSION",
    "SUPPORTED_VERSIONS",
    "McpClient",
    "McpError",
    "McpHttpError",
    "McpProtocolError",
    "McpRpcError",
    "McpTimeoutError",
    "McpUnreachableError",
]

logger = Logger(child=True)

PROTOCOL_VERSION = "2025-11-25"
#: the initialize-handshake versions, whose tools/list and tools/call read the same
SUPPORTED_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
CLIENT_INFO = {"name": "agent-harness", "version": "0.1.0"}
_HELLO = {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": CLIENT_INFO}
MAX_ANSWER_BYTES = 5 * 1024 * 1024
#: a server paging forever, or listing thousands of tools, neither stalls nor floods a turn
MAX_PAGES = 20
MAX_TOOLS = 1000
_SESSION_ID = re.compile(r"[\x21-\x7e]{1,1024}")  # visible ASCII, as the spec requires


class McpError(Exception):
    """Base of every failure of an MCP exchange."""

    kind: ClassVar[str] = "error"


class McpUnreachableError(McpError):
    kind = "unreachable"


class McpTimeoutError(McpError):
    kind = "timeout"


class McpHttpError(McpError):
    kind = "http"

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class McpRpcError(McpError):
    kind = "rpc"

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"JSON-RPC error {code}: {message}")
        self.code = code
        self.message = message


class McpProtocolError(McpError):
    kind = "protocol"


class _Operation:
    """One call of the public interface: its time budget, shared by all of its requests
    (a handshake and several pages included), and the caller's extra headers."""

    def __init__(self, seconds: float, headers: Mapping[str, str] | None) -> None:
        self.seconds = seconds
        self.headers = dict(headers or {})
        self._end = time.monotonic() + seconds

    def left(self) -> float:
        left = self._end - time.monotonic()
        if left <= 0:
            raise McpTimeoutError(f"no answer within {self.seconds:g} s")
        return left

    def timeout(self) -> httpx.Timeout:
        left = self.left()
        return httpx.Timeout(left, connect=min(5.0, left))


class McpClient:
    """One MCP server. Operations are serialised by a lock, so no two handshakes race;
    the ``httpx.Client`` may be shared with other servers' clients."""

    def __init__(
        self,
        url: str,
        *,
        name: str = "mcp",
        http_client: httpx.Client | None = None,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
    ) -> None:
        self._url = url
        self._name = name  # for logs: never the URL
        self._http = http_client or httpx.Client()
        self._owns_http = http_client is None
        self._max_bytes = max_answer_bytes
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._session_id: str | None = None
        self._version: str | None = None  # None until a handshake succeeded

    @property
    def session_id(self) -> str | None:
        return self._session_id

    @property
    def protocol_version(self) -> str | None:
        return self._version

    def list_tools(
        self, *, timeout: float, headers: Mapping[str, str] | None = None
    ) -> list[dict[str, Any]]:
        """Every page of ``tools/list``, within the bounds: the tool objects as sent."""
        op = _Operation(timeout, headers)
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        with self._lock:
            for _ in range(MAX_PAGES):
                result = self._request("tools/list", {"cursor": cursor} if cursor else {}, op)
                page = result.get("tools")
                if not isinstance(page, list):
                    raise McpProtocolError("tools/list answered without a list of tools")
                tools.extend(tool for tool in page if isinstance(tool, dict))
                following = result.get("nextCursor")
                cursor = following if isinstance(following, str) and following else None
                if cursor is None or len(tools) >= MAX_TOOLS:
                    break
        if cursor is not None or len(tools) > MAX_TOOLS:
            logger.warning("MCP server lists too many tools", extra={"mcp_server": self._name})
        return tools[:MAX_TOOLS]

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        timeout: float,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """``tools/call``: the result object (content, structuredContent, isError)."""
        op = _Operation(timeout, headers)
        with self._lock:
            return self._request("tools/call", {"name": name, "arguments": dict(arguments)}, op)

    def reset(self) -> None:
        """Forget the session: the next operation starts with a new handshake."""
        self._session_id = self._version = None

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def _request(self, method: str, params: dict[str, Any], op: _Operation) -> dict[str, Any]:
        if self._version is None:
            self._initialize(op)
        try:
            return _result(method, self._send(method, params, op))
        except McpHttpError as exc:
            if exc.status != 404 or self._session_id is None:
                raise
        # the server expired or lost our session (a restart, a scale-in): start again, once
        logger.info("MCP session expired; initializing again", extra={"mcp_server": self._name})
        self._initialize(op)
        return _result(method, self._send(method, params, op))

    def _initialize(self, op: _Operation) -> None:
        self.reset()
        result = _result("initialize", self._send("initialize", _HELLO, op))
        version = result.get("protocolVersion")
        if version not in SUPPORTED_VERSIONS:
            self.reset()
            raise McpProtocolError(f"unsupported protocol version {str(version)[:40]!r}")
        self._version = str(version)
        self._send("notifications/initialized", None, op)

    def _send(
        self, method: str, params: dict[str, Any] | None, op: _Operation
    ) -> dict[str, Any] | None:
        """POST one message: the JSON-RPC answer to a request, None for a notification."""
        request_id = None if method.startswith("notifications/") else next(self._ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        message |= {"id": request_id} if request_id is not None else {}
        message |= {"params": params} if params is not None else {}
        body, headers = json.dumps(message, separators=(",", ":")).encode(), self._headers(op)
        outgoing = self._http.build_request(
            "POST", self._url, content=body, headers=headers, timeout=op.timeout()
        )
        try:
            # follow_redirects=False even when an injected client follows them
            response = self._http.send(outgoing, stream=True, follow_redirects=False)
            try:
                self._check_status(response)
                if method == "initialize":
                    self._session_id = _session_id(response)
                if request_id is None:  # 202 Accepted: read the empty body, keep the connection
                    for _ in self._chunks(response, op):
                        pass
                    return None
                return self._read_answer(response, request_id, op)
            finally:
                response.close()
        except httpx.TimeoutException as exc:
            raise McpTimeoutError(f"no answer within {op.seconds:g} s") from exc
        except httpx.RequestError as exc:
            raise McpUnreachableError(f"the server is unreachable ({type(exc).__name__})") from exc

    def _headers(self, op: _Operation) -> httpx.Headers:
        headers = httpx.Headers(op.headers)
        # set last: a configured header cannot replace the protocol's own
        headers["Content-Type"] = "application/json"
        headers["Accept"] = "application/json, text/event-stream"
        if self._session_id is not None:
            headers["Mcp-Session-Id"] = self._session_id
        if self._version is not None:
            headers["MCP-Protocol-Version"] = self._version
        return headers

    def _check_status(self, response: httpx.Response) -> None:
        status = response.status_code
        if 200 <= status < 300:
            return
        if 300 <= status < 400:
            raise McpHttpError(status, f"HTTP {status}: redirects are not followed")
        head = next(response.iter_bytes(), b"")[:4096]  # the start of an error is enough
        try:
            detail = f": {str(json.loads(head)['error']['message'])[:200]}"
        except (ValueError, KeyError, TypeError):
            detail = ""  # not a JSON-RPC error: the status says enough
        raise McpHttpError(status, f"HTTP {status}{detail}")

    def _read_answer(
        self, response: httpx.Response, request_id: int, op: _Operation
    ) -> dict[str, Any]:
        media = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if media == "application/json":
            messages = iter([b"".join(self._chunks(response, op))])
        elif media == "text/event-stream":
            messages = _events(self._chunks(response, op))
        else:
            raise McpProtocolError(f"unexpected content type {media[:60]!r}")
        for message in messages:  # the first answer to our id ends the read: a server may
            answer = _pick(_parse(message), request_id)  # keep its stream open after it
            if answer is not None:
                return answer
        raise McpProtocolError("the answer holds no response to our request")

    def _chunks(self, response: httpx.Response, op: _Operation) -> Iterator[bytes]:
        """The body, refused past the size cap and cut when the budget runs out (a read
        timeout bounds one read only: a server trickling bytes would outlive it)."""
        declared = response.headers.get("content-length", "")
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > self._max_bytes or (
                declared.isascii() and declared.isdigit() and int(declared) > self._max_bytes
            ):
                raise McpProtocolError(f"the answer is over {self._max_bytes:,} bytes")
            op.left()
            yield chunk


def _events(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The data of each server-sent event that has some (CRLF or LF line ends; event:,
    id:, retry: and comment lines carry nothing we need)."""
    pending = bytearray()
    data: list[bytes] = []
    for chunk in itertools.chain(chunks, [b"\n\n"]):  # the end of the stream ends an event
        pending += chunk
        if b"\n" not in chunk:
            continue
        *lines, rest = pending.split(b"\n")
        pending = bytearray(rest)
        for raw in lines:
            line = bytes(raw.removesuffix(b"\r"))
            if line.startswith(b"data:"):
                data.append(line[5:].removeprefix(b" "))
            elif not line and data:  # a blank line ends an event
                event, data = b"\n".join(data), []
                if event.strip():  # a priming event has no data
                    yield event


def _session_id(response: httpx.Response) -> str | None:
    session_id: str | None = response.headers.get("mcp-session-id")
    if session_id is not None and not _SESSION_ID.fullmatch(session_id):
        raise McpProtocolError("the server sent an invalid session id")
    return session_id


def _parse(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested past the parser
        raise McpProtocolError("the answer is not valid JSON") from exc


def _pick(message: Any, request_id: int) -> dict[str, Any] | None:
    """The response to ``request_id`` in a message or a batch. A server's own request may
    carry the same id (ids are per sender), so only messages without a method count."""
    for item in message if isinstance(message, list) else [message]:
        if isinstance(item, dict) and item.get("id") == request_id and "method" not in item:
            return item if "result" in item or "error" in item else None
    return None


def _result(method: str, answer: dict[str, Any] | None) -> dict[str, Any]:
    error = (answer or {}).get("error")
    if isinstance(error, dict):
        code, message = error.get("code"), error.get("message")
        raise McpRpcError(
            code if isinstance(code, int) else 0,
            message[:300] if isinstance(message, str) else "no message",
        )
    result = (answer or {}).get("result")
    if not isinstance(result, dict):
        raise McpProtocolError(f"{method} answered without a result object")
    return result
