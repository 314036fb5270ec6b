"""The workspace keys (agent_harness.paths) and the state table's keys (agent_harness.keys)."""

from __future__ import annotations

import pytest

from agent_harness import keys, paths
from agent_harness.ids import User


def test_turn_paths_sort_in_turn_order() -> None:
    turn_paths = [paths.turn_path("s", n) for n in (1, 2, 10, 100)]
    assert sorted(turn_paths) == turn_paths
    assert turn_paths[0].startswith(paths.turns_prefix("s") + "/")


def test_no_users_root_is_a_prefix_of_anothers() -> None:
    al, alice = User.from_id("al"), User.from_id("alice")
    assert not paths.user_root(alice.key).startswith(paths.user_root(al.key))


@pytest.mark.parametrize(
    ("path", "day"),
    [
        ("memory/2026-11-30.md", "2026-11-30"),
        ("memory/archive/2026-11-30.md", None),  # archived: not an active ledger
        ("MEMORY.md", None),
        ("memory/2026-11-30.md.bak", None),
    ],
)
def test_only_active_ledgers_have_a_day(path: str, day: str | None) -> None:
    assert paths.ledger_day(path) == day


def test_any_ledger_path_gives_its_date_for_search() -> None:
    assert paths.ledger_date(paths.archive_path("2023-05-08")) == (2023, 5, 8)
    assert paths.ledger_date(paths.ledger_path("2026-11-30")) == (2026, 11, 30)
    assert paths.ledger_date(paths.MEMORY_FILE) is None


def test_a_message_lands_in_its_months_segment() -> None:
    from datetime import datetime

    assert paths.segment_path(datetime(2026, 11, 30, 23, 59)) == "index/threads/2026-11.jsonl"


def test_session_and_user_items_share_the_users_partition() -> None:
    user = User.from_id("auth0|42")
    assert keys.user_key_of(keys.user_pk(user.key)) == user.key
    assert keys.session_id_of(keys.session_sk("s1")) == "s1"
    assert keys.session_sk("s1") != keys.USER_SK


def test_a_user_always_lands_in_the_same_shard_of_the_due_index() -> None:
    shards = {keys.due_shard(f"user-{n}", 4) for n in range(200)}
    assert shards == {f"due#{n}" for n in range(4)}  # spread over every shard
    assert keys.due_shard("alice", 4) == keys.due_shard("alice", 4)
    assert keys.due_shard("alice", 4, "flush").startswith("flush#")


@pytest.mark.parametrize(
    ("path", "snapshot", "folder"),
    [
        ("memory/2026-11-30.md", "index/ranked/memory-2026-11.json", "memory/"),
        (
            "memory/archive/2025-01-03.md",
            "index/ranked/memory-archive-2025-01.json",
            "memory/archive/",
        ),
        ("index/threads/2026-11.jsonl", "index/ranked/threads-2026-11.json", "index/threads/"),
        ("MEMORY.md", None, None),
        ("memory/notes.md", None, None),
        ("sessions/s/turns/00000001.json", None, None),
    ],
)
def test_each_searchable_file_has_one_ranked_snapshot_listed_from_its_folder(
    path: str, snapshot: str | None, folder: str | None
) -> None:
    assert paths.snapshot_path(path) == snapshot
    if snapshot is not None:
        assert paths.snapshot_sources(snapshot) == folder
        assert path.startswith(folder or "")
        assert "/" not in path[len(folder or "") :]  # a direct child: a LIST without subfolders


def test_a_path_that_is_not_a_snapshot_has_no_sources() -> None:
    assert paths.snapshot_sources("index/ranked/other-2026-11.json") is None
    assert paths.snapshot_sources("memory/2026-11-30.md") is None


def test_every_valid_session_id_names_valid_workspace_paths() -> None:
    from agent_harness.ids import validate_relative_path, validate_session_id

    for session in ("chat:42", "a.b_c-d:e", "A" * 128, "x:" * 64):
        validate_session_id(session)
        for path in (
            paths.turn_path(session, 99_999_999),
            paths.context_path(session),
            paths.turns_prefix(session),
            paths.tool_result_path(session, "c" * 64, "f" * 16),
        ):
            assert validate_relative_path(path) == path


def test_the_longest_user_key_and_path_fit_in_an_s3_key() -> None:
    from agent_harness.ids import MAX_PATH_CHARS, MAX_USER_KEY_CHARS, S3_MAX_KEY_BYTES

    longest = User.from_id("|" * 168 + "a")  # each "|" is "%7C" in a key
    assert len(longest.key) == MAX_USER_KEY_CHARS
    key = paths.user_root(longest.key) + "m" * MAX_PATH_CHARS
    assert len(key.encode()) == S3_MAX_KEY_BYTES
    # what a turn writes is far inside the path cap (eviction cuts call ids to 64)
    assert len(paths.tool_result_path("A" * 128, "c" * 64, "f" * 16)) < MAX_PATH_CHARS
