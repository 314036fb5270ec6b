"""The warm per-container cache of parsed, indexed files (ledgers, thread segments and
the linked texts ranked search joins with them)."""

from __future__ import annotations

import gc
import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["MemoryIndexCache", "Sized", "building"]


@contextmanager
def building() -> Iterator[None]:
    """Pause the cyclic garbage collector while a query reads and ranks. Cold, it builds
    what the cache keeps, and its own temporaries are freed by reference counting (it
    makes no reference cycles: tests/unit/test_memory_search.py), so full collections
    while it runs would walk a growing heap for nothing: in a cold ranked query they
    cost about as much as the decoding. The young collections it defers run after it."""
    if not gc.isenabled():  # nested, or paused by the caller
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class Sized(Protocol):
    @property
    def size(self) -> int: ...


class MemoryIndexCache:
    """Warm per-container cache of parsed files (ledger indexes, thread segments), keyed by
    (user key, path, ETag) so it is never stale and never crosses users; bounded by total
    text size (LRU)."""

    def __init__(self, max_bytes: int = 32 * 1024 * 1024) -> None:
        self._max_bytes = max_bytes
        self._items: OrderedDict[tuple[str, str, str], Any] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> Any:
        with self._lock:
            index = self._items.get(key)
            if index is not None:
                self._items.move_to_end(key)
            return index

    def put(self, key: tuple[str, str, str], index: Sized) -> None:
        with self._lock:
            if key in self._items:
                return
            self._items[key] = index
            self._bytes += index.size
            while self._bytes > self._max_bytes and len(self._items) > 1:
                _, evicted = self._items.popitem(last=False)
                self._bytes -= evicted.size
