"""The ``WorkspaceStore`` contract: ``MemoryStore`` (the fake) and ``S3WorkspaceStore`` on a
versioned moto bucket must agree on every behaviour the services rely on."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from agent_harness.aws.workspace import S3WorkspaceStore
from agent_harness.errors import InvalidRequestError, PreconditionFailedError
from agent_harness.ids import User
from agent_harness.ports import MAX_WRITER_CHARS, WorkspaceStore
from tests.fakes import MemoryStore

ALICE = User.from_id("alice")
AL = User.from_id("al")  # a user whose key is a prefix of alice's
BOB = User.from_id("bob@example.com")  # a key that needs encoding


class SerialPuts:
    """The boto3 S3 client with PutObject calls serialised.

    moto differs from S3 here: its conditional PUT (moto/s3/responses.py ``put_object``)
    checks If-Match / If-None-Match and then writes, without a lock, so two threads can
    both pass the check (a lost append under concurrency that AWS does not have: S3
    evaluates the condition atomically with the write). Serialising the calls gives moto
    S3's atomicity, so the concurrency contract tests the adapter's CAS loop."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()

    def put_object(self, **kwargs: Any) -> Any:
        with self._lock:
            return self._client.put_object(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.fixture
def store(backend: str, request: pytest.FixtureRequest) -> WorkspaceStore:
    if backend == "fake":
        return MemoryStore()
    stack = request.getfixturevalue("stack")
    return S3WorkspaceStore(SerialPuts(stack.clients["s3"]), stack.bucket)


def paths(store: WorkspaceStore, user: User, prefix: str = "", **kw: Any) -> list[str]:
    return [o.path for o in store.list(user, prefix, **kw)]


# -- reads and writes ----------------------------------------------------------------------


def test_getting_a_missing_object_returns_none(store: WorkspaceStore) -> None:
    assert store.get(ALICE, "MEMORY.md") is None


def test_a_put_object_reads_back_with_its_etag_and_byte_size(store: WorkspaceStore) -> None:
    text = "héllo — wörld\n"
    etag = store.put(ALICE, "MEMORY.md", text)

    got = store.get(ALICE, "MEMORY.md")
    assert got is not None
    assert got.path == "MEMORY.md"
    assert got.content == text
    assert got.etag == etag
    assert got.size == len(text.encode())  # bytes, not characters
    assert got.version_id  # the bucket is versioned
    assert got.last_modified is not None


def test_a_put_replaces_the_content_with_a_new_etag(store: WorkspaceStore) -> None:
    first = store.put(ALICE, "MEMORY.md", "one")
    second = store.put(ALICE, "MEMORY.md", "two")
    assert second != first
    got = store.get(ALICE, "MEMORY.md")
    assert got is not None and (got.content, got.etag) == ("two", second)


def test_the_etag_identifies_the_content(store: WorkspaceStore) -> None:
    """S3 documents that an SSE-S3 (the template's AES256) single-part object's ETag is the
    MD5 of its bytes: rewriting the same text leaves the ETag unchanged, so an If-Match
    read before such a rewrite still matches."""
    first = store.put(ALICE, "MEMORY.md", "same")
    again = store.put(ALICE, "MEMORY.md", "same")
    assert again == first
    store.put(ALICE, "MEMORY.md", "next", if_match=first)
    got = store.get(ALICE, "MEMORY.md")
    assert got is not None and got.content == "next"


def test_create_only_writes_a_missing_object(store: WorkspaceStore) -> None:
    etag = store.put(ALICE, "sessions/s1/turns/1.json", "{}", create_only=True)
    got = store.get(ALICE, "sessions/s1/turns/1.json")
    assert got is not None and got.etag == etag


def test_create_only_on_an_existing_object_fails_and_keeps_it(store: WorkspaceStore) -> None:
    store.put(ALICE, "sessions/s1/turns/1.json", "first", create_only=True)
    with pytest.raises(PreconditionFailedError):
        store.put(ALICE, "sessions/s1/turns/1.json", "second", create_only=True)
    got = store.get(ALICE, "sessions/s1/turns/1.json")
    assert got is not None and got.content == "first"


def test_if_match_with_the_current_etag_writes(store: WorkspaceStore) -> None:
    etag = store.put(ALICE, "MEMORY.md", "v1")
    new = store.put(ALICE, "MEMORY.md", "v2", if_match=etag)
    got = store.get(ALICE, "MEMORY.md")
    assert got is not None and (got.content, got.etag) == ("v2", new)


def test_if_match_with_a_stale_etag_fails_and_keeps_the_object(store: WorkspaceStore) -> None:
    stale = store.put(ALICE, "MEMORY.md", "v1")
    current = store.put(ALICE, "MEMORY.md", "v2")
    with pytest.raises(PreconditionFailedError):
        store.put(ALICE, "MEMORY.md", "v3", if_match=stale)
    got = store.get(ALICE, "MEMORY.md")
    assert got is not None and (got.content, got.etag) == ("v2", current)


def test_if_match_on_a_missing_object_fails_and_creates_nothing(store: WorkspaceStore) -> None:
    etag = store.put(ALICE, "MEMORY.md", "v1")
    with pytest.raises(PreconditionFailedError):
        store.put(ALICE, "AGENTS.md", "x", if_match=etag)
    assert store.get(ALICE, "AGENTS.md") is None


def test_if_match_and_create_only_together_are_refused(store: WorkspaceStore) -> None:
    etag = store.put(ALICE, "MEMORY.md", "v1")
    with pytest.raises(ValueError, match="exclusive"):
        store.put(ALICE, "MEMORY.md", "v2", if_match=etag, create_only=True)


# -- ranged reads and batches --------------------------------------------------------------


def test_get_from_returns_the_bytes_after_the_offset_and_the_whole_size(
    store: WorkspaceStore,
) -> None:
    text = "héllo world\n"  # é is two bytes: "world" starts at byte 7
    etag = store.put(ALICE, "memory/2026-11-30.md", text)

    tail = store.get_from(ALICE, "memory/2026-11-30.md", 7)
    assert tail is not None
    assert (tail.content, tail.size, tail.etag) == ("world\n", len(text.encode()), etag)


def test_get_from_offset_zero_is_the_whole_object(store: WorkspaceStore) -> None:
    store.put(ALICE, "memory/2026-11-30.md", "abc")
    got = store.get_from(ALICE, "memory/2026-11-30.md", 0)
    assert got is not None and (got.content, got.size) == ("abc", 3)


@pytest.mark.parametrize("past", [0, 1, 100])
def test_get_from_at_or_past_the_end_is_empty_with_the_size(
    store: WorkspaceStore, past: int
) -> None:
    """S3 answers a range starting past the end with 416; the adapter turns it into an
    empty read that still carries the object's size and ETag."""
    etag = store.put(ALICE, "memory/2026-11-30.md", "abc")
    got = store.get_from(ALICE, "memory/2026-11-30.md", 3 + past)
    assert got is not None
    assert (got.content, got.size, got.etag) == ("", 3, etag)


def test_get_from_a_missing_object_returns_none(store: WorkspaceStore) -> None:
    assert store.get_from(ALICE, "memory/2099-01-01.md", 3) is None


def test_get_from_a_negative_offset_is_the_whole_object(store: WorkspaceStore) -> None:
    store.put(ALICE, "memory/2026-11-30.md", "abcdef")
    got = store.get_from(ALICE, "memory/2026-11-30.md", -2)
    assert got is not None and (got.content, got.size) == ("abcdef", 6)


def test_get_from_inside_a_multibyte_character_replaces_the_fragment(
    store: WorkspaceStore,
) -> None:
    store.put(ALICE, "memory/2026-11-30.md", "héllo")  # é is bytes 1-2
    got = store.get_from(ALICE, "memory/2026-11-30.md", 2)
    assert got is not None and got.content == "\ufffdllo"


def test_get_many_returns_the_present_objects_and_skips_missing_ones(
    store: WorkspaceStore,
) -> None:
    a = store.put(ALICE, "a.md", "A")
    b = store.put(ALICE, "dir/b.md", "B")
    store.put(BOB, "missing.md", "bob's, not alice's")

    got = store.get_many(ALICE, ["a.md", "missing.md", "dir/b.md"])
    assert sorted(got) == ["a.md", "dir/b.md"]
    assert (got["a.md"].content, got["a.md"].etag) == ("A", a)
    assert (got["dir/b.md"].content, got["dir/b.md"].etag) == ("B", b)
    assert store.get_many(ALICE, []) == {}


# -- listing -------------------------------------------------------------------------------


def test_list_is_recursive_by_default_and_sorted(store: WorkspaceStore) -> None:
    sizes = {"memory/2026-11-30.md": 1, "memory/archive/2026-01-01.md": 2, "MEMORY.md": 3}
    etags = {p: store.put(ALICE, p, "x" * n) for p, n in sizes.items()}

    listed = store.list(ALICE, "")
    assert [o.path for o in listed] == sorted(sizes)
    assert {o.path: (o.size, o.etag) for o in listed} == {p: (sizes[p], etags[p]) for p in sizes}
    assert all(o.last_modified is not None for o in listed)
    assert paths(store, ALICE, "memory") == [
        "memory/2026-11-30.md",
        "memory/archive/2026-01-01.md",
    ]


def test_list_non_recursive_stops_at_the_first_level(store: WorkspaceStore) -> None:
    for p in ["memory/2026-11-30.md", "memory/archive/2026-01-01.md", "MEMORY.md"]:
        store.put(ALICE, p, "x")
    assert paths(store, ALICE, "memory", recursive=False) == ["memory/2026-11-30.md"]
    assert paths(store, ALICE, "memory/", recursive=False) == ["memory/2026-11-30.md"]
    assert paths(store, ALICE, "", recursive=False) == ["MEMORY.md"]


def test_a_list_prefix_is_a_folder_not_a_string_prefix(store: WorkspaceStore) -> None:
    for p in ["memory/a.md", "memory-old/b.md", "memoryx.md"]:
        store.put(ALICE, p, "x")
    assert paths(store, ALICE, "memory") == ["memory/a.md"]
    assert paths(store, ALICE, "nothing") == []


def test_users_whose_keys_share_a_prefix_see_only_their_own_objects(
    store: WorkspaceStore,
) -> None:
    store.put(AL, "MEMORY.md", "al")
    store.put(AL, "memory/2026-11-30.md", "al")
    store.put(ALICE, "MEMORY.md", "alice")

    assert paths(store, AL) == ["MEMORY.md", "memory/2026-11-30.md"]
    assert paths(store, ALICE) == ["MEMORY.md"]
    assert paths(store, ALICE, "memory") == []
    assert paths(store, BOB) == []
    got = store.get(ALICE, "MEMORY.md")
    assert got is not None and got.content == "alice"


@pytest.mark.parametrize("expect", [1, 3, 1000])
def test_folders_listed_together_are_each_listed_whole_whatever_was_expected(
    store: WorkspaceStore, expect: int
) -> None:
    # keys sort before, between, inside and after the two folders
    for p in [
        "MEMORY.md",
        "index/ranked/memory-2026-11.json",
        "index/threads-old/x.jsonl",
        "index/threads/2026-10.jsonl",
        "index/threads/2026-11.jsonl",
        "journal/a.md",
        "memory-old/b.md",
        "memory/2026-11-30.md",
        "memory/archive/2026-01-01.md",
        "memoryx.md",
        "sessions/s/turns/00000001.json",
        "tool-results/s/c.txt",
    ]:
        store.put(ALICE, p, "x")
    store.put(AL, "memory/2026-11-29.md", "al")  # a user whose key is a prefix of alice's

    together = store.list_together(ALICE, ("index/threads", "memory/"), expect=expect)

    assert {f: [o.path for o in listed] for f, listed in together.items()} == {
        "index/threads": paths(store, ALICE, "index/threads"),
        "memory/": paths(store, ALICE, "memory/"),
    }
    assert together["memory/"] == store.list(ALICE, "memory/")  # sizes and ETags too
    assert store.list_together(BOB, ("index/threads", "memory/"), expect=expect) == {
        "index/threads": [],
        "memory/": [],
    }


# -- listing users -------------------------------------------------------------------------


def test_list_users_lists_the_keys_of_users_with_objects_sorted(store: WorkspaceStore) -> None:
    assert store.list_users() == []
    store.put(BOB, "MEMORY.md", "bob's")
    store.put(ALICE, "memory/2026-11-30.md", "ledger")
    store.put(ALICE, "sessions/s1/turns/1.json", "{}")
    store.put(AL, "sessions/s1/context.json", "{}")
    # (On AWS a user whose every object is deleted, leaving noncurrent versions and delete
    # markers, is not listed; moto 5.2 still lists its common prefix, so that case is not
    # part of the contract. The fake follows AWS.)

    assert store.list_users() == ["al", "alice", "bob%40example%2Ecom"]
    assert BOB.key == "bob%40example%2Ecom"  # the encoded key, not the id
    store.purge(ALICE)
    assert store.list_users() == ["al", "bob%40example%2Ecom"]


def test_list_users_filters_by_the_encoded_key_prefix(store: WorkspaceStore) -> None:
    for user in (AL, ALICE, BOB):
        store.put(user, "MEMORY.md", "x")
    assert store.list_users("al") == ["al", "alice"]
    assert store.list_users("ali") == ["alice"]
    assert store.list_users("alice") == ["alice"]
    assert store.list_users("bob%40") == [BOB.key]
    assert store.list_users("bob@") == []  # the raw id is not a key
    assert store.list_users("alicex") == []
    assert store.list_users("z") == []


def test_list_users_stops_at_the_limit(store: WorkspaceStore) -> None:
    users = [User.from_id(f"user-{n}") for n in range(5)]
    for user in reversed(users):
        store.put(user, "MEMORY.md", "x")
        store.put(user, "memory/2026-11-30.md", "x")
    store.put(ALICE, "MEMORY.md", "x")
    keys = [u.key for u in users]

    assert store.list_users("user-", limit=2) == keys[:2]
    assert store.list_users("user-", limit=5) == keys
    assert store.list_users("user-", limit=100) == keys
    assert store.list_users(limit=1) == ["alice"]
    assert store.list_users(limit=3) == ["alice", *keys[:2]]


@pytest.mark.parametrize("prefix", ["alice/", "a/b", "/", "../alice"])
def test_a_list_users_prefix_with_a_slash_is_an_invalid_request(
    store: WorkspaceStore, prefix: str
) -> None:
    store.put(ALICE, "MEMORY.md", "x")
    with pytest.raises(InvalidRequestError):
        store.list_users(prefix)


def test_a_list_users_limit_below_one_is_an_invalid_request(store: WorkspaceStore) -> None:
    store.put(ALICE, "MEMORY.md", "x")
    with pytest.raises(InvalidRequestError):
        store.list_users(limit=0)


# -- who wrote a version -------------------------------------------------------------------


def test_the_writer_of_a_version_reads_back_with_it(store: WorkspaceStore) -> None:
    store.put(ALICE, "MEMORY.md", "v1", writer="api")
    store.put(ALICE, "MEMORY.md", "v2", writer="consolidation model=scripted:test")

    got = store.get(ALICE, "MEMORY.md")
    assert got is not None and got.writer == "consolidation model=scripted:test"
    tail = store.get_from(ALICE, "MEMORY.md", 1)
    assert tail is not None and (tail.content, tail.writer) == ("2", got.writer)
    newest, oldest = store.list_versions(ALICE, "MEMORY.md")
    old = store.get_version(ALICE, "MEMORY.md", oldest.version_id)
    assert old is not None and (old.content, old.writer) == ("v1", "api")
    new = store.get_version(ALICE, "MEMORY.md", newest.version_id)
    assert new is not None and new.writer == "consolidation model=scripted:test"


def test_a_version_written_without_a_writer_has_none(store: WorkspaceStore) -> None:
    store.put(ALICE, "MEMORY.md", "v1")
    got = store.get(ALICE, "MEMORY.md")
    assert got is not None and got.writer is None

    store.put(ALICE, "MEMORY.md", "v2", writer="api")
    store.put(ALICE, "MEMORY.md", "v3")  # a writer is not carried over to the next version
    got = store.get(ALICE, "MEMORY.md")
    assert got is not None and (got.content, got.writer) == ("v3", None)
    writers = [
        v.writer
        for info in store.list_versions(ALICE, "MEMORY.md")
        if (v := store.get_version(ALICE, "MEMORY.md", info.version_id)) is not None
    ]
    assert writers == [None, "api", None]


@pytest.mark.parametrize(
    "writer",
    [
        "Zoë — console ✓ 🙂",
        " 100% sure: a%20b + c/d?e=f&g ",  # percent signs, padding spaces: kept as they are
        "line\nbreak\ttab",
        "emma\x7f",
    ],
    ids=["unicode", "percent", "escapes", "control"],
)
def test_a_writer_round_trips_exactly(store: WorkspaceStore, writer: str) -> None:
    store.put(ALICE, "MEMORY.md", "v1", writer=writer, create_only=True)
    got = store.get(ALICE, "MEMORY.md")
    assert got is not None and got.writer == writer
    (info,) = store.list_versions(ALICE, "MEMORY.md")
    old = store.get_version(ALICE, "MEMORY.md", info.version_id)
    assert old is not None and old.writer == writer


def test_a_long_writer_is_clipped(store: WorkspaceStore) -> None:
    store.put(ALICE, "a.md", "x", writer="é" * (MAX_WRITER_CHARS + 50))
    got = store.get(ALICE, "a.md")
    assert got is not None and got.writer == "é" * MAX_WRITER_CHARS
    # four bytes a character: clipped further so the metadata stays within S3's 2 KB
    store.put(ALICE, "b.md", "x", writer="🙂" * MAX_WRITER_CHARS)
    got = store.get(ALICE, "b.md")
    assert got is not None and got.writer == "🙂" * 150


def test_an_append_records_its_writer(store: WorkspaceStore) -> None:
    store.append(ALICE, "MEMORY.md", lambda existing: "- a\n", writer="mcp: memory_save")
    store.append(ALICE, "MEMORY.md", lambda existing: "- b\n")
    _, oldest = store.list_versions(ALICE, "MEMORY.md")
    first = store.get_version(ALICE, "MEMORY.md", oldest.version_id)
    assert first is not None and first.writer == "mcp: memory_save"
    got = store.get(ALICE, "MEMORY.md")
    assert got is not None and (got.content, got.writer) == ("- a\n- b\n", None)


# -- versions and deletes ------------------------------------------------------------------


def test_list_versions_is_newest_first_with_only_the_newest_latest(
    store: WorkspaceStore,
) -> None:
    etags = [store.put(ALICE, "MEMORY.md", text) for text in ("v1", "v2-", "v3--")]
    versions = store.list_versions(ALICE, "MEMORY.md")

    assert [v.etag for v in versions] == etags[::-1]
    assert [v.size for v in versions] == [4, 3, 2]
    assert [v.is_latest for v in versions] == [True, False, False]
    assert len({v.version_id for v in versions}) == 3
    current = store.get(ALICE, "MEMORY.md")
    assert current is not None and current.version_id == versions[0].version_id


def test_list_versions_is_confined_to_the_exact_path(store: WorkspaceStore) -> None:
    store.put(ALICE, "MEMORY.md", "m")
    store.put(ALICE, "MEMORY.md.bak", "b")  # shares the key as a string prefix
    store.put(AL, "MEMORY.md", "al")
    assert len(store.list_versions(ALICE, "MEMORY.md")) == 1
    assert store.list_versions(ALICE, "AGENTS.md") == []


def test_versions_come_in_pages_newest_first_with_a_cursor(store: WorkspaceStore) -> None:
    for n in range(5):
        store.put(ALICE, "MEMORY.md", f"v{n}")
    store.put(ALICE, "MEMORY.md.bak", "b")  # shares the key as a string prefix
    every = [v.version_id for v in store.list_versions(ALICE, "MEMORY.md")]

    first, cursor = store.list_versions_page(ALICE, "MEMORY.md", limit=2)
    second, cursor2 = store.list_versions_page(ALICE, "MEMORY.md", limit=2, after=cursor)
    last, end = store.list_versions_page(ALICE, "MEMORY.md", limit=2, after=cursor2)

    assert [v.version_id for v in first + second + last] == every
    assert (cursor, cursor2, end) == (every[1], every[3], None)
    assert first[0].is_latest and not last[0].is_latest
    assert store.list_versions_page(ALICE, "MEMORY.md", limit=5) == (
        store.list_versions(ALICE, "MEMORY.md"),
        None,
    )
    assert store.list_versions_page(ALICE, "AGENTS.md", limit=2) == ([], None)


def test_get_version_reads_an_earlier_version(store: WorkspaceStore) -> None:
    store.put(ALICE, "MEMORY.md", "v1")
    store.put(ALICE, "MEMORY.md", "v2")
    newest, oldest = store.list_versions(ALICE, "MEMORY.md")

    old = store.get_version(ALICE, "MEMORY.md", oldest.version_id)
    assert old is not None
    assert (old.content, old.etag, old.size, old.version_id) == (
        "v1",
        oldest.etag,
        2,
        oldest.version_id,
    )
    new = store.get_version(ALICE, "MEMORY.md", newest.version_id)
    assert new is not None and new.content == "v2"


def test_get_version_of_an_unknown_version_returns_none(store: WorkspaceStore) -> None:
    store.put(ALICE, "MEMORY.md", "v1")
    assert store.get_version(ALICE, "MEMORY.md", "no-such-version") is None


def test_delete_removes_the_current_object(store: WorkspaceStore) -> None:
    store.put(ALICE, "MEMORY.md", "v1")
    store.delete(ALICE, "MEMORY.md")
    assert store.get(ALICE, "MEMORY.md") is None
    assert store.get_from(ALICE, "MEMORY.md", 1) is None
    assert paths(store, ALICE) == []
    store.put(ALICE, "MEMORY.md", "again", create_only=True)  # absent again
    got = store.get(ALICE, "MEMORY.md")
    assert got is not None and got.content == "again"


def test_deleting_a_missing_object_is_a_no_op(store: WorkspaceStore) -> None:
    store.delete(ALICE, "nothing.md")
    assert store.get(ALICE, "nothing.md") is None


def test_delete_with_a_stale_etag_fails_and_keeps_the_object(store: WorkspaceStore) -> None:
    stale = store.put(ALICE, "MEMORY.md", "v1")
    store.put(ALICE, "MEMORY.md", "v2")
    with pytest.raises(PreconditionFailedError):
        store.delete(ALICE, "MEMORY.md", if_match=stale)
    got = store.get(ALICE, "MEMORY.md")
    assert got is not None and got.content == "v2"


def test_delete_with_the_current_etag_deletes(store: WorkspaceStore) -> None:
    store.put(ALICE, "MEMORY.md", "v1")
    current = store.put(ALICE, "MEMORY.md", "v2")
    store.delete(ALICE, "MEMORY.md", if_match=current)
    assert store.get(ALICE, "MEMORY.md") is None


def test_a_deleted_objects_versions_stay_listed_and_readable(store: WorkspaceStore) -> None:
    store.put(ALICE, "MEMORY.md", "v1")
    store.put(ALICE, "MEMORY.md", "v2")
    store.delete(ALICE, "MEMORY.md")

    versions = store.list_versions(ALICE, "MEMORY.md")
    assert [v.size for v in versions] == [2, 2]
    assert [v.is_latest for v in versions] == [False, False]
    old = store.get_version(ALICE, "MEMORY.md", versions[-1].version_id)
    assert old is not None and old.content == "v1"


def test_versions_from_before_a_delete_are_listed_after_a_rewrite(
    store: WorkspaceStore,
) -> None:
    store.put(ALICE, "MEMORY.md", "v1")
    store.delete(ALICE, "MEMORY.md")
    store.put(ALICE, "MEMORY.md", "v2-")
    versions = store.list_versions(ALICE, "MEMORY.md")
    assert [(v.size, v.is_latest) for v in versions] == [(3, True), (2, False)]


# -- forgetting a user ---------------------------------------------------------------------


def test_purge_removes_every_object_and_version_of_one_user_only(
    store: WorkspaceStore,
) -> None:
    store.put(ALICE, "MEMORY.md", "v1")
    store.put(ALICE, "MEMORY.md", "v2")
    store.put(ALICE, "memory/2026-11-30.md", "ledger")
    store.delete(ALICE, "memory/2026-11-30.md")  # a noncurrent version + a delete marker
    store.put(AL, "MEMORY.md", "al's")
    store.put(BOB, "MEMORY.md", "bob's")

    # MEMORY.md v1 + v2, the ledger's version and its delete marker
    assert store.purge(ALICE) == 4

    assert paths(store, ALICE) == []
    assert store.get(ALICE, "MEMORY.md") is None
    assert store.list_versions(ALICE, "MEMORY.md") == []
    assert store.list_versions(ALICE, "memory/2026-11-30.md") == []
    assert store.purge(ALICE) == 0
    for user, text in ((AL, "al's"), (BOB, "bob's")):
        got = store.get(user, "MEMORY.md")
        assert got is not None and got.content == text
        assert len(store.list_versions(user, "MEMORY.md")) == 1


def test_purge_counts_every_version_and_every_delete_marker(store: WorkspaceStore) -> None:
    store.put(ALICE, "a.md", "1")
    store.delete(ALICE, "a.md")
    store.put(ALICE, "a.md", "2")
    store.delete(ALICE, "a.md")
    store.put(ALICE, "b.md", "3")
    # a.md: two versions + two delete markers; b.md: one version. (On AWS, deleting a key
    # that was never written also leaves a delete marker; moto 5.2 writes none, so that
    # case is not part of the contract.)
    assert store.purge(ALICE) == 5


def test_delete_versions_removes_exactly_those_versions_for_good(store: WorkspaceStore) -> None:
    for text in ("v1", "v2", "v3"):
        store.put(ALICE, "MEMORY.md", text)
    store.put(AL, "MEMORY.md", "al's")
    v3, v2, v1 = store.list_versions(ALICE, "MEMORY.md")

    assert store.delete_versions(ALICE, "MEMORY.md", [v2.version_id]) == 1
    assert [v.version_id for v in store.list_versions(ALICE, "MEMORY.md")] == [
        v3.version_id,
        v1.version_id,
    ]
    # the current version deleted: the one before it is current again, no delete marker
    store.delete_versions(ALICE, "MEMORY.md", [v3.version_id])
    got = store.get(ALICE, "MEMORY.md")
    assert got is not None and got.content == "v1"
    assert [v.is_latest for v in store.list_versions(ALICE, "MEMORY.md")] == [True]
    store.delete_versions(ALICE, "MEMORY.md", [v1.version_id])
    assert store.get(ALICE, "MEMORY.md") is None and paths(store, ALICE) == []
    assert store.list_versions(ALICE, "MEMORY.md") == []
    other = store.get(AL, "MEMORY.md")
    assert other is not None and other.content == "al's"


def test_changed_since_names_paths_with_a_version_from_then_on_deleted_ones_too(
    store: WorkspaceStore,
) -> None:
    from datetime import timedelta

    store.put(ALICE, "MEMORY.md", "v1")
    store.put(ALICE, "memory/2026-11-30.md", "ledger")
    store.delete(ALICE, "memory/2026-11-30.md")
    store.put(AL, "MEMORY.md", "al's")
    (first,) = store.list_versions(ALICE, "MEMORY.md")
    assert first.last_modified is not None
    since = first.last_modified - timedelta(seconds=1)

    assert store.changed_since(ALICE, since) == ["MEMORY.md", "memory/2026-11-30.md"]
    assert store.changed_since(ALICE, first.last_modified + timedelta(hours=1)) == []
    assert store.changed_since(User.from_id("nobody"), since) == []


# -- appends -------------------------------------------------------------------------------


def test_append_creates_a_missing_object(store: WorkspaceStore) -> None:
    seen: list[str] = []

    def build(existing: str) -> str:
        seen.append(existing)
        return "- first\n"

    etag = store.append(ALICE, "memory/2026-11-30.md", build)
    assert seen == [""]
    got = store.get(ALICE, "memory/2026-11-30.md")
    assert got is not None and (got.content, got.etag) == ("- first\n", etag)


def test_append_adds_to_the_existing_content(store: WorkspaceStore) -> None:
    store.put(ALICE, "memory/2026-11-30.md", "- first\n")
    seen: list[str] = []

    def build(existing: str) -> str:
        seen.append(existing)
        return "- second\n"

    etag = store.append(ALICE, "memory/2026-11-30.md", build)
    assert seen == ["- first\n"]
    got = store.get(ALICE, "memory/2026-11-30.md")
    assert got is not None and (got.content, got.etag) == ("- first\n- second\n", etag)
    assert len(store.list_versions(ALICE, "memory/2026-11-30.md")) == 2


@pytest.mark.parametrize("nothing", [None, ""])
def test_append_of_nothing_returns_none_and_writes_nothing(
    store: WorkspaceStore, nothing: str | None
) -> None:
    assert store.append(ALICE, "memory/2026-11-30.md", lambda existing: nothing) is None
    assert store.get(ALICE, "memory/2026-11-30.md") is None

    store.put(ALICE, "memory/2026-11-30.md", "- first\n")
    assert store.append(ALICE, "memory/2026-11-30.md", lambda existing: nothing) is None
    assert len(store.list_versions(ALICE, "memory/2026-11-30.md")) == 1


@pytest.mark.parametrize("initial", [None, "- seed\n"], ids=["absent", "present"])
def test_concurrent_appends_all_land(store: WorkspaceStore, initial: str | None) -> None:
    """Every writer reads the same state (a barrier holds them after their first read),
    so all but one lose the first conditional write and must re-read: none is lost."""
    writers = 6
    path = "memory/2026-11-30.md"
    if initial is not None:
        store.put(ALICE, path, initial)
    barrier = threading.Barrier(writers)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        first = [True]

        def build(existing: str) -> str:
            if first[0]:
                first[0] = False
                barrier.wait(timeout=10)
            return f"- line {n}\n"

        try:
            store.append(ALICE, path, build)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)

    assert errors == []
    got = store.get(ALICE, path)
    assert got is not None
    lines = got.content.splitlines(keepends=True)
    expected = [f"- line {n}\n" for n in range(writers)]
    assert sorted(line for line in lines if line != initial) == expected
    assert len(lines) == writers + (initial is not None)
    if initial is not None:
        assert lines[0] == initial


# -- path validation -----------------------------------------------------------------------

BAD_PATHS = ["../x", "/x", "a/../b", "a//b", "./a", "a\\b", ""]

OPERATIONS: dict[str, Callable[[WorkspaceStore, str], object]] = {
    "get": lambda s, p: s.get(ALICE, p),
    "get_from": lambda s, p: s.get_from(ALICE, p, 1),
    "get_many": lambda s, p: s.get_many(ALICE, ["ok.md", p]),
    "put": lambda s, p: s.put(ALICE, p, "x"),
    "put_create_only": lambda s, p: s.put(ALICE, p, "x", create_only=True),
    "append": lambda s, p: s.append(ALICE, p, lambda existing: "x"),
    "delete": lambda s, p: s.delete(ALICE, p),
    "list_versions": lambda s, p: s.list_versions(ALICE, p),
    "get_version": lambda s, p: s.get_version(ALICE, p, "v1"),
}


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_a_path_outside_the_workspace_is_an_invalid_request(
    store: WorkspaceStore, operation: str
) -> None:
    store.put(ALICE, "ok.md", "x")
    store.put(AL, "x", "al's")
    for path in BAD_PATHS:
        with pytest.raises(InvalidRequestError) as raised:
            OPERATIONS[operation](store, path)
        assert raised.type is InvalidRequestError, path
    assert paths(store, ALICE) == ["ok.md"]  # nothing was written or deleted
    assert paths(store, AL) == ["x"]


@pytest.mark.parametrize("prefix", ["../al", "/x", "a/../b"])
def test_a_list_prefix_outside_the_workspace_is_an_invalid_request(
    store: WorkspaceStore, prefix: str
) -> None:
    store.put(AL, "MEMORY.md", "al's")
    with pytest.raises(InvalidRequestError):
        store.list(ALICE, prefix)


def test_a_shared_scopes_memory_is_its_own_and_no_users_whatever_their_id(
    store: WorkspaceStore,
) -> None:
    apollo = User.for_scope("project:apollo")
    namesake = User.from_id("project:apollo")  # a user whose id is the scope's text
    store.put(apollo, "MEMORY.md", "the project's")
    store.append(apollo, "memory/2026-11-30.md", lambda _: "- [user] refunds need two\n")
    store.put(namesake, "MEMORY.md", "the user's")

    assert paths(store, apollo) == ["MEMORY.md", "memory/2026-11-30.md"]
    assert paths(store, namesake) == ["MEMORY.md"]
    assert store.get(apollo, "MEMORY.md").content == "the project's"  # type: ignore[union-attr]
    assert store.get(namesake, "MEMORY.md").content == "the user's"  # type: ignore[union-attr]
    assert store.list_users() == [namesake.key]  # a scope is no user
