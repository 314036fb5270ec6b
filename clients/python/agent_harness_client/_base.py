"""What the sync and the async client share: the endpoints' calls, the configuration
(URL, identity, timeout, headers), and the retry policy.

Retries: a connection that could not be made (every method), a timeout or a broken
answer of a GET, PUT or DELETE (a POST may have been taken: a turn would run twice);
and an answer that says to (``x-should-retry: true``) or, without that header, a 409,
429, 502, 503 or 504. ``x-should-retry: false`` is never retried (a ``fact_not_current``,
a budget spent for the day). The wait is the answer's ``retry-after-ms`` or
``Retry-After`` (seconds, or an HTTP date); without one, an exponential backoff from 0.5 s
capped at 8 s, with jitter. A wait asked of more than 60 s is not waited: the error is
raised, its ``retry_after`` says when to come back. At most ``max_retries`` retries.
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from functools import cached_property
from typing import Any, Generic, TypeVar, cast
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter

from agent_harness_client._version import VERSION

__all__ = [
    "DEFAULT_URL",
    "Call",
    "ClientBase",
    "Endpoint",
    "backoff",
    "retry_after",
    "retry_on_error",
    "should_retry",
]

T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:3000"
DEFAULT_TIMEOUT = 120.0
#: statuses retried unless the answer says ``x-should-retry: false``
RETRY_STATUSES = frozenset({409, 429, 502, 503, 504})
#: methods retried after an error that may have reached the server
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
#: the longest wait an answer may ask for and be retried after
MAX_RETRY_AFTER = 60.0
INITIAL_DELAY = 0.5
MAX_DELAY = 8.0


@dataclass(frozen=True)
class Endpoint(Generic[T]):
    """One route of the API: its method and path, the client method that calls it
    (``"memory.search"``), and the type of its answer (None: no body)."""

    method: str
    path: str
    client_method: str
    answer: Any
    #: the answer's schema in the OpenAPI document (default: the model's name)
    schema: str | None = None

    @cached_property
    def _adapter(self) -> TypeAdapter[Any]:
        return TypeAdapter(self.answer)

    def parse(self, response: httpx.Response) -> T:
        if self.answer is None:
            return cast("T", None)
        return cast("T", self._adapter.validate_json(response.content))


def _present(values: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (values or {}).items() if v is not None}


def _jsonable(value: Any) -> Any:
    """A request body as JSON takes it: models (an item read back, say) as they were
    answered, mappings as objects, sequences as arrays."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request to ``endpoint``: path parameters, query and body (a None value is
    left out: the API reads absent and null alike), extra headers."""

    endpoint: Endpoint[T]
    path: Mapping[str, object] = field(default_factory=dict)
    params: Mapping[str, Any] | None = None
    body: Mapping[str, Any] | None = None
    headers: Mapping[str, str | None] = field(default_factory=dict)

    def url(self, base_url: str) -> str:
        # ":" and "@" are allowed in a path segment; the API reads session ids with ":"
        quoted = {k: quote(str(v), safe=":@") for k, v in self.path.items()}
        return base_url + self.endpoint.path.format(**quoted)


def should_retry(response: httpx.Response) -> bool:
    """Whether the answer may be retried: its ``x-should-retry``, else its status."""
    said = str(response.headers.get("x-should-retry", "")).strip().lower()
    if said in ("true", "false"):
        return said == "true"
    return response.status_code in RETRY_STATUSES


def retry_after(response: httpx.Response) -> float | None:
    """The seconds the answer asks to wait (``retry-after-ms``, ``Retry-After``)."""
    millis = response.headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    raw = response.headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def backoff(attempt: int) -> float:
    """The wait before retry ``attempt`` (0, 1, ...) when the answer names none."""
    delay: float = min(INITIAL_DELAY * 2.0**attempt, MAX_DELAY)
    return delay * (1 - 0.25 * random.random())


def retry_on_error(error: httpx.TransportError, method: str) -> bool:
    """Whether a request that got no answer may be sent again."""
    never_sent = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
    return isinstance(error, never_sent) or method in IDEMPOTENT


class ClientBase:
    """Configuration: where the API is, who calls it, how long to wait, how often to
    retry. Unset, ``base_url``, ``token`` and ``user_id`` are read from the environment:
    ``AGENT_HARNESS_URL`` (default ``http://127.0.0.1:3000``, ``make dev``'s),
    ``AGENT_HARNESS_TOKEN`` and ``AGENT_HARNESS_USER``."""

    def __init__(
        self,
        base_url: str | None,
        *,
        token: str | None,
        user_id: str | None,
        timeout: float | httpx.Timeout | None,
        max_retries: int,
        headers: Mapping[str, str] | None,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        url = base_url or os.environ.get("AGENT_HARNESS_URL") or DEFAULT_URL
        self.base_url = url.rstrip("/").removesuffix("/v1")
        self.token = token or os.environ.get("AGENT_HARNESS_TOKEN") or None
        self.user_id = user_id or os.environ.get("AGENT_HARNESS_USER") or None
        self.timeout = timeout
        self.max_retries = max_retries
        self._headers = dict(headers or {})

    def _default_headers(self) -> dict[str, str]:
        out = {"Accept": "application/json", "User-Agent": f"agent-harness-client/{VERSION}"}
        if self.token:
            out["Authorization"] = f"Bearer {self.token}"
        if self.user_id:
            out["X-User-Id"] = self.user_id
        return out | self._headers

    def _build(self, http: httpx.Client | httpx.AsyncClient, call: Call[Any]) -> httpx.Request:
        headers = self._default_headers() | _present(call.headers)
        extra: dict[str, Any] = {} if self.timeout is None else {"timeout": self.timeout}
        return http.build_request(
            call.endpoint.method,
            call.url(self.base_url),
            params=_present(call.params) or None,
            json=None if call.body is None else _jsonable(_present(call.body)),
            headers=headers,
            **extra,
        )
