"""The last LIST of each user's folders in this container, for automatic recall."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_harness.ports import ObjectInfo

__all__ = ["RecentListings"]


class RecentListings:
    """The last LIST of each of a user's folders (the key names both), reused for
    ``max_age`` seconds: a chatty user's turns in one container do not each pay a LIST.
    Bounded (least recently used)."""

    def __init__(self, max_items: int = 8192) -> None:
        self._max_items = max_items
        self._items: OrderedDict[str, tuple[float, list[ObjectInfo]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str, now: float, max_age: float) -> list[ObjectInfo] | None:
        with self._lock:
            item = self._items.get(key)
            if item is None or now - item[0] >= max_age:
                return None
            self._items.move_to_end(key)
            return item[1]

    def age(self, key: str, now: float) -> float | None:
        """Seconds since the last LIST of ``key`` (None: never listed here)."""
        with self._lock:
            item = self._items.get(key)
            return None if item is None else now - item[0]

    def forget(self, owner_key: str) -> None:
        """Drop every listing of one owner's folders (``<owner key> <folder>``): what this
        container is about to write there is seen by its next read."""
        with self._lock:
            for key in [k for k in self._items if k.startswith(f"{owner_key} ")]:
                del self._items[key]

    def count(self, key: str) -> int | None:
        """How many files the last LIST found, however old: what to expect of the next."""
        with self._lock:
            item = self._items.get(key)
            return None if item is None else len(item[1])

    def put(self, key: str, now: float, listed: list[ObjectInfo]) -> None:
        with self._lock:
            self._items[key] = (now, listed)
            self._items.move_to_end(key)
            while len(self._items) > self._max_items:
                self._items.popitem(last=False)
