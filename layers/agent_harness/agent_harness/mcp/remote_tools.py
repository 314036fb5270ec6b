"""The remote tool servers of a container, as the agent uses them.

    tools(remaining)
      ├─ remaining <= 0                       -> [] (no time to call anything)
      ├─ listing younger than cache_seconds   -> reused
      ├─ failed less than 30 s ago            -> left out (a down server costs no timeout)
      └─ the others, in parallel threads: headers (plain, then Secrets Manager, then SSM)
           -> initialize + tools/list -> allowlist, name check -> RemoteTool
           a failure of any kind -> Logger.warning, left out, backed off for 30 s
    call(tool, arguments, user_id, remaining)
      └─ tools/call, X-Harness-User-Id only when the server has forward_user
           -> the result's content as text; isError and every failure -> "Error: ..."

One ``RemoteToolServers`` lives as long as the Lambda container and serves the turns of many
users one after another, so listings are cached per server, never per user, and only a call
carries a user's id. What servers return is data for the model, never instructions here;
header values (credentials) are never logged nor put in a message.
"""

from __future__ import annotations

import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
from aws_lambda_powertools import Logger

from agent_harness.mcp.client import McpClient, McpError

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_harness.mcp_config import McpServerConfig

__all__ = ["McpCredentialError", "RemoteTool", "RemoteToolServers", "result_text"]

logger = Logger(child=True)

BACKOFF_SECONDS = 30.0
USER_HEADER = "X-Harness-User-Id"
_QUALIFIED = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what every provider accepts as a tool name
_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")  # what httpx can send: no CR, LF, non-ASCII
_VISIBLE = re.compile(r"[\x20-\x7e]+")
_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
_LEFT_OUT = "MCP server left out of the tools"


class McpCredentialError(McpError):
    """A server's headers could not be read (secret, parameter), parsed, or sent."""

    kind = "credentials"


@dataclass(frozen=True)
class RemoteTool:
    """One tool of one server, offered to the model as ``qualified``."""

    server: str
    name: str  # the server's own name for it
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=lambda: dict(_EMPTY_SCHEMA), hash=False)
    read_only: bool | None = None  # annotations.readOnlyHint, a hint the server gives
    qualified: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "qualified", f"{self.server}__{self.name}")


@dataclass
class _Server:
    config: McpServerConfig
    client: McpClient
    tools: list[RemoteTool] | None = None
    listed_at: float = 0.0
    failed_at: float | None = None


def _read_secret(name: str) -> str | None:
    """Secrets Manager through the Powertools Parameters cache (refreshed every 5 min)."""
    from aws_lambda_powertools.utilities import parameters

    value = parameters.get_secret(name, max_age=300)
    return value.decode() if isinstance(value, bytes) else (str(value) if value else None)


def _read_parameter(name: str) -> str | None:
    """An SSM SecureString through the Powertools Parameters cache."""
    from aws_lambda_powertools.utilities import parameters

    value = parameters.get_parameter(name, decrypt=True, max_age=300)
    return str(value) if value else None


class RemoteToolServers:
    """Every configured MCP server of a container: ``tools()`` and ``call()`` never raise."""

    def __init__(
        self,
        servers: tuple[McpServerConfig, ...],
        *,
        http_client: httpx.Client | None = None,
        clock: Callable[[], float] = time.monotonic,
        read_secret: Callable[[str], str | None] | None = None,
        read_parameter: Callable[[str], str | None] | None = None,
    ) -> None:
        # one connection pool for every server; never following redirects is per request
        shared = http_client if http_client is not None else httpx.Client()
        self._owned = shared if http_client is None else None
        self._servers = {
            config.name: _Server(
                config, McpClient(config.url, name=config.name, http_client=shared)
            )
            for config in servers
        }
        self._clock = clock
        self._read_secret = read_secret or _read_secret
        self._read_parameter = read_parameter or _read_parameter
        self._lock = threading.Lock()

    def tools(self, *, remaining: float | None) -> list[RemoteTool]:
        """The tools of every server that answers, in configuration order."""
        if remaining is not None and remaining <= 0:
            return []
        now = self._clock()
        with self._lock:
            due = [server for server in self._servers.values() if self._due(server, now)]
        if due:  # in parallel: a slow server costs its own timeout, not the sum of them all
            with ThreadPoolExecutor(len(due), thread_name_prefix="mcp-list") as pool:
                listed = list(pool.map(lambda server: self._list(server, remaining), due))
            now = self._clock()
            with self._lock:
                for server, tools in zip(due, listed, strict=True):
                    server.tools, server.listed_at = tools, now
                    server.failed_at = None if tools is not None else now
        with self._lock:
            return [tool for server in self._servers.values() for tool in server.tools or ()]

    def call(
        self, tool: RemoteTool, arguments: dict[str, Any], *, user_id: str, remaining: float | None
    ) -> str:
        """``tools/call`` on the tool's server, as text for the model; never raises."""
        name = tool.qualified
        server = self._servers.get(tool.server)
        if server is None:
            return f"Error: {name} is not a tool of a configured server"
        if remaining is not None and remaining <= 0:
            return f"Error: no time left to call {name}"
        config = server.config
        try:
            headers = self._headers(config)
            if config.forward_user:
                if not _VISIBLE.fullmatch(user_id):
                    return f"Error: {name} needs the user id, which cannot be sent in a header"
                headers[USER_HEADER] = user_id
            result = server.client.call_tool(
                tool.name, arguments, timeout=_timeout(config, remaining), headers=headers
            )
        except McpError as exc:
            self._warn("MCP tool call failed", config, exc, tool=tool.name)
            return f"Error: {name} failed: {exc}"
        except Exception:  # a bug must not end the turn: the model reads an error instead
            logger.exception("MCP tool call failed", extra={"mcp_server": config.name})
            return f"Error: {name} failed unexpectedly"
        return result_text(name, result)

    def close(self) -> None:
        if self._owned is not None:
            self._owned.close()

    def _due(self, server: _Server, now: float) -> bool:
        if server.failed_at is not None and now - server.failed_at < BACKOFF_SECONDS:
            return False
        return server.tools is None or now - server.listed_at >= server.config.cache_seconds

    def _list(self, server: _Server, remaining: float | None) -> list[RemoteTool] | None:
        """One server's tools, or None when it failed (logged, never raised). Its secrets
        are read here too: Powertools gives each provider its own boto3 session."""
        config = server.config
        try:
            headers = self._headers(config)
            listed = server.client.list_tools(timeout=_timeout(config, remaining), headers=headers)
        except McpError as exc:
            self._warn(_LEFT_OUT, config, exc)
            server.client.reset()
            return None
        except Exception:  # a bug in one server's answer handling leaves that server out
            logger.exception(_LEFT_OUT, extra={"mcp_server": config.name})
            server.client.reset()
            return None
        allowed = None if config.tools is None else set(config.tools)
        tools: dict[str, RemoteTool] = {}
        for entry in listed:
            name = entry.get("name")
            if not isinstance(name, str) or name in tools:
                continue
            if allowed is not None and name not in allowed:
                continue
            tool = _remote_tool(config.name, name, entry)
            if _QUALIFIED.fullmatch(tool.qualified):
                tools[name] = tool
            else:
                logger.warning(
                    "MCP tool skipped: its name is not a valid tool name",
                    extra={"mcp_server": config.name, "tool": name[:80]},
                )
        return list(tools.values())

    def _headers(self, config: McpServerConfig) -> dict[str, str]:
        """Plain headers, then the secret's, then the parameter's (read on each use: the
        Powertools cache makes that cheap and picks up a rotation within five minutes)."""
        headers = {k.lower(): v for k, v in config.headers.items()}  # a later source replaces
        if config.headers_secret:
            headers.update(_secret_headers("secret", config.headers_secret, self._read_secret))
        if config.headers_parameter:
            source = config.headers_parameter
            headers.update(_secret_headers("parameter", source, self._read_parameter))
        for key, value in headers.items():  # httpx would refuse them, quoting the value
            if not _HEADER_NAME.fullmatch(key) or not _HEADER_VALUE.fullmatch(value):
                raise McpCredentialError(f"header {key[:60]!r} has an invalid name or value")
        headers.pop(USER_HEADER.lower(), None)  # sent by call() alone, for forward_user
        return headers

    @staticmethod
    def _warn(message: str, config: McpServerConfig, exc: McpError, **fields: str) -> None:
        extra = {"mcp_server": config.name, "kind": exc.kind, "error": str(exc), **fields}
        logger.warning(message, extra=extra)


def _timeout(config: McpServerConfig, remaining: float | None) -> float:
    return config.timeout_seconds if remaining is None else min(config.timeout_seconds, remaining)


def _secret_headers(source: str, name: str, read: Callable[[str], str | None]) -> dict[str, str]:
    """A JSON object of header names and values, or a plain token (a bearer token)."""
    try:
        value = read(name)
    except Exception as exc:  # any reader failure is this server's failure, not the turn's
        raise McpCredentialError(
            f"headers {source} {name!r} could not be read ({type(exc).__name__})"
        ) from exc
    text = (value or "").strip()
    if not text:
        raise McpCredentialError(f"headers {source} {name!r} is empty")
    if not text.startswith("{"):
        headers = {"Authorization": f"Bearer {text}"}
    else:
        try:
            headers = json.loads(text)
        except ValueError:
            raise McpCredentialError(f"headers {source} {name!r} is not valid JSON") from None
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise McpCredentialError(
            f"headers {source} {name!r} must be a JSON object of header names and values"
        )
    return {key.lower(): value for key, value in headers.items()}


def _remote_tool(server: str, name: str, entry: dict[str, Any]) -> RemoteTool:
    schema = entry.get("inputSchema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        schema = dict(_EMPTY_SCHEMA)
    annotations = entry.get("annotations")
    hint = annotations.get("readOnlyHint") if isinstance(annotations, dict) else None
    description = entry.get("description")
    return RemoteTool(
        server=server,
        name=name,
        description=description if isinstance(description, str) else "",
        input_schema=schema,
        read_only=hint if isinstance(hint, bool) else None,
    )


def result_text(qualified: str, result: dict[str, Any]) -> str:
    """A ``tools/call`` result as text: text parts joined by newlines, placeholders for
    what a text model cannot read, the structured content as compact JSON otherwise."""
    content = result.get("content")
    parts = [_content_text(item) for item in content] if isinstance(content, list) else []
    text = "\n".join(part for part in parts if part)
    if not text and result.get("structuredContent") is not None:
        structured = result["structuredContent"]
        text = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
    if result.get("isError") is True:
        return f"Error: {text}" if text else f"Error: {qualified} failed"
    return text or f"{qualified} returned no content"


def _content_text(item: object) -> str:
    if not isinstance(item, dict):
        return "[unsupported content]"
    kind = item.get("type")
    if kind == "text" and isinstance(item.get("text"), str):
        return str(item["text"])
    if kind in ("image", "audio"):
        return f"[{kind} content: {_mime(item)}, {_size(item.get('data'))} omitted]"
    if kind == "resource_link":
        label = " ".join(str(item.get(key) or "") for key in ("uri", "name")).strip()
        return f"[resource link: {label[:300]}]"
    if kind == "resource":
        resource = item.get("resource")
        resource = resource if isinstance(resource, dict) else {}
        if isinstance(resource.get("text"), str):
            return str(resource["text"])
        uri = str(resource.get("uri") or "")[:300]
        return (
            f"[embedded resource: {uri} {_mime(resource)}, {_size(resource.get('blob'))} omitted]"
        )
    return f"[unsupported content type: {str(kind)[:40]}]"


def _mime(item: dict[str, Any]) -> str:
    return str(item.get("mimeType") or "unknown type")[:100]


def _size(data: object) -> str:
    return f"{len(data):,} bytes of base64" if isinstance(data, str) else "no data"
