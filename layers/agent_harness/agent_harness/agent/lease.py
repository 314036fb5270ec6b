"""The session gate: one call per (user, session) at a time, across every container.

    with session_lease(rt, user, session_id) as lease:   # waits a bounded time, then
                                                          # 409 + Retry-After if held
        ... write the turn ...
        lease.commit(turn_no)     # counter + release, one write (or lease.pause(...))
    # not committed (an error): released on the way out; a crash: it expires

With daily budgets on, the write that takes the lease also admits the turn (429 when
over budget, nothing written), so budgets cost the hot path no request. A transaction
cannot return the session item, so it is conditioned on the session being as this
container last left it (``rt.sessions_seen``); a session changed elsewhere, or first seen
here, refuses with its item and the next try uses it (one request more). A new
session is guessed right the first time. The user's budget override is checked the same
way: the write names the one the limits came from (as last seen here; none at first).

The lease outlives the function timeout (HARNESS_SESSION_LEASE_SECONDS), so a crashed
holder's lease expires and is taken over; release and commit are conditional on
ownership, so a late holder can never release or commit someone else's lease.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from agent_harness.clock import epoch_ms, iso
from agent_harness.errors import (
    HarnessError,
    SessionBusyError,
    SessionNotFoundError,
    StoreError,
)
from agent_harness.ports import SessionState
from agent_harness.usage import (
    admission_check,
    budgets_on,
    known_override,
    learn_turn_cost,
    note_override,
    refuse_turn,
)

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from agent_harness.ids import User
    from agent_harness.ports import AdmissionCheck, PauseMark, Place, UsageDelta
    from agent_harness.runtime import Runtime

__all__ = ["SessionLease", "session_lease"]

logger = Logger(child=True)

POLL_SECONDS = 0.25
#: how long a turn usually holds its session, and the most a busy answer asks a caller
#: to wait: Retry-After is the holder's expected remaining time, never the lease's
#: length (that only bounds a crashed holder), so SDK clients retry in about a second
TYPICAL_TURN_MS = 2000
MIN_RETRY_MS, MAX_RETRY_MS = 500, 5000
#: tries of the lease-and-admission write before giving up: each refusal but the
#: budget's teaches the next try what it found, so two or three settle it (conflicting
#: transactions are the table adapter's to wait out)
ADMIT_TRIES = 6
#: sessions a container remembers as it last left them
SESSIONS_SEEN = 1024


@dataclass
class SessionLease:
    rt: Runtime
    user: User
    session_id: str
    owner: str
    #: the session as the lease found it: its turn, pause mark and flush gate (its
    #: cursors, which a turn never reads, may be older: the flush job moves them)
    state: SessionState
    #: the turn's admission under its user's budgets (None: no limit applied)
    admission: AdmissionCheck | None = None
    committed: bool = False

    def commit(
        self, turn: int, usage: UsageDelta | None = None, places: Sequence[Place] = ()
    ) -> None:
        """Record ``turn`` as the session's last turn and release, in one conditional write
        (with ``usage``: the user's spend counted, and ``places`` put, in the same write)."""
        now = iso(self.rt.clock.now())
        self.rt.table.commit_turn(
            self.user, self.session_id, self.owner, turn, now, usage=usage, places=places
        )
        self.committed = True
        _remember(self.rt, self.user, self.session_id, replace(self.state, turn=turn, pause=None))
        if usage is not None:
            learn_turn_cost(self.rt, self.user, usage)

    def pause(
        self,
        mark: PauseMark,
        turn: int,
        usage: UsageDelta | None = None,
        places: Sequence[Place] = (),
    ) -> None:
        """Commit a pause for client tool results (``turn``: the last completed turn) and
        release, in one conditional write (with ``usage``: the spend so far counted, and
        ``places`` put, in the same write)."""
        self.rt.table.pause_turn(
            self.user, self.session_id, self.owner, mark, turn, usage=usage, places=places
        )
        self.committed = True
        _remember(self.rt, self.user, self.session_id, replace(self.state, turn=turn, pause=mark))


def _remember(rt: Runtime, user: User, session_id: str, state: SessionState) -> None:
    """What the next lease write here expects of the session. A wrong guess (a lost
    lease, a turn elsewhere) costs one refused try, which brings the session's item."""
    seen = rt.sessions_seen
    seen.pop((user.key, session_id), None)
    seen[(user.key, session_id)] = state
    while len(seen) > SESSIONS_SEEN:  # oldest first: dicts keep insertion order
        del seen[next(iter(seen))]


def _take(
    rt: Runtime, user: User, session_id: str, owner: str, must_exist: bool, admit: bool | None
) -> tuple[SessionState, AdmissionCheck | None]:
    """One attempt at the lease (``SessionBusyError`` when held), with the turn's
    admission when budgets are on and ``admit`` is set (True: a new turn; False: a
    resume, checked but not counted)."""
    lease_ms = rt.settings.session_lease_seconds * 1000
    if admit is None or not budgets_on(rt):
        now_ms = epoch_ms(rt.clock.now())
        state = rt.table.acquire_session_lease(
            user, session_id, owner, now_ms, lease_ms, must_exist=must_exist
        )
        _remember(rt, user, session_id, state)
        return state, None
    expected = rt.sessions_seen.get((user.key, session_id))
    if expected is None and must_exist:  # no guess is likely right: read it
        expected = rt.table.get_session(user, session_id)
        if expected is None:
            raise SessionNotFoundError(f"session {session_id} has no turns")
    override = known_override(rt, user)
    for _ in range(ADMIT_TRIES):
        check = admission_check(rt, user, counts_a_turn=admit, override=override)
        found = rt.table.lease_and_admit(
            user,
            session_id,
            owner,
            epoch_ms(rt.clock.now()),
            lease_ms,
            expected=expected,
            check=check,
        )
        if found.taken:
            state = expected or SessionState()
            _remember(rt, user, session_id, state)
            return state, check if check.admits else None
        if found.override_changed:
            override = found.override
            note_override(rt, user, override)
        elif found.refused is not None:
            refuse_turn(rt, user, found.refused, check)
        elif found.session_changed:
            expected = found.session
            if expected is None and must_exist:
                raise SessionNotFoundError(f"session {session_id} has no turns")
    raise StoreError(f"the lease of session {session_id} could not be taken")


def _acquire(
    rt: Runtime, user: User, session_id: str, owner: str, must_exist: bool, admit: bool | None
) -> tuple[SessionState, AdmissionCheck | None]:
    """Take the lease; when it is held, wait up to ``session_wait_seconds`` (polling)
    before giving the caller 409 + Retry-After (the holder's expected remaining time)."""
    waited = 0.0
    while True:
        try:
            return _take(rt, user, session_id, owner, must_exist, admit)
        except SessionBusyError as busy:
            remaining = rt.settings.session_wait_seconds - waited
            if remaining <= 0:
                raise _expected_wait(rt, busy) from None
            pause = min(POLL_SECONDS, remaining)
            rt.sleep(pause)
            waited += pause


def _expected_wait(rt: Runtime, busy: SessionBusyError) -> SessionBusyError:
    """The 409 of a busy session: retry after the holder's expected remaining time (a
    typical turn less what it has held, to the second the store reports), bounded."""
    remaining_ms = busy.retry_after * 1000  # the lease's remaining time, rounded up
    held_ms = max(0, rt.settings.session_lease_seconds * 1000 - remaining_ms)
    wait_ms = min(max(TYPICAL_TURN_MS - held_ms, MIN_RETRY_MS), MAX_RETRY_MS, remaining_ms)
    return SessionBusyError(
        busy.message, retry_after=max(1, math.ceil(wait_ms / 1000)), retry_after_ms=wait_ms
    )


@contextmanager
def session_lease(
    rt: Runtime, user: User, session_id: str, *, must_exist: bool = False, admit: bool | None = None
) -> Iterator[SessionLease]:
    """``must_exist``: a session never written is a ``SessionNotFoundError``, and no item
    is made for it. ``admit``: the turn is admitted under its user's daily budgets in
    the same write (True counts a turn; ``BudgetExhaustedError`` when over, nothing
    written); ``lease.admission`` is what it reserved, for the commit or a release."""
    owner = rt.new_id()
    state, admission = _acquire(rt, user, session_id, owner, must_exist, admit)
    lease = SessionLease(rt, user, session_id, owner, state, admission)
    try:
        yield lease
    finally:
        if not lease.committed:
            try:
                rt.table.release_session_lease(user, session_id, owner)
            except HarnessError:  # it expires on its own; the original error matters
                logger.exception("releasing the session lease failed")
