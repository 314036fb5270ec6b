"""The membership port: who may use a shared memory scope, and the record that crosses it
(``ports`` re-exports every name, so services import ``ports`` only; the rules of who
may do what are ``scopes``').

    MembershipTable     a shared scope's members and their roles, the scopes that have
                        members, the scopes each user wrote into; forgotten with the user
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from agent_harness.ids import User

__all__ = ["Member", "MembershipTable"]


@dataclass(frozen=True)
class Member:
    """A user's role in a shared scope (``scope``: its text, ``project:apollo``)."""

    scope: str
    user_id: str
    role: Literal["member", "maintainer"]
    added_at: str


class MembershipTable(Protocol):
    def put_member(
        self, scope: str, user: User, role: Literal["member", "maintainer"], at: str
    ) -> None:
        """Make ``user`` a member of ``scope`` with ``role`` (replacing the role they
        had), and list the scope among those that have members."""
        ...

    def delete_member(self, scope: str, user: User) -> bool:
        """Remove the membership; False when there was none."""
        ...

    def get_member(self, scope: str, user: User) -> Member | None:
        """The membership, read consistently (a removal counts at once)."""
        ...

    def list_members(self, scope: str) -> list[Member]: ...

    def list_scopes(self) -> list[str]:
        """Every scope that has had a member."""
        ...

    def scopes_of(self, user: User) -> list[Member]:
        """The user's memberships (the console's view; forgetting the user)."""
        ...

    def note_writer(self, scope: str, user: User, at: str) -> None:
        """Record that ``scope``'s memory names ``user`` as a writer (a save, promotion or
        correction by them), keeping the first time (``at``, ISO): forgetting the user
        visits exactly these scopes, and their versions from then on."""
        ...

    def written_by(self, user: User) -> dict[str, str]:
        """The scopes whose memory names ``user``: scope text -> the first time."""
        ...
