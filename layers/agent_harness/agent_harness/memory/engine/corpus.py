"""Reading a user's searchable files through the per-container cache.

Both search services read here: memory_search the ledgers (and, for ``ranked``, the
thread segments of the turns a ledger section names), thread_search the segments (and,
for ``ranked``, the ledger facts naming a message's turn). One LIST per folder (automatic
recall lists both in one: ``joint_listing``), then concurrent GETs of only the files whose
(user, path, ETag) the cache does not hold; each cached file keeps its parsed lines and
postings, so a warm query does no parsing.

A container that has not read a user's files of a kind yet (a cold one), or misses
``SNAPSHOT_MIN_MISSING`` or more of them, first reads the ranked-index snapshots of
their months (``memory.engine.snapshots``): one GET per month instead of one per file, and no
parsing or indexing. Only files whose snapshot entry is missing or older than the file
(its ETag) are then read.
``refresh_snapshots`` writes them: the post-turn job for what it wrote, consolidation
for all.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, TypeVar

from aws_lambda_powertools import Logger

from agent_harness.errors import HarnessError, PreconditionFailedError
from agent_harness.memory.engine import snapshots
from agent_harness.memory.engine.alignment import TurnWords, aligned_sections, unaligned
from agent_harness.memory.engine.cache import Sized, building
from agent_harness.memory.engine.file_index import FileIndex
from agent_harness.memory.engine.index import LinkedIndexes, date_words
from agent_harness.memory.engine.segments import Segment, parse_segment
from agent_harness.memory.owner.writes import Writes
from agent_harness.paths import (
    LEDGER_DIR,
    MEMORY_FILE,
    SEGMENT_DIR,
    SNAPSHOT_DIR,
    VECTOR_DIR,
    ledger_date,
    snapshot_path,
    snapshot_sources,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_harness.ids import User
    from agent_harness.memory.engine.cache import MemoryIndexCache
    from agent_harness.memory.engine.listings import RecentListings
    from agent_harness.ports import ObjectInfo, StoredObject
    from agent_harness.runtime import Runtime

__all__ = [
    "fact_texts",
    "index_read",
    "joint_listing",
    "load_cached",
    "load_fact_texts",
    "load_ledgers",
    "load_listed",
    "load_memory_files",
    "load_segments",
    "load_turn_texts",
    "refresh_snapshots",
]

T = TypeVar("T", bound=Sized)
logger = Logger(child=True)
#: a read missing this many files from the cache (or all of them) reads their months'
#: snapshots first; one missing is a warm container after a write: the file is cheaper
SNAPSHOT_MIN_MISSING = 2


def load_cached(
    rt: Runtime,
    user: User,
    cache: MemoryIndexCache,
    prefix: str,
    suffix: str,
    parse: Callable[[str, str], T],
    *,
    first: tuple[str, ...] = (),
    restore: Callable[[snapshots.Entry], T] | None = None,
) -> list[tuple[str, T]]:
    """The files under ``prefix`` ending in ``suffix`` (by path), parsed with
    ``parse(path, text)``, after the files ``first`` (always read): one LIST, then
    concurrent GETs of only what the cache does not hold for that (user, path, ETag)."""
    listed = [i for i in rt.store.list(user, prefix) if i.path.endswith(suffix)]
    return load_listed(rt, user, cache, listed, parse, first=first, restore=restore)


def load_listed(
    rt: Runtime,
    user: User,
    cache: MemoryIndexCache,
    listed: list[ObjectInfo],
    parse: Callable[[str, str], T],
    *,
    first: tuple[str, ...] = (),
    restore: Callable[[snapshots.Entry], T] | None = None,
) -> list[tuple[str, T]]:
    """``listed`` (and ``first``), parsed: GETs of only what the cache does not hold,
    after the snapshots of their months (``restore`` decodes an entry) when many are
    missing."""
    listed = sorted(listed, key=lambda i: i.path)
    absent = [i for i in listed if cache.get((user.key, i.path, i.etag)) is None]
    with building():  # a cold read builds what the cache keeps
        if restore is not None and absent:
            # cold: this container has not read these files of this user before
            seen = (user.key, f"#read {restore.__qualname__}", "")
            if cache.get(seen) is None or len(absent) >= SNAPSHOT_MIN_MISSING:
                for info, restored in _from_snapshots(rt, user, absent, restore):
                    cache.put((user.key, info.path, info.etag), restored)
                cache.put(seen, _Seen())
        missing = [i.path for i in absent if cache.get((user.key, i.path, i.etag)) is None]
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


class _Seen:
    """The cache's mark that a container has read a kind of a user's files."""

    size = 64


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
    *,
    listed: list[ObjectInfo] | None = None,
) -> list[tuple[str, FileIndex]]:
    """Every memory/** ledger (archive included), by path, indexed: one LIST (or, with
    ``listings``, the user's last one if younger than ``max_age`` seconds; or ``listed``,
    a listing made already), GETs of the ledgers not cached."""
    if listed is None:
        listed = _listing(rt, user, LEDGER_DIR, listings, max_age)
    return load_listed(rt, user, cache, listed, index_memory_file, restore=snapshots.decode_ledger)


#: the folders recall reads, with the ending of the files it reads in each (the vectors
#: of recall by meaning, with an embedding model, sort between the other two: listing
#: them costs no request)
_SUFFIX = {LEDGER_DIR: ".md", SEGMENT_DIR: ".jsonl", VECTOR_DIR: ".json"}
#: what a joint LIST asks for beyond the files found last time: files added since, and a
#: key past the last folder that shows it has ended (each key costs parsing)
JOINT_SLACK = 8
#: what it asks for when this container has not listed the user's folders yet
JOINT_FIRST = 64


def _listing(
    rt: Runtime,
    user: User,
    folder: str,
    listings: RecentListings | None,
    max_age: float,
) -> list[ObjectInfo]:
    """The files of a user's ``folder``: a LIST, or the last one if young enough."""
    now = rt.clock.now().timestamp()
    key = _listing_key(user, folder)
    listed = listings.get(key, now, max_age) if listings is not None else None
    if listed is None:
        listed = [i for i in rt.store.list(user, folder) if i.path.endswith(_SUFFIX[folder])]
        if listings is not None:
            listings.put(key, now, listed)
    return listed


def recent_listing(
    rt: Runtime, user: User, folder: str, listings: RecentListings, max_age: float
) -> list[ObjectInfo] | None:
    """The files of ``folder`` as this container last listed them, if younger than
    ``max_age`` seconds (never a request)."""
    return listings.get(_listing_key(user, folder), rt.clock.now().timestamp(), max_age)


def _listing_key(user: User, folder: str) -> str:
    return f"{user.key} {folder}"


def joint_listing(
    rt: Runtime, user: User, listings: RecentListings, max_age: float
) -> dict[str, list[ObjectInfo]]:
    """The ledgers', the thread segments' and the vectors' files, by folder, listed
    together (one request while there are about as many as the container last saw, or
    ``JOINT_FIRST`` at first), when all need a LIST. Else, or if that fails, nothing:
    each is then listed on its own."""
    now = rt.clock.now().timestamp()
    meaning = rt.embeddings() is not None  # built, not loaded: the model loads on first use
    folders = [f for f in _SUFFIX if meaning or f != VECTOR_DIR]
    keys = {folder: _listing_key(user, folder) for folder in folders}
    if any(listings.get(key, now, max_age) is not None for key in keys.values()):
        return {}
    counts = [listings.count(key) for key in keys.values()]
    expect = JOINT_FIRST if None in counts else sum(c or 0 for c in counts) + JOINT_SLACK
    try:
        together = rt.store.list_together(user, tuple(keys), expect=expect)
    except HarnessError as exc:
        logger.warning("joint listing failed; listing apart", extra={"error": str(exc)})
        return {}
    out: dict[str, list[ObjectInfo]] = {}
    for folder, key in keys.items():
        out[folder] = [i for i in together[folder] if i.path.endswith(_SUFFIX[folder])]
        listings.put(key, now, out[folder])
    return out


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
    return load_cached(
        rt,
        user,
        cache,
        LEDGER_DIR,
        ".md",
        index_memory_file,
        first=(MEMORY_FILE,),
        restore=snapshots.decode_ledger,
    )


def load_fact_texts(
    rt: Runtime, user: User, cache: MemoryIndexCache, segments: list[tuple[str, Segment]]
) -> LinkedIndexes:
    """The facts of every ledger (archive included) that name their turns: one LIST of
    memory/, GETs of the ledgers not cached."""
    return fact_texts(cache, user, load_ledgers(rt, user, cache), segments)


def fact_texts(
    cache: MemoryIndexCache,
    user: User,
    ledgers: list[tuple[str, FileIndex]],
    segments: list[tuple[str, Segment]],
) -> LinkedIndexes:
    """The facts of ``ledgers`` (read already) that name their turns, a long section's
    facts linked to the turns of ``segments`` they align with (``memory.engine.alignment``)."""
    linked = [f for _, f in ledgers if f.linked_groups()]
    return linked_texts(cache, user.key, "#fact-texts", linked, [s.index for _, s in segments])


def load_segments(
    rt: Runtime,
    user: User,
    cache: MemoryIndexCache,
    listings: RecentListings | None = None,
    max_age: float = 0.0,
    *,
    listed: list[ObjectInfo] | None = None,
) -> list[tuple[str, Segment]]:
    """Every month segment of thread search, indexed (days in the configured zone): one
    LIST (or, with ``listings``, the user's last one if younger than ``max_age``
    seconds; or ``listed``, a listing made already), GETs of the months not cached."""
    if listed is None:
        listed = _listing(rt, user, SEGMENT_DIR, listings, max_age)
    parse = partial(parse_segment, zone=rt.settings.zone)
    return load_listed(rt, user, cache, listed, parse, restore=snapshots.decode_segment)


def load_turn_texts(rt: Runtime, user: User, cache: MemoryIndexCache) -> LinkedIndexes:
    """Every indexed turn's messages (one LIST, GETs of the months not cached)."""
    segments = [segment.index for _, segment in load_segments(rt, user, cache)]
    return linked_texts(cache, user.key, "#turn-texts", segments)


def linked_texts(
    cache: MemoryIndexCache,
    user_key: str,
    name: str,
    indexes: list[FileIndex],
    segments: list[FileIndex] | None = None,
) -> LinkedIndexes:
    """The ``LinkedTexts`` of ``indexes`` (cached files; ledgers aligned with
    ``segments``): while none of them changes, the same object, with the joins ranked
    search made."""
    both = [*indexes, *(segments or ())]
    key = (user_key, name, ",".join(str(id(f)) for f in both))
    known: LinkedIndexes | None = cache.get(key)
    if known is not None and all(
        a is b for a, b in zip(known.indexes + known.segments, both, strict=True)
    ):
        return known
    made = LinkedIndexes(indexes, segments or ())  # inside its callers' ``building``
    cache.put(key, made)
    return made


# the persisted ranked index ----------------------------------------------------------
def _from_snapshots(
    rt: Runtime, user: User, absent: list[ObjectInfo], restore: Callable[[snapshots.Entry], T]
) -> list[tuple[ObjectInfo, T]]:
    """The ``absent`` files whose months' snapshots hold them at their current ETag. A
    snapshot that cannot be read costs only speed: its files are read as files."""
    names = sorted({name for i in absent if (name := snapshot_path(i.path))})
    try:
        read = rt.store.get_many(user, names)
    except HarnessError as exc:
        logger.warning("ranked-index snapshots unreadable", extra={"error": str(exc)})
        return []
    entries: dict[str, snapshots.Entry] = {}
    for obj in read.values():
        entries.update(snapshots.read(obj.content))
    out: list[tuple[ObjectInfo, T]] = []
    for info in absent:
        entry = entries.get(info.path)
        if entry is None or entry.get("etag") != info.etag:
            continue
        try:
            out.append((info, restore(entry)))
        except (KeyError, TypeError, ValueError):
            logger.warning("a damaged snapshot entry, reading the file", extra={"path": info.path})
    return out


def _turn_words(rt: Runtime, user: User) -> TurnWords:
    """The words of the user's turns, for aligning long sections before a snapshot keeps
    them (none if the segments cannot be read: the snapshot is written without)."""
    try:
        segments = load_segments(rt, user, rt.search_cache)
    except HarnessError as exc:
        logger.warning("segments unreadable, snapshot not aligned", extra={"error": str(exc)})
        return TurnWords([])
    return TurnWords([segment.index for _, segment in segments])


def _parser(rt: Runtime, path: str) -> Callable[[str, str], FileIndex | Segment]:
    if path.endswith(".jsonl"):
        return partial(parse_segment, zone=rt.settings.zone)
    return index_memory_file


def refresh_snapshots(rt: Runtime, user: User, paths: set[str] | None = None) -> int:
    """Bring the snapshots holding ``paths`` (None: every file and snapshot the user has)
    up to date with their files: a LIST per folder, each snapshot's GET, GETs of the
    files changed since, a conditional PUT (a DELETE when its files are gone). Returns
    the snapshots written or deleted. Best effort, since a reader never relies on a
    snapshot being fresh: a store error is logged, and a race lost to another writer
    leaves that snapshot to the winner."""
    try:
        if paths is None:
            listed = [*rt.store.list(user, LEDGER_DIR), *rt.store.list(user, SEGMENT_DIR)]
            stored = rt.store.list(user, SNAPSHOT_DIR)
            names = {i.path for i in stored if snapshot_sources(i.path) is not None}
        else:
            names = {name for p in paths if (name := snapshot_path(p))}
            folders = sorted({folder for n in names if (folder := snapshot_sources(n))})
            listed = [i for f in folders for i in rt.store.list(user, f, recursive=False)]
        groups: dict[str, list[ObjectInfo]] = {name: [] for name in names}
        for info in listed:
            name = snapshot_path(info.path)
            if name is not None and (paths is None or name in groups):
                groups.setdefault(name, []).append(info)
        return sum(_refresh(rt, user, name, files) for name, files in sorted(groups.items()))
    except HarnessError as exc:
        logger.warning("refreshing ranked-index snapshots failed", extra={"error": str(exc)})
        return 0


def _refresh(rt: Runtime, user: User, name: str, listed: list[ObjectInfo]) -> int:
    current = rt.store.get(user, name)
    old = snapshots.read(current.content) if current is not None else {}
    etags = {i.path: i.etag for i in listed}
    files = {p: e for p, e in old.items() if etags.get(p) == e.get("etag")}
    stale = sorted(p for p in etags if p not in files)
    try:
        if not listed:
            if current is not None:
                Writes(rt, user).drop_index(name, etag=current.etag)
            return int(current is not None)
        if not stale and len(files) == len(old) and current is not None:
            return 0
        words: TurnWords | None = None  # read once, for the first ledger that needs them
        for path, obj in rt.store.get_many(user, stale).items():
            parsed = _parser(rt, path)(path, obj.content)
            if isinstance(parsed, FileIndex) and unaligned(parsed):
                if words is None:
                    words = _turn_words(rt, user)
                aligned_sections(parsed, words)  # kept in parsed.aligned
            files[path] = snapshots.encode(parsed, obj.etag)
        text = snapshots.render(files)
        etag = current.etag if current is not None else None
        Writes(rt, user).write_index(name, text, etag=etag)
    except PreconditionFailedError:
        logger.info("a snapshot changed meanwhile, left to its writer", extra={"snapshot": name})
        return 0
    return 1
