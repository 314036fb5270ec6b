"""Memory scopes and who may use them: the one choke point from (caller, scope) to a
storage root, or a refusal.

    user             the caller's own memory (``users/<user key>/``), always theirs
    project:<name>   a shared memory (``scopes/project/<name>/``), e.g. a repository's
    agent:<name>     one agent's procedures (``scopes/agent/<name>/``)
    org              the whole stack's (``scopes/org/``)

A shared scope's memory belongs to its owner, ``User.for_scope`` (key ``project.apollo``:
a ``.`` no user's key holds), so the store, the state table, the consolidation, its lease,
due marks and usage all work on it as on a user's, in its own prefix and partition.

A shared scope is used by members: reading (search, recall, ``GET /v1/memory``) takes
the ``member`` role, writing (save, correct) the ``maintainer`` role. A role comes from
a membership an operator manages (``PUT /v1/admin/scopes/{scope}/members/{user_id}``),
from a JWT group ``agent-harness:<scope>:<role>`` (``agent-harness:project:apollo:
maintainer``) where the deployment prefers its identity provider, or, for ``org``, from
being a user of the stack (every user is a member; maintainers are granted). The higher
of a membership's and a group's role counts. ``resolve`` is the only function that
builds a scope's root: every door asks it, so no query can forget the check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

from agent_harness.clock import iso
from agent_harness.errors import ForbiddenError, NotFoundError, ValidationFailedError
from agent_harness.ids import SCOPE_NAME, User
from agent_harness.paths import user_root

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from agent_harness.ports import Member
    from agent_harness.runtime import Runtime

__all__ = [
    "GROUP_PREFIX",
    "Access",
    "Grant",
    "Role",
    "Scope",
    "group_roles",
    "list_members",
    "list_scopes",
    "parse_scope",
    "remove_member",
    "resolve",
    "resolve_all",
    "set_member",
]

Role = Literal["member", "maintainer"]
Access = Literal["read", "write"]
Kind = Literal["user", "project", "agent", "org"]
ROLES: tuple[Role, ...] = get_args(Role)
#: a JWT group granting a role in a scope: ``agent-harness:<scope>:<role>``
GROUP_PREFIX = "agent-harness:"
_RANK: dict[Role | None, int] = {None: 0, "member": 1, "maintainer": 2}
_NEEDS: dict[Access, Role] = {"read": "member", "write": "maintainer"}


@dataclass(frozen=True)
class Scope:
    """A memory scope: ``user``, ``org``, or a shared kind and its name."""

    kind: Kind
    name: str = ""

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}" if self.name else self.kind

    @property
    def shared(self) -> bool:
        return self.kind != "user"


USER = Scope("user")
ORG = Scope("org")


def parse_scope(value: object) -> Scope:
    """A scope from its text; 422 (``ValidationFailedError``) for anything else."""
    if value == "user":
        return USER
    if value == "org":
        return ORG
    if isinstance(value, str) and ":" in value:
        kind, _, name = value.partition(":")
        if kind in ("project", "agent") and SCOPE_NAME.fullmatch(name):
            return Scope(kind, name)  # type: ignore[arg-type]
    raise ValidationFailedError(
        "scope must be 'user', 'org', 'project:<name>' or 'agent:<name>' (a name is 1-64 "
        "letters, digits, '.', '_' or '-', starting with a letter or digit)"
    )


def shared_scope(value: object) -> Scope:
    """A scope that has members (not ``user``), from a path or a body."""
    scope = parse_scope(value)
    if not scope.shared:
        raise ValidationFailedError("the user scope has no members: it is the caller's own")
    return scope


def group_roles(groups: Iterable[str]) -> dict[Scope, Role]:
    """The roles the caller's JWT groups grant (groups of other shapes are ignored)."""
    out: dict[Scope, Role] = {}
    for group in groups:
        if not group.startswith(GROUP_PREFIX):
            continue
        scope_text, _, role = group.removeprefix(GROUP_PREFIX).rpartition(":")
        if role not in ROLES:
            continue
        try:
            scope = shared_scope(scope_text)
        except ValidationFailedError:
            continue
        if _RANK[role] > _RANK[out.get(scope)]:
            out[scope] = role
    return out


@dataclass(frozen=True)
class Grant:
    """What ``resolve`` answers: the scope; ``owner``, whose memory it is (the caller, or
    the scope's ``User.for_scope``: what every storage call of the door then takes); the
    role the caller holds there (``maintainer`` of their own) and where it came from."""

    scope: Scope
    owner: User
    role: Role
    via: Literal["owner", "membership", "group", "org"]

    @property
    def root(self) -> str:
        """The S3 prefix of the memory: ``users/<key>/`` or ``scopes/<kind>/<name>/``."""
        return user_root(self.owner.key)


def resolve(
    rt: Runtime, caller: User, scope: Scope, access: Access, groups: Iterable[str] = ()
) -> Grant:
    """The caller's grant on ``scope`` for ``access``, or 403 (``ForbiddenError``): one
    consistent read of the membership for a shared scope, none for the user's own."""
    if not scope.shared:
        return Grant(scope, caller, "maintainer", "owner")
    member = rt.table.get_member(str(scope), caller)
    grant = _decide(scope, member.role if member else None, group_roles(groups), access)
    if access == "write":  # this container's bound sessions see the write on their next turn
        rt.listings.forget(grant.owner.key)
    return grant


def resolve_all(
    rt: Runtime,
    caller: User,
    scopes: Sequence[Scope],
    access: Access,
    groups: Iterable[str] = (),
) -> list[Grant]:
    """``resolve`` for each of ``scopes`` (a session's bound scopes) at once: one
    consistent Query of the caller's memberships, none when groups or ``org`` grant them
    all; 403 at the first scope refused."""
    by_group = group_roles(groups)
    shared = [s for s in scopes if s.shared]
    granted = {
        s for s in shared if _enough(by_group.get(s), access) or (s == ORG and access == "read")
    }
    held: dict[str, Role] = {}
    if any(s not in granted for s in shared):
        held = {m.scope: m.role for m in rt.table.scopes_of(caller)}
    out = []
    for scope in scopes:
        if not scope.shared:
            out.append(Grant(scope, caller, "maintainer", "owner"))
        else:
            out.append(_decide(scope, held.get(str(scope)), by_group, access))
    return out


def _enough(role: Role | None, access: Access) -> bool:
    return _RANK[role] >= _RANK[_NEEDS[access]]


def _decide(
    scope: Scope, membership: Role | None, by_group: dict[Scope, Role], access: Access
) -> Grant:
    """The grant the highest of the caller's roles in ``scope`` gives, or 403."""
    candidates: list[tuple[Role | None, Literal["membership", "group", "org"]]] = [
        (membership, "membership"),
        (by_group.get(scope), "group"),
        ("member" if scope == ORG else None, "org"),
    ]
    role, via = max(candidates, key=lambda c: _RANK[c[0]])
    if role is None or not _enough(role, access):
        verb = "write to" if access == "write" else "read"
        raise ForbiddenError(
            f"you may not {verb} the {scope} memory: "
            + (f"it takes the {_NEEDS[access]} role" if role else "you are not a member")
        )
    return Grant(scope, User.for_scope(str(scope)), role, via)


def note_writer(rt: Runtime, writer: User, owner: User) -> None:
    """Before a write that names ``writer`` in a shared scope's memory (``owner``: the
    scope's; ``by=<user key>`` in provenance or a version's writer): record it in the
    writer's partition, so forgetting them finds the scope (memory.jobs.forget), and mark
    the scope due: no flush ever runs for a scope, so its consolidation (merging, dropping
    retired lines, archiving old ledgers) is due when someone writes to it. A user's own
    memory needs neither."""
    if owner.is_scope:
        now = iso(rt.clock.now())
        rt.table.note_writer(owner.id, writer, now)
        rt.table.mark_consolidation_due(owner, now, rt.settings.due_shards)


# -- memberships: an operator's ----------------------------------------------------------


def set_member(rt: Runtime, scope_text: str, user: User, role: object) -> dict[str, str]:
    """Grant ``user`` ``role`` in a shared scope (replacing a role they had)."""
    scope = shared_scope(scope_text)
    if role not in ROLES:
        raise ValidationFailedError("role must be 'member' or 'maintainer'")
    at = iso(rt.clock.now())
    rt.table.put_member(str(scope), user, role, at)
    return {"scope": str(scope), "user_id": user.id, "role": str(role), "added_at": at}


def remove_member(rt: Runtime, scope_text: str, user: User) -> dict[str, object]:
    """Take ``user`` out of a shared scope; 404 when they were not a member. Their next
    request that binds the scope is refused (every door resolves again)."""
    scope = shared_scope(scope_text)
    if not rt.table.delete_member(str(scope), user):
        raise NotFoundError(f"{user.id} is not a member of {scope}")
    return {"scope": str(scope), "user_id": user.id, "removed": True}


def _view(member: Member) -> dict[str, str]:
    return {"user_id": member.user_id, "role": member.role, "added_at": member.added_at}


def list_members(rt: Runtime, scope_text: str) -> dict[str, object]:
    scope = shared_scope(scope_text)
    members = sorted(rt.table.list_members(str(scope)), key=lambda m: m.user_id)
    return {"scope": str(scope), "members": [_view(m) for m in members]}


def list_scopes(rt: Runtime) -> dict[str, object]:
    """Every shared scope that has had a member, with its members' count by role."""
    out = []
    for name in sorted(rt.table.list_scopes()):
        members = rt.table.list_members(name)
        counts = {r: sum(1 for m in members if m.role == r) for r in ROLES}
        out.append({"scope": name, "members": len(members), "roles": counts})
    return {"scopes": out}
