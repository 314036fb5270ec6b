"""The query vectors of one request: each text embedded at most once, counted once.

A turn embeds its user's message for automatic recall and, when its model searches, the
model's queries; a route embeds the one query it was sent. ``QueryVectors`` is made per
request (never shared between requests: its spend belongs to one) and handed to every
search the request runs, so the same text searched in the user's memory, a bound scope's
and the thread index is embedded once, and every call's tokens land where the request
counts its spend: a turn's meter (committed with the turn, under the ``embedding``
role), or, for a search outside a turn, the user's day at once.

A turn knows its message before it has read anything: ``prefetch`` starts embedding it
in the background while the turn's reads are in flight (the local model's engine runs
outside the GIL), and recall's ``vector`` then waits only for what is left.

Each call is bounded by the request's deadline (``Embedder.query``): a slow or failing
provider gives None, and the search ranks by words alone.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_harness.embeddings.embedder import Embedder
    from agent_harness.models.base import Usage

__all__ = ["MAX_QUERIES", "QueryVectors"]

metrics = Metrics()

#: distinct texts one request may embed (a model looping on searches stops here)
MAX_QUERIES = 16
_POOL: list[ThreadPoolExecutor] = []
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(max_workers=4, thread_name_prefix="query-vectors"))
        return _POOL[0]


class QueryVectors:
    def __init__(
        self,
        embedder: Embedder,
        spend: Callable[[Usage], None] | None,
        seconds_left: Callable[[], float | None] | None = None,
    ) -> None:
        self.embedder = embedder
        self._spend = spend
        self._seconds_left = seconds_left
        self._known: dict[str, Any] = {}
        self._pending: dict[str, Future[Any]] = {}

    @property
    def name(self) -> str:
        return self.embedder.name

    def _left(self) -> float | None:
        return self._seconds_left() if self._seconds_left is not None else None

    def _room(self) -> bool:
        return len(self._known) + len(self._pending) < MAX_QUERIES

    def prefetch(self, text: str) -> None:
        """Start embedding ``text`` in the background (``vector`` collects it)."""
        if text in self._known or text in self._pending or not self._room():
            return
        self._pending[text] = _pool().submit(
            self.embedder.query, text, self._spend, seconds_left=self._left()
        )

    def vector(self, text: str) -> Any:
        """``text``'s normalised vector, or None (the provider failed or was slow, no
        time is left, or the request has embedded ``MAX_QUERIES`` texts already)."""
        if text in self._known:
            return self._known[text]
        pending = self._pending.pop(text, None)
        if pending is not None:
            left = self._left()
            wait = (
                self.embedder.timeout_seconds
                if left is None
                else min(self.embedder.timeout_seconds, left)
            )
            try:
                found = pending.result(timeout=max(wait, 0.0))
            except FutureTimeout:
                metrics.add_metric("EmbeddingFallbacks", MetricUnit.Count, 1)
                found = None
        elif self._room():
            found = self.embedder.query(text, self._spend, seconds_left=self._left())
        else:
            return None
        self._known[text] = found
        return found
