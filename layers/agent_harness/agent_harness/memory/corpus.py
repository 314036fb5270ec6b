"""Reading a user's searchable files through the per-container cache.

Both search services read here: memory_search the ledgers (and, for ``ranked``, the
thread segments of the turns a ledger section names), thread_search the segments (and,
for ``ranked``, the ledger facts naming a message's turn). One LIST per folder, then
concurrent GETs of only the files whose (user, path, ETag) the cache does not hold; each
cached file keeps its parsed lines and postings, so a warm query does no parsing.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, TypeVar

from agent_harness.memory.index import (
    FileIndex,
    LinkedIndexes,
    MemoryIndexCache,
    Sized,
    date_words,
    linked_texts,
)
from agent_harness.memory.segments import Segment, parse_segment
from agent_harness.paths import LEDGER_DIR, MEMORY_FILE, SEGMENT_DIR, ledger_date

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_harness.ids import User
    from agent_harness.memory.listings import RecentListings
    from agent_harness.ports import ObjectInfo, StoredObject
    from agent_harness.runtime import Runtime

__all__ = [
    "index_read",
    "load_cached",
    "load_fact_texts",
    "load_ledgers",
    "load_listed",
    "load_memory_files",
    "load_segments",
    "load_turn_texts",
]

T = TypeVar("T", bound=Sized)


def load_cached(
    rt: Runtime,
    user: User,
    cache: MemoryIndexCache,
    prefix: str,
    suffix: str,
    parse: Callable[[str, str], T],
    *,
    first: tuple[str, ...] = (),
) -> list[tuple[str, T]]:
    """The files under ``prefix`` ending in ``suffix`` (by path), parsed with
    ``parse(path, text)``, after the files ``first`` (always read): one LIST, then
    concurrent GETs of only what the cache does not hold for that (user, path, ETag)."""
    listed = [i for i in rt.store.list(user, prefix) if i.path.endswith(suffix)]
    return load_listed(rt, user, cache, listed, parse, first=first)


def load_listed(
    rt: Runtime,
    user: User,
    cache: MemoryIndexCache,
    listed: list[ObjectInfo],
    parse: Callable[[str, str], T],
    *,
    first: tuple[str, ...] = (),
) -> list[tuple[str, T]]:
    """``listed`` (and ``first``), parsed: GETs of only what the cache does not hold."""
    listed = sorted(listed, key=lambda i: i.path)
    missing = [i.path for i in listed if cache.get((user.key, i.path, i.etag)) is None]
    fetched = rt.store.get_many(user, [*first, *missing]) if first or missing else {}
    out: list[tuple[str, T]] = []
    for path, etag in [*((p, None) for p in first), *((i.path, i.etag) for i in listed)]:
        obj = fetched.get(path)
        parsed = cache.get((user.key, path, etag)) if etag is not None else None
        if parsed is None and obj is not None:
            key = (user.key, path, obj.etag)
            parsed = cache.get(key)
            if parsed is None:
                parsed = parse(path, obj.content)
                cache.put(key, parsed)
        if parsed is not None:
            out.append((path, parsed))
    return out


def index_memory_file(path: str, text: str) -> FileIndex:
    """A ledger's lines rank with their day (from the file name); MEMORY.md's with none."""
    day = ledger_date(path)
    return FileIndex.build(text, date_words(*day) if day else "")


def load_ledgers(
    rt: Runtime,
    user: User,
    cache: MemoryIndexCache,
    listings: RecentListings | None = None,
    max_age: float = 0.0,
) -> list[tuple[str, FileIndex]]:
    """Every memory/** ledger (archive included), by path, indexed: one LIST (or, with
    ``listings``, the user's last one if younger than ``max_age`` seconds), GETs of the
    ledgers not cached."""
    now = rt.clock.now().timestamp()
    listed = listings.get(user.key, now, max_age) if listings is not None else None
    if listed is None:
        listed = [i for i in rt.store.list(user, LEDGER_DIR) if i.path.endswith(".md")]
        if listings is not None:
            listings.put(user.key, now, listed)
    return load_listed(rt, user, cache, listed, index_memory_file)


def index_read(cache: MemoryIndexCache, user: User, obj: StoredObject) -> FileIndex:
    """A file the caller has read already (the turn's MEMORY.md), indexed once per ETag."""
    key = (user.key, obj.path, obj.etag)
    known: FileIndex | None = cache.get(key)
    if known is None:
        known = index_memory_file(obj.path, obj.content)
        cache.put(key, known)
    return known


def load_memory_files(
    rt: Runtime, user: User, cache: MemoryIndexCache
) -> list[tuple[str, FileIndex]]:
    """MEMORY.md then every memory/** ledger (archive included), by path, indexed."""
    return load_cached(rt, user, cache, LEDGER_DIR, ".md", index_memory_file, first=(MEMORY_FILE,))


def load_fact_texts(rt: Runtime, user: User, cache: MemoryIndexCache) -> LinkedIndexes:
    """The facts of every ledger (archive included) that name their turns: one LIST of
    memory/, GETs of the ledgers not cached."""
    ledgers = [f for _, f in load_ledgers(rt, user, cache)]
    return linked_texts(cache, user.key, "#fact-texts", [f for f in ledgers if f.cited()])


def load_segments(rt: Runtime, user: User, cache: MemoryIndexCache) -> list[tuple[str, Segment]]:
    """Every month segment of thread search, indexed (days in the configured zone)."""
    parse = partial(parse_segment, zone=rt.settings.zone)
    return load_cached(rt, user, cache, SEGMENT_DIR, ".jsonl", parse)


def load_turn_texts(rt: Runtime, user: User, cache: MemoryIndexCache) -> LinkedIndexes:
    """Every indexed turn's messages (one LIST, GETs of the months not cached)."""
    segments = [segment.index for _, segment in load_segments(rt, user, cache)]
    return linked_texts(cache, user.key, "#turn-texts", segments)
