"""The session gate: one call per (user, session) at a time, across every container.

    with session_lease(rt, user, session_id) as lease:   # waits a bounded time, then
                                                          # 409 + Retry-After if held
        ... write the turn ...
        lease.commit(turn_no)     # counter + release, one write (or lease.pause(...))
    # not committed (an error): released on the way out; a crash: it expires

The lease outlives the function timeout (HARNESS_SESSION_LEASE_SECONDS), so a crashed
holder's lease expires and is taken over; release and commit are conditional on
ownership, so a late holder can never release or commit someone else's lease.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from agent_harness.clock import epoch_ms, iso
from agent_harness.errors import HarnessError, SessionBusyError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from agent_harness.ids import User
    from agent_harness.ports import PauseMark, SessionState, UsageDelta
    from agent_harness.runtime import Runtime

__all__ = ["SessionLease", "session_lease"]

logger = Logger(child=True)

POLL_SECONDS = 0.25


@dataclass
class SessionLease:
    rt: Runtime
    user: User
    session_id: str
    owner: str
    state: SessionState
    committed: bool = False

    def commit(self, turn: int, usage: UsageDelta | None = None) -> None:
        """Record ``turn`` as the session's last turn and release, in one conditional write
        (with ``usage``: the user's spend counted in the same write)."""
        self.rt.table.commit_turn(
            self.user, self.session_id, self.owner, turn, iso(self.rt.clock.now()), usage=usage
        )
        self.committed = True

    def pause(self, mark: PauseMark, turn: int) -> None:
        """Commit a pause for client tool results (``turn``: the last completed turn) and
        release, in one conditional write."""
        self.rt.table.pause_turn(self.user, self.session_id, self.owner, mark, turn)
        self.committed = True


def _acquire(
    rt: Runtime, user: User, session_id: str, owner: str, must_exist: bool
) -> SessionState:
    """Take the lease; when it is held, wait up to ``session_wait_seconds`` (polling)
    before giving the caller 409 + Retry-After."""
    lease_ms = rt.settings.session_lease_seconds * 1000
    waited = 0.0
    while True:
        try:
            return rt.table.acquire_session_lease(
                user, session_id, owner, epoch_ms(rt.clock.now()), lease_ms, must_exist=must_exist
            )
        except SessionBusyError:
            remaining = rt.settings.session_wait_seconds - waited
            if remaining <= 0:
                raise
            pause = min(POLL_SECONDS, remaining)
            rt.sleep(pause)
            waited += pause


@contextmanager
def session_lease(
    rt: Runtime, user: User, session_id: str, *, must_exist: bool = False
) -> Iterator[SessionLease]:
    """``must_exist``: a session never written is a ``SessionNotFoundError``, and no item
    is made for it."""
    owner = rt.new_id()
    state = _acquire(rt, user, session_id, owner, must_exist)
    lease = SessionLease(rt, user, session_id, owner, state)
    try:
        yield lease
    finally:
        if not lease.committed:
            try:
                rt.table.release_session_lease(user, session_id, owner)
            except HarnessError:  # it expires on its own; the original error matters
                logger.exception("releasing the session lease failed")
