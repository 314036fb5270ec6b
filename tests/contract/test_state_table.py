"""The ``StateTable`` contract: ``MemoryTable`` (the fake) and ``DynamoStateTable`` on a
moto table (with its sparse ``due-index`` GSI) must agree on leases, counters, cursors,
the flush gate, due marks, the consolidation watermark, usage counters and forgetting a
user.

moto differs from DynamoDB in one way these tests rely on: its GSI is read-after-write
consistent, while a DynamoDB GSI is eventually consistent (a mark may take a moment to
show in ``query_due`` / ``query_flush_due``). The contract asserts immediate visibility
because both backends have it; the schedule tick tolerates the lag on AWS.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agent_harness.aws.state import DynamoStateTable
from agent_harness.errors import ConflictError, SessionBusyError, SessionNotFoundError
from agent_harness.ids import User
from agent_harness.keys import due_shard, shard_name
from agent_harness.ports import (
    ROLES,
    AdmissionCheck,
    Budget,
    DayUsage,
    DueUser,
    FlushDue,
    GateClaim,
    ImportCheck,
    LeaseAdmission,
    Member,
    PauseMark,
    Place,
    SessionState,
    StateTable,
    UsageDelta,
    UserState,
)
from tests.fakes import MemoryTable

ALICE = User.from_id("alice")
AL = User.from_id("al")  # a user whose key is a prefix of alice's
BOB = User.from_id("bob@example.com")  # id and key differ: "bob%40example.com"

T0 = 1_000_000  # epoch ms
LEASE = 60_000
NOW = "2026-11-30T09:00:00Z"
LATER = "2026-11-30T09:05:00Z"
DAY = "2026-11-30"
#: a turn's spend: 100 + 20 agent tokens in two calls, 30 + 5 of one compaction call
SPEND = UsageDelta(
    DAY,
    tokens={"agent": (100, 20), "compaction": (30, 5)},
    model_calls={"agent": 2, "compaction": 1},
    turns=1,
)


@pytest.fixture
def table(backend: str, request: pytest.FixtureRequest) -> StateTable:
    if backend == "fake":
        return MemoryTable()
    stack = request.getfixturevalue("stack")
    return DynamoStateTable(stack.clients["dynamodb"], stack.table, sleep=lambda s: None)


def new_session(table: StateTable, user: User = ALICE, session: str = "s1", turn: int = 0) -> None:
    """A session that exists with ``turn`` committed and its lease free."""
    table.acquire_session_lease(user, session, "setup", T0, LEASE)
    table.commit_turn(user, session, "setup", turn, NOW)


# -- the session lease ---------------------------------------------------------------------


def test_a_first_lease_creates_the_session_at_turn_zero(table: StateTable) -> None:
    assert table.get_session(ALICE, "s1") is None
    assert table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE) == SessionState()
    assert table.get_session(ALICE, "s1") == SessionState()


def test_a_held_lease_is_busy_with_the_remaining_seconds_as_retry_after(
    table: StateTable,
) -> None:
    table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE)
    for now, retry_after in ((T0 + 10_000, 50), (T0 + 59_500, 1), (T0 + 1, 60)):
        with pytest.raises(SessionBusyError) as busy:
            table.acquire_session_lease(ALICE, "s1", "b", now, LEASE)
        assert busy.value.retry_after == retry_after
    with pytest.raises(SessionBusyError):  # the holder itself cannot take it twice
        table.acquire_session_lease(ALICE, "s1", "a", T0 + 1, LEASE)


def test_a_lease_is_held_until_past_its_expiry_then_another_owner_takes_it(
    table: StateTable,
) -> None:
    table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE)
    with pytest.raises(SessionBusyError) as busy:  # expires_ms itself is still held
        table.acquire_session_lease(ALICE, "s1", "b", T0 + LEASE, LEASE)
    assert busy.value.retry_after == 1
    table.acquire_session_lease(ALICE, "s1", "b", T0 + LEASE + 1, LEASE)
    with pytest.raises(ConflictError):  # a lost the lease
        table.commit_turn(ALICE, "s1", "a", 1, NOW)
    table.commit_turn(ALICE, "s1", "b", 1, NOW)
    state = table.get_session(ALICE, "s1")
    assert state is not None and state.turn == 1


def test_a_released_lease_is_free_at_once(table: StateTable) -> None:
    table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE)
    table.release_session_lease(ALICE, "s1", "a")
    table.release_session_lease(ALICE, "s1", "a")  # twice is harmless
    table.acquire_session_lease(ALICE, "s1", "b", T0 + 1, LEASE)


def test_releasing_someone_elses_lease_changes_nothing(table: StateTable) -> None:
    table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE)
    table.release_session_lease(ALICE, "s1", "b")
    with pytest.raises(SessionBusyError):
        table.acquire_session_lease(ALICE, "s1", "c", T0 + 1, LEASE)


def test_releasing_the_lease_of_a_missing_session_creates_nothing(table: StateTable) -> None:
    table.release_session_lease(ALICE, "s1", "a")
    assert table.get_session(ALICE, "s1") is None


def test_must_exist_on_a_session_never_written_is_not_found_and_creates_nothing(
    table: StateTable,
) -> None:
    with pytest.raises(SessionNotFoundError):
        table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE, must_exist=True)
    assert table.get_session(ALICE, "s1") is None
    table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE)  # and nothing is held


def test_must_exist_on_an_existing_session_takes_the_lease(table: StateTable) -> None:
    new_session(table, turn=3)
    state = table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE, must_exist=True)
    assert state.turn == 3
    with pytest.raises(SessionBusyError):  # busy, not missing
        table.acquire_session_lease(ALICE, "s1", "b", T0 + 1, LEASE, must_exist=True)


def test_sessions_and_users_are_leased_independently(table: StateTable) -> None:
    table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE)
    table.acquire_session_lease(ALICE, "s2", "a", T0, LEASE)
    table.acquire_session_lease(AL, "s1", "a", T0, LEASE)
    table.acquire_session_lease(BOB, "s1", "a", T0, LEASE)
    table.acquire_consolidation_lease(ALICE, "a", T0, LEASE)


# -- turns and pauses ----------------------------------------------------------------------


def test_commit_turn_records_the_turn_and_releases_the_lease(table: StateTable) -> None:
    table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE)
    table.commit_turn(ALICE, "s1", "a", 1, NOW)
    state = table.get_session(ALICE, "s1")
    assert state is not None and state.turn == 1
    assert table.acquire_session_lease(ALICE, "s1", "b", T0 + 1, LEASE).turn == 1


def test_commit_turn_by_a_non_holder_is_a_conflict_and_changes_nothing(
    table: StateTable,
) -> None:
    new_session(table, turn=1)
    table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE)
    with pytest.raises(ConflictError) as raised:
        table.commit_turn(ALICE, "s1", "b", 2, NOW)
    assert raised.type is ConflictError  # not SessionBusyError: nothing to retry
    state = table.get_session(ALICE, "s1")
    assert state is not None and state.turn == 1
    with pytest.raises(SessionBusyError):  # a still holds it
        table.acquire_session_lease(ALICE, "s1", "c", T0 + 1, LEASE)


def test_commit_turn_after_releasing_is_a_conflict(table: StateTable) -> None:
    table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE)
    table.commit_turn(ALICE, "s1", "a", 1, NOW)
    with pytest.raises(ConflictError):
        table.commit_turn(ALICE, "s1", "a", 2, NOW)
    state = table.get_session(ALICE, "s1")
    assert state is not None and state.turn == 1


def test_pause_turn_records_the_mark_and_turn_and_releases_the_lease(
    table: StateTable,
) -> None:
    new_session(table, turn=2)
    table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE)
    mark = PauseMark("p-1", turn=3, paused_at_ms=T0 + 500)
    table.pause_turn(ALICE, "s1", "a", mark, 2)

    state = table.get_session(ALICE, "s1")
    assert state is not None and (state.pause, state.turn) == (mark, 2)
    resumed = table.acquire_session_lease(ALICE, "s1", "b", T0 + 1, LEASE, must_exist=True)
    assert resumed.pause == mark


def test_commit_turn_clears_the_pause_mark(table: StateTable) -> None:
    table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE)
    table.pause_turn(ALICE, "s1", "a", PauseMark("p-1", 1, T0), 0)
    table.acquire_session_lease(ALICE, "s1", "b", T0 + 1, LEASE)
    table.commit_turn(ALICE, "s1", "b", 1, NOW)
    state = table.get_session(ALICE, "s1")
    assert state is not None and (state.pause, state.turn) == (None, 1)


def test_pause_turn_by_a_non_holder_is_a_conflict_and_changes_nothing(
    table: StateTable,
) -> None:
    table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE)
    with pytest.raises(ConflictError) as raised:
        table.pause_turn(ALICE, "s1", "b", PauseMark("p-1", 1, T0), 1)
    assert raised.type is ConflictError
    assert table.get_session(ALICE, "s1") == SessionState()
    with pytest.raises(SessionBusyError):
        table.acquire_session_lease(ALICE, "s1", "c", T0 + 1, LEASE)


# -- places: where a stateless client's conversation reached -------------------------------


def test_a_commit_puts_its_places_with_the_turn(table: StateTable) -> None:
    table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE)
    chat = Place("chat:abc", "s1", 1, expires_at=2_000_000_000)
    stored = Place("resp:resp_1", "s1", 1, 2_000_000_000, body='{"id": "resp_1", "é": 1}')
    table.commit_turn(ALICE, "s1", "a", 1, NOW, usage=SPEND, places=[chat, stored])

    assert table.get_place(ALICE, "chat:abc") == chat
    assert table.get_place(ALICE, "resp:resp_1") == stored
    assert table.get_place(BOB, "chat:abc") is None  # another user's partition
    assert table.get_session(ALICE, "s1").turn == 1


def test_a_pause_puts_its_places_and_a_lost_lease_puts_none(table: StateTable) -> None:
    table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE)
    place = Place("chat:p", "s1", 0, expires_at=2_000_000_000)
    with pytest.raises(ConflictError):
        table.pause_turn(ALICE, "s1", "b", PauseMark("p-1", 1, T0), 0, places=[place])
    assert table.get_place(ALICE, "chat:p") is None
    with pytest.raises(ConflictError):
        table.commit_turn(ALICE, "s1", "b", 1, NOW, places=[place])
    assert table.get_place(ALICE, "chat:p") is None

    table.pause_turn(ALICE, "s1", "a", PauseMark("p-1", 1, T0), 0, places=[place])
    assert table.get_place(ALICE, "chat:p") == place


def test_a_deleted_place_is_gone_and_deleting_it_again_says_so(table: StateTable) -> None:
    table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE)
    table.commit_turn(ALICE, "s1", "a", 1, NOW, places=[Place("resp:r", "s1", 1, 2_000_000_000)])

    assert table.delete_place(BOB, "resp:r") is False  # another user's: untouched
    assert table.delete_place(ALICE, "resp:r") is True
    assert table.get_place(ALICE, "resp:r") is None
    assert table.delete_place(ALICE, "resp:r") is False


def test_an_expiry_mark_is_found_in_its_shard_once_due_and_cleared(table: StateTable) -> None:
    table.mark_expiry_due(ALICE, "2026-12-06T00:00:00Z", 4)
    shard = due_shard(ALICE.key, 4, "expire")

    assert table.query_expiry_due(shard, "2026-12-05T23:59:59Z") == []
    (due,) = table.query_expiry_due(shard, "2026-12-06T00:00:00Z")
    assert (due.user_key, due.due_at) == (ALICE.key, "2026-12-06T00:00:00Z")
    assert table.query_due(due_shard(ALICE.key, 4)) == []  # not a consolidation mark
    table.mark_expiry_due(ALICE, "2026-12-09T00:00:00Z", 4)  # the next one replaces it
    assert table.query_expiry_due(shard, "2026-12-07T00:00:00Z") == []
    table.clear_expiry_due(ALICE)
    assert table.query_expiry_due(shard, "2027-01-01T00:00:00Z") == []
    table.mark_expiry_due(ALICE, "2026-12-09T00:00:00Z", 4)
    assert table.purge_user(ALICE) == 1  # forgetting the user takes it


def test_forgetting_a_user_deletes_their_places(table: StateTable) -> None:
    table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE)
    table.commit_turn(ALICE, "s1", "a", 1, NOW, places=[Place("chat:x", "s1", 1, 2_000_000_000)])

    assert table.purge_user(ALICE) == 2  # the session and the place
    assert table.get_place(ALICE, "chat:x") is None


# -- flush and index cursors ---------------------------------------------------------------


@pytest.mark.parametrize("cursor", ["flush_cursor", "index_cursor"])
def test_a_cursor_only_moves_forward(table: StateTable, cursor: str) -> None:
    new_session(table, turn=9)
    advance: Callable[[int], bool] = (
        (lambda t: table.advance_flush_cursor(ALICE, "s1", t, NOW))
        if cursor == "flush_cursor"
        else (lambda t: table.advance_index_cursor(ALICE, "s1", t))
    )
    assert [advance(t) for t in (3, 2, 3, 5)] == [True, False, False, True]
    state = table.get_session(ALICE, "s1")
    assert state is not None and getattr(state, cursor) == 5


def test_the_flush_and_index_cursors_are_independent(table: StateTable) -> None:
    new_session(table, turn=9)
    assert table.advance_flush_cursor(ALICE, "s1", 4, NOW)
    assert table.advance_index_cursor(ALICE, "s1", 2)
    assert table.advance_index_cursor(ALICE, "s1", 3)  # below the flush cursor: still moves
    state = table.get_session(ALICE, "s1")
    assert state is not None and (state.turn, state.flush_cursor, state.index_cursor) == (9, 4, 3)


def test_advancing_a_cursor_keeps_the_lease(table: StateTable) -> None:
    table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE)
    table.advance_flush_cursor(ALICE, "s1", 1, NOW)
    with pytest.raises(SessionBusyError):
        table.acquire_session_lease(ALICE, "s1", "b", T0 + 1, LEASE)


@pytest.mark.parametrize("cursor", ["flush_cursor", "index_cursor"])
def test_advancing_a_fresh_cursor_to_zero_reports_a_move(table: StateTable, cursor: str) -> None:
    new_session(table)
    if cursor == "flush_cursor":
        assert table.advance_flush_cursor(ALICE, "s1", 0, NOW) is True
    else:
        assert table.advance_index_cursor(ALICE, "s1", 0) is True


@pytest.mark.parametrize("cursor", ["flush_cursor", "index_cursor"])
def test_advancing_a_cursor_of_a_missing_session_creates_it(table: StateTable, cursor: str) -> None:
    if cursor == "flush_cursor":
        assert table.advance_flush_cursor(ALICE, "s1", 2, NOW) is True
    else:
        assert table.advance_index_cursor(ALICE, "s1", 2) is True
    state = table.get_session(ALICE, "s1")
    assert state is not None and getattr(state, cursor) == 2 and state.turn == 0


# -- operations on a missing session or user -----------------------------------------------

MISSING_ITEM_OPERATIONS: dict[str, tuple[Callable[[StateTable], Any], Any]] = {
    # operation -> (call, what it returns; an exception class: what it raises)
    "commit_turn": (lambda t: t.commit_turn(ALICE, "s1", "a", 1, NOW), ConflictError),
    "pause_turn": (
        lambda t: t.pause_turn(ALICE, "s1", "a", PauseMark("p", 1, T0), 1),
        ConflictError,
    ),
    "claim_flush_gate": (
        lambda t: t.claim_flush_gate(ALICE, "s1", T0, 5_000),
        GateClaim(False, T0, held_ms=None),
    ),
    "release_flush_gate": (
        lambda t: t.release_flush_gate(ALICE, "s1", GateClaim(True, T0)),
        None,
    ),
    "complete_consolidation": (
        lambda t: t.complete_consolidation(ALICE, "a", {}, 0, NOW),
        ConflictError,
    ),
    "commit_turn with usage": (  # the transaction adds no usage either
        lambda t: t.commit_turn(ALICE, "s1", "a", 1, NOW, usage=SPEND),
        ConflictError,
    ),
}


@pytest.mark.parametrize("operation", sorted(MISSING_ITEM_OPERATIONS))
def test_operations_on_a_missing_item_fail_cleanly_and_create_nothing(
    table: StateTable, operation: str
) -> None:
    call, outcome = MISSING_ITEM_OPERATIONS[operation]
    if isinstance(outcome, type) and issubclass(outcome, Exception):
        with pytest.raises(outcome) as raised:
            call(table)
        assert raised.type is outcome
    else:
        assert call(table) == outcome
    assert table.get_session(ALICE, "s1") is None
    assert table.get_user(ALICE) == UserState()
    assert table.purge_user(ALICE) == 0


# -- the flush throttle gate ---------------------------------------------------------------


def test_the_first_gate_claim_wins(table: StateTable) -> None:
    new_session(table)
    assert table.claim_flush_gate(ALICE, "s1", T0, 5_000) == GateClaim(True, T0, previous_ms=None)
    state = table.get_session(ALICE, "s1")
    assert state is not None and state.flush_gate_ms == T0


def test_a_gate_claim_within_the_gap_loses_and_reports_the_held_claim(
    table: StateTable,
) -> None:
    new_session(table)
    table.claim_flush_gate(ALICE, "s1", T0, 5_000)
    lost = table.claim_flush_gate(ALICE, "s1", T0 + 4_999, 5_000)
    assert lost == GateClaim(False, T0 + 4_999, held_ms=T0)
    state = table.get_session(ALICE, "s1")
    assert state is not None and state.flush_gate_ms == T0


def test_a_gate_claim_a_full_gap_later_wins_and_reports_the_previous_claim(
    table: StateTable,
) -> None:
    new_session(table)
    table.claim_flush_gate(ALICE, "s1", T0, 5_000)
    won = table.claim_flush_gate(ALICE, "s1", T0 + 5_000, 5_000)  # exactly the gap
    assert won == GateClaim(True, T0 + 5_000, previous_ms=T0)
    state = table.get_session(ALICE, "s1")
    assert state is not None and state.flush_gate_ms == T0 + 5_000


def test_releasing_a_claim_restores_the_previous_one(table: StateTable) -> None:
    new_session(table)
    table.claim_flush_gate(ALICE, "s1", T0, 5_000)
    second = table.claim_flush_gate(ALICE, "s1", T0 + 10_000, 5_000)
    table.release_flush_gate(ALICE, "s1", second)
    state = table.get_session(ALICE, "s1")
    assert state is not None and state.flush_gate_ms == T0
    # the retry is throttled only by the claim before ours
    assert table.claim_flush_gate(ALICE, "s1", T0 + 10_000, 5_000).claimed


def test_releasing_a_first_claim_opens_the_gate(table: StateTable) -> None:
    new_session(table)
    first = table.claim_flush_gate(ALICE, "s1", T0, 5_000)
    table.release_flush_gate(ALICE, "s1", first)
    state = table.get_session(ALICE, "s1")
    assert state is not None and state.flush_gate_ms is None
    assert table.claim_flush_gate(ALICE, "s1", T0 + 1, 5_000).claimed


def test_releasing_a_claim_no_longer_in_force_changes_nothing(table: StateTable) -> None:
    new_session(table)
    first = table.claim_flush_gate(ALICE, "s1", T0, 5_000)
    table.claim_flush_gate(ALICE, "s1", T0 + 10_000, 5_000)
    table.release_flush_gate(ALICE, "s1", first)  # superseded
    lost = table.claim_flush_gate(ALICE, "s1", T0 + 10_001, 5_000)
    table.release_flush_gate(ALICE, "s1", lost)  # a lost claim holds nothing
    state = table.get_session(ALICE, "s1")
    assert state is not None and state.flush_gate_ms == T0 + 10_000


# -- flush due marks (the tail sweep) ------------------------------------------------------


def test_a_flush_due_mark_is_found_in_its_shard_once_due(table: StateTable) -> None:
    new_session(table, BOB, "s1", turn=4)
    table.mark_flush_due(BOB, "s1", LATER, shards=4)
    shard = due_shard(BOB.key, 4, "flush")

    assert table.query_flush_due(shard, NOW) == []  # not yet due
    due = [FlushDue(user_id=BOB.id, session_id="s1", turn=4, due_at=LATER)]
    assert table.query_flush_due(shard, LATER) == due  # due_at <= now
    assert table.query_flush_due(shard, "2026-12-01T00:00:00Z") == due
    others = [shard_name("flush", k) for k in range(4) if shard_name("flush", k) != shard]
    assert all(table.query_flush_due(s, LATER) == [] for s in others)


def test_a_flush_due_query_returns_every_due_session_of_the_shard(table: StateTable) -> None:
    for user, session in ((ALICE, "s1"), (ALICE, "s2"), (AL, "s1"), (BOB, "s1")):
        new_session(table, user, session, turn=2)
        table.mark_flush_due(user, session, NOW, shards=1)
    table.mark_flush_due(ALICE, "s2", LATER, shards=1)  # marking again moves due_at

    found = table.query_flush_due(shard_name("flush", 0), NOW)
    assert sorted((d.user_id, d.session_id, d.due_at) for d in found) == [
        (AL.id, "s1", NOW),
        (ALICE.id, "s1", NOW),
        (BOB.id, "s1", NOW),
    ]
    later = table.query_flush_due(shard_name("flush", 0), LATER)
    assert (ALICE.id, "s2", LATER) in {(d.user_id, d.session_id, d.due_at) for d in later}


def test_marking_a_session_never_written_flush_due_does_nothing(table: StateTable) -> None:
    table.mark_flush_due(ALICE, "s1", NOW, shards=1)
    assert table.get_session(ALICE, "s1") is None
    assert table.query_flush_due(shard_name("flush", 0), LATER) == []


def test_clearing_a_flush_due_mark_removes_it(table: StateTable) -> None:
    new_session(table)
    table.mark_flush_due(ALICE, "s1", NOW, shards=1)
    table.clear_flush_due(ALICE, "s1")
    table.clear_flush_due(ALICE, "s1")  # twice is harmless
    assert table.query_flush_due(shard_name("flush", 0), LATER) == []
    table.clear_flush_due(ALICE, "s9")  # a missing session: nothing is created
    assert table.get_session(ALICE, "s9") is None


def test_advancing_the_flush_cursor_with_clear_due_removes_the_mark(table: StateTable) -> None:
    new_session(table, turn=3)
    table.mark_flush_due(ALICE, "s1", NOW, shards=1)
    assert table.advance_flush_cursor(ALICE, "s1", 3, NOW, clear_due=True)
    assert table.query_flush_due(shard_name("flush", 0), LATER) == []


def test_advancing_the_flush_cursor_keeps_the_mark_without_clear_due_or_a_move(
    table: StateTable,
) -> None:
    new_session(table, turn=3)
    table.mark_flush_due(ALICE, "s1", NOW, shards=1)
    assert table.advance_flush_cursor(ALICE, "s1", 2, NOW)  # moved, clear_due not asked
    assert not table.advance_flush_cursor(ALICE, "s1", 2, NOW, clear_due=True)  # no move
    assert [d.session_id for d in table.query_flush_due(shard_name("flush", 0), LATER)] == ["s1"]


def test_flush_and_consolidation_marks_do_not_mix(table: StateTable) -> None:
    new_session(table)
    table.mark_flush_due(ALICE, "s1", NOW, shards=1)
    table.mark_consolidation_due(BOB, NOW, shards=1)
    assert [d.user_key for d in table.query_due(shard_name("due", 0))] == [BOB.key]
    assert [d.user_id for d in table.query_flush_due(shard_name("flush", 0), LATER)] == [ALICE.id]


# -- consolidation: due marks --------------------------------------------------------------


def test_marking_a_user_due_puts_it_in_its_shard(table: StateTable) -> None:
    assert table.get_user(BOB) == UserState()
    table.mark_consolidation_due(BOB, NOW, shards=4)
    shard = due_shard(BOB.key, 4)

    assert table.query_due(shard) == [DueUser(BOB.key, NOW, None)]  # the key, not the id
    others = [shard_name("due", k) for k in range(4) if shard_name("due", k) != shard]
    assert all(table.query_due(s) == [] for s in others)
    state = table.get_user(BOB)
    assert (state.is_due, state.due_seq, state.consumed) == (True, 1, {})


def test_marking_a_due_user_again_counts_and_keeps_the_first_due_at(table: StateTable) -> None:
    table.mark_consolidation_due(ALICE, NOW, shards=1)
    table.mark_consolidation_due(ALICE, LATER, shards=1)
    assert table.get_user(ALICE).due_seq == 2
    assert table.query_due(shard_name("due", 0)) == [DueUser(ALICE.key, NOW, None)]


def test_query_due_returns_every_due_user_of_the_shard(table: StateTable) -> None:
    for user in (ALICE, AL, BOB):
        table.mark_consolidation_due(user, NOW, shards=1)
    found = table.query_due(shard_name("due", 0))
    assert sorted(d.user_key for d in found) == sorted([ALICE.key, AL.key, BOB.key])


# -- consolidation: the lease, the watermark ------------------------------------------------


def test_a_consolidation_lease_returns_the_users_state(table: StateTable) -> None:
    assert table.acquire_consolidation_lease(ALICE, "run-1", T0, LEASE) == UserState()
    table.release_consolidation_lease(ALICE, "run-1")
    table.mark_consolidation_due(ALICE, NOW, shards=1)
    state = table.acquire_consolidation_lease(ALICE, "run-2", T0, LEASE)
    assert (state.is_due, state.due_seq) == (True, 1)


def test_a_held_consolidation_lease_is_a_conflict_until_past_expiry(table: StateTable) -> None:
    table.acquire_consolidation_lease(ALICE, "run-1", T0, LEASE)
    for now in (T0 + 1, T0 + LEASE):
        with pytest.raises(ConflictError) as raised:
            table.acquire_consolidation_lease(ALICE, "run-2", now, LEASE)
        assert raised.type is ConflictError
    table.acquire_consolidation_lease(ALICE, "run-2", T0 + LEASE + 1, LEASE)
    with pytest.raises(ConflictError):  # run-1 lost it
        table.complete_consolidation(ALICE, "run-1", {"2026-11-30": 1}, 0, NOW)


def test_releasing_a_consolidation_lease_frees_it_for_its_holder_only(table: StateTable) -> None:
    table.acquire_consolidation_lease(ALICE, "run-1", T0, LEASE)
    table.release_consolidation_lease(ALICE, "run-2")  # not the holder
    with pytest.raises(ConflictError):
        table.acquire_consolidation_lease(ALICE, "run-3", T0 + 1, LEASE)
    table.release_consolidation_lease(ALICE, "run-1")
    table.release_consolidation_lease(ALICE, "run-1")  # twice is harmless
    table.acquire_consolidation_lease(ALICE, "run-3", T0 + 1, LEASE)
    table.release_consolidation_lease(BOB, "run-1")  # a user never seen: nothing happens
    assert table.get_user(BOB) == UserState()


def test_completing_a_consolidation_advances_the_watermark_and_clears_the_mark(
    table: StateTable,
) -> None:
    table.mark_consolidation_due(ALICE, NOW, shards=1)
    state = table.acquire_consolidation_lease(ALICE, "run-1", T0, LEASE)

    consumed = {"2026-11-29": 300, "2026-11-30": 120}
    assert table.complete_consolidation(ALICE, "run-1", consumed, state.due_seq, LATER)

    after = table.get_user(ALICE)
    assert after == UserState(
        consumed=consumed, due_seq=1, is_due=False, last_consolidated_at=LATER
    )
    assert table.query_due(shard_name("due", 0)) == []
    table.acquire_consolidation_lease(ALICE, "run-2", T0 + 1, LEASE)  # released


def test_a_failed_run_is_kept_with_its_backoff_until_a_run_finishes(table: StateTable) -> None:
    retry = "2026-11-30T09:20:00Z"
    table.mark_consolidation_due(ALICE, NOW, shards=1)
    state = table.acquire_consolidation_lease(ALICE, "run-1", T0, LEASE)

    table.fail_consolidation(ALICE, "run-1", "the answer echoed the prompt", LATER, retry, 1)

    after = table.get_user(ALICE)
    assert (after.failures, after.failed_at, after.retry_at) == (1, LATER, retry)
    assert after.last_error == "the answer echoed the prompt" and after.is_due
    assert table.query_due(shard_name("due", 0)) == [DueUser(ALICE.key, retry, None)]
    state = table.acquire_consolidation_lease(ALICE, "run-2", T0 + 1, LEASE)  # released
    table.fail_consolidation(ALICE, "run-2", "again", LATER, retry, 1)
    assert table.get_user(ALICE).failures == 2
    table.fail_consolidation(ALICE, "run-2", "a lost lease records nothing", LATER, retry, 1)
    assert table.get_user(ALICE).last_error == "again"

    state = table.acquire_consolidation_lease(ALICE, "run-3", T0 + 2, LEASE)
    assert table.complete_consolidation(ALICE, "run-3", {"d": 1}, state.due_seq, LATER)
    done = table.get_user(ALICE)
    assert (done.failures, done.failed_at, done.last_error, done.retry_at) == (0, None, None, None)
    assert done.view()["last_failure"] is None and not done.is_due


def test_a_mark_made_during_the_run_keeps_the_user_due(table: StateTable) -> None:
    table.mark_consolidation_due(ALICE, NOW, shards=1)
    state = table.acquire_consolidation_lease(ALICE, "run-1", T0, LEASE)
    table.mark_consolidation_due(ALICE, LATER, shards=1)  # a flush while the run works

    assert not table.complete_consolidation(ALICE, "run-1", {"d": 120}, state.due_seq, LATER)

    after = table.get_user(ALICE)
    assert after == UserState(
        consumed={"d": 120}, due_seq=2, is_due=True, last_consolidated_at=LATER
    )
    # still due, since its first mark, with the run's completion time
    assert table.query_due(shard_name("due", 0)) == [DueUser(ALICE.key, NOW, LATER)]
    # the lease was released all the same, and the next run clears the mark
    again = table.acquire_consolidation_lease(ALICE, "run-2", T0 + 1, LEASE)
    assert table.complete_consolidation(ALICE, "run-2", {"d": 200}, again.due_seq, LATER)
    assert table.query_due(shard_name("due", 0)) == []


def test_a_user_marked_again_after_completion_gets_a_new_due_at(table: StateTable) -> None:
    table.mark_consolidation_due(ALICE, NOW, shards=1)
    state = table.acquire_consolidation_lease(ALICE, "run-1", T0, LEASE)
    table.complete_consolidation(ALICE, "run-1", {}, state.due_seq, NOW)
    table.mark_consolidation_due(ALICE, LATER, shards=1)
    assert table.query_due(shard_name("due", 0)) == [DueUser(ALICE.key, LATER, NOW)]
    assert table.get_user(ALICE).due_seq == 2


def test_the_watermark_is_replaced_not_merged(table: StateTable) -> None:
    table.acquire_consolidation_lease(ALICE, "run-1", T0, LEASE)
    table.complete_consolidation(ALICE, "run-1", {"d1": 10, "d2": 5}, 0, NOW)
    table.acquire_consolidation_lease(ALICE, "run-2", T0, LEASE)
    table.complete_consolidation(ALICE, "run-2", {"d2": 7}, 0, LATER)
    assert table.get_user(ALICE).consumed == {"d2": 7}


def test_completing_without_the_lease_is_a_conflict_and_changes_nothing(
    table: StateTable,
) -> None:
    table.mark_consolidation_due(ALICE, NOW, shards=1)
    table.acquire_consolidation_lease(ALICE, "run-1", T0, LEASE)
    before = table.get_user(ALICE)
    with pytest.raises(ConflictError) as raised:
        table.complete_consolidation(ALICE, "run-2", {"d": 1}, before.due_seq, LATER)
    assert raised.type is ConflictError
    assert table.get_user(ALICE) == before
    assert [d.user_key for d in table.query_due(shard_name("due", 0))] == [ALICE.key]


def test_a_user_never_seen_has_the_empty_state(table: StateTable) -> None:
    assert table.get_user(ALICE) == UserState()
    assert table.query_due(shard_name("due", 0)) == []


# -- consolidation: abandoning a run for a user with nothing --------------------------------


def test_abandoning_removes_a_user_item_only_the_lease_made(table: StateTable) -> None:
    table.acquire_consolidation_lease(ALICE, "run-1", T0, LEASE)
    assert table.abandon_consolidation(ALICE, "run-1")
    assert table.get_user(ALICE) == UserState()
    assert table.purge_user(ALICE) == 0  # no trace is left
    table.acquire_consolidation_lease(ALICE, "run-2", T0 + 1, LEASE)  # and no lease


def test_abandoning_someone_elses_run_does_nothing(table: StateTable) -> None:
    table.acquire_consolidation_lease(ALICE, "run-1", T0, LEASE)
    assert not table.abandon_consolidation(ALICE, "run-2")
    with pytest.raises(ConflictError):
        table.acquire_consolidation_lease(ALICE, "run-3", T0 + 1, LEASE)
    assert not table.abandon_consolidation(BOB, "run-1")  # a user never seen


def test_abandoning_keeps_a_user_with_a_due_mark(table: StateTable) -> None:
    table.mark_consolidation_due(ALICE, NOW, shards=1)
    table.acquire_consolidation_lease(ALICE, "run-1", T0, LEASE)
    assert not table.abandon_consolidation(ALICE, "run-1")
    assert table.get_user(ALICE).due_seq == 1
    with pytest.raises(ConflictError):  # the lease is not released either
        table.acquire_consolidation_lease(ALICE, "run-2", T0 + 1, LEASE)


def test_abandoning_keeps_a_user_with_a_watermark(table: StateTable) -> None:
    table.acquire_consolidation_lease(ALICE, "run-1", T0, LEASE)
    table.complete_consolidation(ALICE, "run-1", {}, 0, NOW)  # an empty watermark, but a run
    table.acquire_consolidation_lease(ALICE, "run-2", T0 + 1, LEASE)
    assert not table.abandon_consolidation(ALICE, "run-2")
    assert table.get_user(ALICE).last_consolidated_at == NOW


# -- usage counters ------------------------------------------------------------------------


def usage(
    day: str = DAY,
    tokens: dict[str, tuple[int, int]] | None = None,
    calls: dict[str, int] | None = None,
    turns: int = 0,
) -> DayUsage:
    """A day's usage as read back: every role present."""
    return DayUsage(
        day,
        dict.fromkeys(ROLES, (0, 0)) | (tokens or {}),
        dict.fromkeys(ROLES, 0) | (calls or {}),
        turns,
    )


def test_usage_adds_up_per_role_on_the_day(table: StateTable) -> None:
    table.add_usage(ALICE, SPEND)
    table.add_usage(ALICE, UsageDelta(DAY, tokens={"memory": (7, 3)}, model_calls={"memory": 1}))
    table.add_usage(ALICE, UsageDelta(DAY, tokens={"agent": (1, 2)}, model_calls={"agent": 1}))

    [day] = table.usage_days(ALICE, DAY, DAY)
    assert day == usage(
        tokens={"agent": (101, 22), "compaction": (30, 5), "memory": (7, 3)},
        calls={"agent": 3, "compaction": 1, "memory": 1},
        turns=1,
    )
    assert day.total_tokens == 168


def test_usage_of_other_days_and_users_is_kept_apart(table: StateTable) -> None:
    table.add_usage(ALICE, SPEND)
    table.add_usage(ALICE, UsageDelta("2026-12-01", tokens={"agent": (1, 1)}))
    table.add_usage(AL, UsageDelta(DAY, turns=4))  # al's key is a prefix of alice's

    assert table.usage_days(ALICE, DAY, DAY)[0].total_tokens == 155
    assert table.usage_days(ALICE, "2026-12-01", "2026-12-01") == [
        usage("2026-12-01", tokens={"agent": (1, 1)})
    ]
    assert table.usage_days(AL, DAY, "2026-12-01") == [usage(turns=4)]
    assert table.usage_days(BOB, DAY, "2026-12-01") == []


@pytest.mark.parametrize(
    "delta",
    [
        UsageDelta(DAY, tokens={"planner": (1, 1)}),  # an unknown role
        UsageDelta(DAY, model_calls={"planner": 1}),
        UsageDelta(DAY, tokens={"planner": (0, 0)}),  # even with nothing to add
        UsageDelta(DAY, tokens={"agent": (-1, 5)}),  # a negative count
        UsageDelta(DAY, model_calls={"agent": -1}),
        UsageDelta(DAY, turns=-1),
        UsageDelta(DAY, tokens={"agent": (1.5, 0)}),  # type: ignore[dict-item]
        UsageDelta(DAY, turns=True),  # a bool is no count
        UsageDelta("2026-11-31", turns=1),  # not a day
        UsageDelta("30.11.2026", turns=1),
    ],
    ids=lambda d: repr(d),
)
def test_a_malformed_delta_is_rejected_and_adds_nothing(
    table: StateTable, delta: UsageDelta
) -> None:
    with pytest.raises(ValueError):
        table.add_usage(ALICE, delta)
    assert table.usage_days(ALICE, "2026-01-01", "2026-12-31") == []
    assert table.purge_user(ALICE) == 0


def test_an_empty_delta_adds_nothing(table: StateTable) -> None:
    for delta in (
        UsageDelta(DAY),
        UsageDelta(DAY, tokens={"agent": (0, 0)}, model_calls=dict.fromkeys(ROLES, 0)),
    ):
        assert delta.empty()
        table.add_usage(ALICE, delta)
    assert table.usage_days(ALICE, DAY, DAY) == []
    assert table.top_users(DAY, 10) == []
    assert table.purge_user(ALICE) == 0


def test_usage_days_returns_the_days_of_the_range_that_have_usage_oldest_first(
    table: StateTable,
) -> None:
    for day in ("2026-12-05", "2026-11-28", "2026-12-01", "2026-11-30"):
        table.add_usage(ALICE, UsageDelta(day, turns=1))

    assert [d.day for d in table.usage_days(ALICE, "2026-11-29", "2026-12-05")] == [
        "2026-11-30",
        "2026-12-01",
        "2026-12-05",
    ]
    assert [d.day for d in table.usage_days(ALICE, "2026-11-28", "2026-11-28")] == ["2026-11-28"]
    assert table.usage_days(ALICE, "2026-12-02", "2026-12-04") == []  # no day in the range
    assert table.usage_days(ALICE, "2026-12-05", "2026-11-28") == []  # an empty range
    with pytest.raises(ValueError):
        table.usage_days(ALICE, "2026-11", "2026-12-05")


def test_top_users_ranks_the_days_users_by_tokens_then_key(table: StateTable) -> None:
    carol = User.from_id("carol")
    table.add_usage(ALICE, UsageDelta(DAY, tokens={"agent": (20, 10)}))
    table.add_usage(AL, UsageDelta(DAY, tokens={"memory": (25, 5)}))  # ties with alice
    table.add_usage(BOB, UsageDelta(DAY, tokens={"agent": (10, 10)}))
    table.add_usage(BOB, UsageDelta(DAY, tokens={"compaction": (40, 0)}, turns=2))
    table.add_usage(carol, UsageDelta(DAY, turns=1))  # turns but no tokens: ranked last
    table.add_usage(carol, UsageDelta("2026-12-01", tokens={"agent": (500, 0)}))
    new_session(table, ALICE)  # other items are not users' days

    top = table.top_users(DAY, 10)

    assert [(key, u.total_tokens) for key, u in top] == [
        (BOB.key, 60),
        (AL.key, 30),
        (ALICE.key, 30),
        (carol.key, 0),
    ]
    assert top[0][1] == usage(tokens={"agent": (10, 10), "compaction": (40, 0)}, turns=2)
    assert [key for key, _ in table.top_users(DAY, 2)] == [BOB.key, AL.key]
    assert table.top_users(DAY, 0) == []
    assert table.top_users("2026-12-01", 10) == [
        (carol.key, usage("2026-12-01", tokens={"agent": (500, 0)}))
    ]
    assert table.top_users("2026-12-02", 10) == []


def test_commit_turn_with_usage_commits_the_turn_and_adds_the_usage(table: StateTable) -> None:
    table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE)
    table.commit_turn(ALICE, "s1", "a", 1, NOW, usage=SPEND)
    table.acquire_session_lease(ALICE, "s1", "b", T0 + 1, LEASE)  # the lease was released
    table.commit_turn(ALICE, "s1", "b", 2, NOW, usage=SPEND)

    state = table.get_session(ALICE, "s1")
    assert state is not None and state.turn == 2
    assert table.usage_days(ALICE, DAY, DAY) == [
        usage(
            tokens={"agent": (200, 40), "compaction": (60, 10)},
            calls={"agent": 4, "compaction": 2},
            turns=2,
        )
    ]


def test_commit_turn_with_an_empty_usage_is_a_plain_commit(table: StateTable) -> None:
    table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE)
    table.commit_turn(ALICE, "s1", "a", 1, NOW, usage=UsageDelta(DAY))
    state = table.get_session(ALICE, "s1")
    assert state is not None and state.turn == 1
    assert table.usage_days(ALICE, DAY, DAY) == []
    table.acquire_session_lease(ALICE, "s1", "b", T0 + 1, LEASE)


def test_commit_turn_with_usage_after_losing_the_lease_changes_neither(table: StateTable) -> None:
    new_session(table, turn=3)
    table.add_usage(ALICE, UsageDelta(DAY, turns=1))
    table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE)
    table.acquire_session_lease(ALICE, "s1", "b", T0 + LEASE + 1, LEASE)  # a's expired

    with pytest.raises(ConflictError):
        table.commit_turn(ALICE, "s1", "a", 4, NOW, usage=SPEND)

    state = table.get_session(ALICE, "s1")
    assert state is not None and state.turn == 3
    assert table.usage_days(ALICE, DAY, DAY) == [usage(turns=1)]
    with pytest.raises(SessionBusyError):  # b still holds it
        table.acquire_session_lease(ALICE, "s1", "c", T0 + LEASE + 2, LEASE)


def test_commit_turn_with_a_malformed_usage_commits_nothing(table: StateTable) -> None:
    table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE)
    with pytest.raises(ValueError):
        table.commit_turn(ALICE, "s1", "a", 1, NOW, usage=UsageDelta(DAY, model_calls={"x": 1}))
    assert table.get_session(ALICE, "s1") == SessionState()
    table.commit_turn(ALICE, "s1", "a", 1, NOW)  # the lease is still ours


# -- forgetting a user ---------------------------------------------------------------------


def test_purge_user_removes_every_item_of_one_user_only(table: StateTable) -> None:
    new_session(table, ALICE, "s1", turn=2)
    new_session(table, ALICE, "s2", turn=1)
    table.claim_flush_gate(ALICE, "s1", T0, 5_000)
    table.mark_flush_due(ALICE, "s1", NOW, shards=1)
    table.acquire_session_lease(ALICE, "s2", "a", T0, LEASE)
    table.mark_consolidation_due(ALICE, NOW, shards=1)
    table.acquire_consolidation_lease(ALICE, "run-1", T0, LEASE)
    for user in (AL, BOB):  # others, one of them sharing alice's key prefix
        new_session(table, user, "s1", turn=5)
        table.mark_flush_due(user, "s1", NOW, shards=1)
        table.mark_consolidation_due(user, NOW, shards=1)

    assert table.purge_user(ALICE) == 3  # two sessions and the user item

    assert table.get_session(ALICE, "s1") is None
    assert table.get_session(ALICE, "s2") is None
    assert table.get_user(ALICE) == UserState()
    assert sorted(d.user_key for d in table.query_due(shard_name("due", 0))) == sorted(
        [AL.key, BOB.key]
    )
    assert sorted(d.user_id for d in table.query_flush_due(shard_name("flush", 0), LATER)) == (
        sorted([AL.id, BOB.id])
    )
    for user in (AL, BOB):
        state = table.get_session(user, "s1")
        assert state is not None and state.turn == 5
        assert table.get_user(user).due_seq == 1
    # leases went with the items
    table.acquire_session_lease(ALICE, "s2", "b", T0 + 1, LEASE)
    table.acquire_consolidation_lease(ALICE, "run-2", T0 + 1, LEASE)


def test_purge_user_removes_the_users_usage_days_only(table: StateTable) -> None:
    new_session(table)
    table.add_usage(ALICE, SPEND)
    table.add_usage(ALICE, UsageDelta("2026-12-01", turns=1))
    table.add_usage(AL, SPEND)

    assert table.purge_user(ALICE) == 3  # the session and two days

    assert table.usage_days(ALICE, "2026-01-01", "2026-12-31") == []
    assert [key for key, _ in table.top_users(DAY, 10)] == [AL.key]
    assert table.usage_days(AL, DAY, DAY)[0].total_tokens == 155


def test_purging_a_user_twice_removes_nothing_the_second_time(table: StateTable) -> None:
    new_session(table)
    assert table.purge_user(ALICE) == 1
    assert table.purge_user(ALICE) == 0
    assert table.purge_user(BOB) == 0


# -- turn budgets: the lease write that admits the turn ------------------------------------
_sessions = iter(range(10**6))


def check(**kwargs: Any) -> AdmissionCheck:
    args = {"estimate": 100, "count_turn": True, "turn_limit": 0, "token_limit": 0} | kwargs
    return AdmissionCheck(DAY, override=args.pop("override", None), **args)


def admit(table: StateTable, user: User = ALICE, **kwargs: Any) -> LeaseAdmission:
    """A new session's lease with the admission ``kwargs`` describe (a fresh session each
    time, so only the budget can refuse)."""
    session = f"n{next(_sessions)}"
    return table.lease_and_admit(
        user, session, "o", T0, LEASE, expected=None, check=check(**kwargs)
    )


def test_the_turn_limit_admits_exactly_that_many_turns(table: StateTable) -> None:
    found = [admit(table, turn_limit=2).taken for _ in range(3)]
    assert found == [True, True, False]
    refused = admit(table, turn_limit=2).refused
    assert refused is not None and (refused.turns, refused.reserved) == (2, 200)
    assert admit(table, BOB, turn_limit=2).taken  # another user's day is their own
    assert admit(table, count_turn=False, turn_limit=2).taken  # a resume is not a turn


def test_a_refused_admission_takes_no_lease_and_makes_no_session(table: StateTable) -> None:
    admit(table, turn_limit=1)
    found = table.lease_and_admit(
        ALICE, "s1", "o", T0, LEASE, expected=None, check=check(turn_limit=1)
    )
    assert not found.taken and found.refused is not None
    assert table.get_session(ALICE, "s1") is None


def test_the_token_limit_counts_reservations_and_commits_replace_them(table: StateTable) -> None:
    assert admit(table, token_limit=150).taken  # reserved 100
    assert admit(table, token_limit=150).taken  # 100 < 150: reserved 200
    held = admit(table, token_limit=150).refused  # held by the running turns
    assert held is not None and (held.turn_tokens, held.reserved) == (0, 200)
    table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE)
    spend = UsageDelta(DAY, tokens={"agent": (30, 10)}, turns=1, released=100)
    table.commit_turn(ALICE, "s1", "a", 1, NOW, usage=spend)  # 200 - 100 + 40
    assert admit(table, token_limit=150).taken  # 140 < 150
    after = admit(table, token_limit=150).refused
    assert after is not None and (after.turn_tokens, after.reserved) == (40, 240)


def test_releasing_an_admission_gives_back_its_estimate_and_turn(table: StateTable) -> None:
    admit(table, turn_limit=1, token_limit=150)
    assert not admit(table, turn_limit=1).taken
    table.release_admission(ALICE, DAY, estimate=100, count_turn=True)
    assert admit(table, turn_limit=1, token_limit=150).taken
    table.release_admission(ALICE, DAY, estimate=100, count_turn=False)  # a paused turn
    kept = admit(table, turn_limit=1).refused
    assert kept is not None and (kept.turns, kept.reserved) == (1, 0)


def test_admissions_leave_the_reported_usage_alone(table: StateTable) -> None:
    admit(table, turn_limit=5, token_limit=1000)
    (day,) = table.usage_days(ALICE, DAY, DAY)
    assert day.turns == 0 and day.total_tokens == 0


def test_without_limits_the_write_takes_the_lease_and_counts_nothing(table: StateTable) -> None:
    assert admit(table).taken
    assert table.usage_days(ALICE, DAY, DAY) == []


def test_the_lease_is_taken_only_from_a_session_as_expected(table: StateTable) -> None:
    new_session(table, turn=3)
    lease = {"expected": None, "check": check(turn_limit=5)}
    found = table.lease_and_admit(ALICE, "s1", "a", T0, LEASE, **lease)
    assert (found.taken, found.session_changed, found.session) == (
        False,
        True,
        SessionState(turn=3),
    )
    stale = table.lease_and_admit(
        ALICE, "s1", "a", T0, LEASE, expected=SessionState(turn=2), check=check(turn_limit=5)
    )
    assert stale.session_changed and stale.session == SessionState(turn=3)
    gone = table.lease_and_admit(
        ALICE, "s9", "a", T0, LEASE, expected=SessionState(turn=1), check=check(turn_limit=5)
    )
    assert gone.session_changed and gone.session is None
    assert table.usage_days(ALICE, DAY, DAY) == []  # none of them admitted anything
    taken = table.lease_and_admit(
        ALICE, "s1", "a", T0, LEASE, expected=SessionState(turn=3), check=check(turn_limit=5)
    )
    assert taken.taken
    with pytest.raises(SessionBusyError) as busy:
        table.lease_and_admit(
            ALICE, "s1", "b", T0 + 1000, LEASE, expected=SessionState(turn=3), check=check()
        )
    assert busy.value.retry_after == 59
    table.commit_turn(ALICE, "s1", "a", 4, NOW)
    assert table.get_session(ALICE, "s1") == SessionState(turn=4)


def test_the_pause_mark_and_the_flush_gate_are_part_of_the_expected_session(
    table: StateTable,
) -> None:
    table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE)
    mark = PauseMark("p-1", 1, T0)
    table.pause_turn(ALICE, "s1", "a", mark, 0)
    plain = table.lease_and_admit(
        ALICE, "s1", "b", T0, LEASE, expected=SessionState(), check=check()
    )
    assert plain.session_changed and plain.session == SessionState(pause=mark)
    assert table.lease_and_admit(
        ALICE, "s1", "b", T0, LEASE, expected=SessionState(pause=mark), check=check()
    ).taken
    table.commit_turn(ALICE, "s1", "b", 1, NOW)
    table.claim_flush_gate(ALICE, "s1", T0 + 5, 1000)
    gated = table.lease_and_admit(
        ALICE, "s1", "c", T0, LEASE, expected=SessionState(turn=1), check=check()
    )
    assert gated.session is not None and gated.session.flush_gate_ms == T0 + 5
    expected = SessionState(turn=1, flush_gate_ms=T0 + 5)
    assert table.lease_and_admit(
        ALICE, "s1", "c", T0, LEASE, expected=expected, check=check()
    ).taken


def test_the_write_checks_the_override_it_was_computed_from(table: StateTable) -> None:
    table.set_budget(ALICE, Budget(turns=3))
    found = admit(table, turn_limit=5)  # computed without the override
    assert found.override_changed and found.override == Budget(turns=3)
    assert table.usage_days(ALICE, DAY, DAY) == []
    assert admit(table, turn_limit=3, override=Budget(turns=3)).taken
    other = admit(table, turn_limit=3, override=Budget(turns=3, tokens=9))
    assert other.override_changed and other.override == Budget(turns=3)
    table.set_budget(ALICE, None)
    assert admit(table, turn_limit=3, override=Budget(turns=3)).override_changed
    assert admit(table, turn_limit=3).taken


def test_a_budget_override_is_kept_replaced_and_removed_per_user(table: StateTable) -> None:
    assert table.get_budget(ALICE) is None
    table.set_budget(ALICE, Budget(tokens=500, turns=None, memory_tokens=0))
    assert table.get_budget(ALICE) == Budget(tokens=500, turns=None, memory_tokens=0)
    assert table.get_budget(BOB) is None
    table.set_budget(ALICE, Budget(turns=3))
    assert table.get_budget(ALICE) == Budget(turns=3)
    table.set_budget(ALICE, None)
    assert table.get_budget(ALICE) is None
    table.set_budget(ALICE, Budget(turns=1))
    table.purge_user(ALICE)
    assert table.get_budget(ALICE) is None


# -- imports: admitted under the day's turns, tokens and imported turns -----------------------
def imports(turns: int, **limits: int) -> ImportCheck:
    args = {"turn_limit": 0, "token_limit": 0, "import_limit": 0} | limits
    return ImportCheck(DAY, turns, **args)


def test_imports_are_admitted_while_they_fit_under_the_imported_turns_cap(
    table: StateTable,
) -> None:
    assert table.admit_imports(ALICE, imports(6, import_limit=10)) is None
    refused = table.admit_imports(ALICE, imports(5, import_limit=10))  # 6 + 5 > 10
    assert refused is not None and refused.imported == 6
    assert table.admit_imports(ALICE, imports(4, import_limit=10)) is None  # exactly 10
    assert table.admit_imports(BOB, imports(10, import_limit=10)) is None  # their own day
    [day] = table.usage_days(ALICE, DAY, DAY)
    assert day.imported == 10 and day.turns == 0


def test_an_import_is_refused_while_the_days_turns_or_tokens_are_spent(table: StateTable) -> None:
    admit(table, turn_limit=1, token_limit=150, estimate=200)  # a turn: 1 turn, 200 reserved
    turns = table.admit_imports(ALICE, imports(1, turn_limit=1))
    assert turns is not None and turns.turns == 1
    tokens = table.admit_imports(ALICE, imports(1, token_limit=150))
    assert tokens is not None and tokens.reserved == 200
    assert table.admit_imports(ALICE, imports(1, turn_limit=2, token_limit=300)) is None


def test_a_released_import_gives_its_turns_back(table: StateTable) -> None:
    assert table.admit_imports(ALICE, imports(3, import_limit=3)) is None
    assert table.admit_imports(ALICE, imports(1, import_limit=3)) is not None
    table.release_imports(ALICE, DAY, 3)
    assert table.admit_imports(ALICE, imports(3, import_limit=3)) is None


def test_a_pause_adds_its_spend_in_the_same_write(table: StateTable) -> None:
    table.acquire_session_lease(ALICE, "s1", "a", T0, LEASE)
    spend = UsageDelta(DAY, tokens={"agent": (30, 10)}, model_calls={"agent": 1})
    table.pause_turn(ALICE, "s1", "a", PauseMark("p1", 1, T0), 0, usage=spend)
    [day] = table.usage_days(ALICE, DAY, DAY)
    assert day.tokens["agent"] == (30, 10) and day.model_calls["agent"] == 1
    with pytest.raises(ConflictError):  # a lost lease adds nothing either
        table.pause_turn(ALICE, "s1", "a", PauseMark("p2", 1, T0), 0, usage=spend)
    assert table.usage_days(ALICE, DAY, DAY)[0].tokens["agent"] == (30, 10)


# -- memberships of shared scopes ----------------------------------------------------------


def test_a_membership_is_kept_replaced_listed_and_removed(table: StateTable) -> None:
    assert table.get_member("project:apollo", ALICE) is None
    table.put_member("project:apollo", ALICE, "member", "2026-12-01T00:00:00Z")
    table.put_member("project:apollo", BOB, "maintainer", "2026-12-01T00:00:01Z")
    table.put_member("project:apollo", ALICE, "maintainer", "2026-12-02T00:00:00Z")
    table.put_member("agent:support", BOB, "member", "2026-12-02T00:00:00Z")

    alice = table.get_member("project:apollo", ALICE)
    assert alice == Member("project:apollo", "alice", "maintainer", "2026-12-02T00:00:00Z")
    members = sorted(table.list_members("project:apollo"), key=lambda m: m.user_id)
    assert [(m.user_id, m.role) for m in members] == [
        ("alice", "maintainer"),
        ("bob@example.com", "maintainer"),
    ]
    assert sorted(table.list_scopes()) == ["agent:support", "project:apollo"]
    assert sorted(m.scope for m in table.scopes_of(BOB)) == ["agent:support", "project:apollo"]

    assert table.delete_member("project:apollo", ALICE) is True
    assert table.delete_member("project:apollo", ALICE) is False  # gone: nothing to remove
    assert table.get_member("project:apollo", ALICE) is None
    assert [m.user_id for m in table.list_members("project:apollo")] == ["bob@example.com"]
    assert table.scopes_of(ALICE) == []


def test_the_scopes_a_user_wrote_into_keep_the_first_time_and_go_with_them(
    table: StateTable,
) -> None:
    assert table.written_by(BOB) == {}
    table.note_writer("project:apollo", BOB, "2026-12-01T00:00:00Z")
    table.note_writer("project:apollo", BOB, "2026-12-02T00:00:00Z")  # the first is kept
    table.note_writer("org", BOB, "2026-12-03T00:00:00Z")
    table.note_writer("org", ALICE, "2026-12-04T00:00:00Z")
    assert table.written_by(BOB) == {
        "org": "2026-12-03T00:00:00Z",
        "project:apollo": "2026-12-01T00:00:00Z",
    }
    table.purge_user(BOB)
    assert table.written_by(BOB) == {}
    assert table.written_by(ALICE) == {"org": "2026-12-04T00:00:00Z"}


def test_forgetting_a_user_removes_their_memberships_from_every_scope(table: StateTable) -> None:
    table.put_member("project:apollo", BOB, "member", "2026-12-01T00:00:00Z")
    table.put_member("org", BOB, "maintainer", "2026-12-01T00:00:00Z")
    table.put_member("project:apollo", ALICE, "member", "2026-12-01T00:00:00Z")

    assert table.purge_user(BOB) == 2

    assert table.get_member("project:apollo", BOB) is None and table.get_member("org", BOB) is None
    assert [m.user_id for m in table.list_members("project:apollo")] == ["alice"]
    assert table.list_members("org") == []
