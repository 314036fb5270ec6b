"""The doors a browser can knock on: which ``Host`` and ``Origin`` a request may carry.
One owner for the rule, used by the local stack's HTTP front (every path), its embedded
AWS, and ``/mcp`` in every mode (the MCP specification: servers MUST validate Origin).

    Host    a local door (the local stack) answers only to its own names, 127.0.0.1,
            localhost and [::1], bare or with its port: a name rebound to 127.0.0.1 by
            a web page is refused with 421. Deployed, API Gateway routes by its own
            domain, so only Origin is checked there.
    Origin  absent passes (SDKs, curl: a browser always sends one on a cross-origin
            request); the request's own origin passes (on a local door, any of its own
            names with its port); so does an exact entry of HARNESS_ALLOWED_ORIGINS.
            Anything else, ``null`` included, is refused with 403.

Nothing here emits CORS headers: no browser page of another origin may read an answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

__all__ = ["LOCAL_HOSTS", "Refusal", "is_local_host", "origin_allowed", "refusal"]

LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]")


@dataclass(frozen=True)
class Refusal:
    """Why a request was turned away at the door: its status and the REST error body."""

    status: int
    code: str
    message: str

    def body(self) -> dict[str, dict[str, str]]:
        return {"error": {"code": self.code, "message": self.message}}

    def rpc_body(self) -> dict[str, object]:
        """The same refusal as /mcp answers it: a JSON-RPC error (-32000, as the SDKs)."""
        return {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": self.message}}


def _split(host: str) -> tuple[str, str | None]:
    """``name[:port]`` (IPv6 in brackets) -> (lowercased name, port or None)."""
    host = host.strip().lower()
    if host.startswith("["):
        name, _, rest = host.partition("]")
        return name + "]", rest.removeprefix(":") if rest.startswith(":") else None
    name, sep, port = host.partition(":")
    return name, port if sep else None


def is_local_host(host: str | None, port: int | None = None) -> bool:
    """A loopback name, bare or with ``port`` (any port when ``port`` is None)."""
    if not host:
        return False
    name, given = _split(host)
    if name not in LOCAL_HOSTS:
        return False
    return given is None or port is None or given == str(port)


def _origins_of(host: str) -> set[str]:
    """The origins a page served by ``host`` has (a local host: under any of its names)."""
    name, port = _split(host)
    suffix = f":{port}" if port else ""
    names = LOCAL_HOSTS if name in LOCAL_HOSTS else (name,)
    return {f"{scheme}://{n}{suffix}" for n in names for scheme in ("http", "https")}


def origin_allowed(origin: str | None, host: str | None, allowed: Collection[str]) -> bool:
    """Whether a request with this ``Origin`` to this ``Host`` may pass (see the module)."""
    if origin is None:
        return True
    origin = origin.strip().lower().rstrip("/")
    if origin in {a.strip().lower().rstrip("/") for a in allowed}:
        return True
    return bool(host) and origin in _origins_of(host or "")


def refusal(
    headers: Mapping[str, str], allowed: Collection[str], *, local_port: int | None = None
) -> Refusal | None:
    """None when the request may pass; else why not. ``local_port``: the port of a local
    door, whose Host is checked too (None: deployed, Origin only)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    host = lowered.get("host")
    if local_port is not None and not is_local_host(host, local_port):
        return Refusal(
            421,
            "misdirected_request",
            "this server answers only to 127.0.0.1, localhost or [::1] (the Host header "
            "named another server)",
        )
    if not origin_allowed(lowered.get("origin"), host, allowed):
        return Refusal(
            403,
            "forbidden_origin",
            "requests from this web origin are refused (HARNESS_ALLOWED_ORIGINS lists the "
            "browser-based clients allowed)",
        )
    return None
