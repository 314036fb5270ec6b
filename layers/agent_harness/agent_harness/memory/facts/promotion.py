"""Promotion: a member proposes facts of theirs for a shared scope's memory.

    member       every line goes to the scope's review queue (memory.review, the scope's
                 ``review/queue.jsonl``), reason ``promotion``, for a maintainer to
                 approve (written as ``operator``) or reject
    maintainer   the lines go through the gate as the door's save would (``save:<origin>``)
                 and are written at once; what the gate holds still goes to the queue

Each line keeps its provenance: the member (``by=<user key>``) and, from a session, its
session and turn (``session=s1 turns=4 via=memory_promote``); an approval keeps both in
the ledger's source line. The flush never writes a shared scope: this is the one way a
session's facts reach one. Checked before anything is written: the scope's grant (a
member at least: ``scopes.resolve``), non-blank lines within the size cap, the turns
named committed turns of the caller's own session, and the daily budget a save takes
(a member's promotion counts to the member, a maintainer's to the scope).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from agent_harness.errors import PayloadTooLargeError, ValidationFailedError
from agent_harness.memory.facts.gate import Held
from agent_harness.memory.facts.ledger import (
    SOURCE_PREFIX,
    Source,
    by_field,
    by_writer,
    day_of,
)

if TYPE_CHECKING:
    from agent_harness.ids import User
    from agent_harness.runtime import Runtime
    from agent_harness.scopes import Grant

__all__ = ["PROMOTION", "Promoted", "check_lines", "promote", "promoted_by", "propose"]

#: the reason a promoted line waits in a scope's review queue
PROMOTION = "promotion"
VIA = "memory_promote"


@dataclass(frozen=True)
class Promoted:
    scope: str
    #: lines written into the scope's memory (a maintainer's), and queued for review
    promoted: int
    queued: int
    #: the queue items, to approve or reject
    items: list[str]

    @property
    def status(self) -> Literal["promoted", "queued"]:
        return "queued" if self.queued and not self.promoted else "promoted"

    def view(self) -> dict[str, object]:
        return {
            "scope": self.scope,
            "status": self.status,
            "promoted": self.promoted,
            "queued": self.queued,
            "items": self.items,
        }


def promoted_by(caller: User, source: Source | None, origin: str) -> str:
    """The ``> source:`` fields of a promotion: its session and turns if it names them,
    else the door; the member who promoted, always."""
    fields = (
        Source(source.session_id, source.turns, via=VIA).fields()
        if source is not None
        else f"{origin} via={VIA}"
    )
    return f"{fields} {by_field(caller)}"


def check_lines(rt: Runtime, content: str) -> list[str]:
    """The lines to promote: non-blank, within the size cap of a save (413, 422)."""
    from agent_harness.memory.files import memory_lines

    limit = rt.settings.max_memory_chars
    if len(content) > limit:
        raise PayloadTooLargeError(f"content is limited to {limit} characters")
    lines = memory_lines(content)
    if not lines:
        raise ValidationFailedError("content must hold at least one fact")
    return lines


def promote(
    rt: Runtime,
    caller: User,
    grant: Grant,
    lines: list[str],
    *,
    source: Source | None,
    origin: str,
    authority: str | None = None,
    review: bool = False,
) -> Promoted:
    """Propose ``lines`` for ``grant``'s scope (the caller's read grant): queued for its
    maintainers' review, or, for a maintainer, written at once (``review``: queued
    anyway, as an agent's promotion from a turn that read untrusted text is).
    ``authority``: whose words they are (default ``save:<origin>``; the console's
    promotion keeps the line's own from the user's MEMORY.md)."""
    from agent_harness.import_budget import imports_admitted
    from agent_harness.memory.owner import Memory
    from agent_harness.scopes import note_writer

    scope = grant.owner
    fields = promoted_by(caller, source, origin)
    now = rt.clock.now()
    day = day_of(now, rt.settings.zone)
    authority = authority or f"save:{origin}"
    if grant.role != "maintainer" or review:
        held = [Held(line, authority, PROMOTION) for line in lines]
        # under the member's own daily budget, as a save is: no member floods the queue
        with imports_admitted(rt, caller, 1, "memory promotion"):
            note_writer(rt, caller, scope)
            items = Memory(rt, scope).propose(held, source=fields, writer=VIA, day=day)
        return Promoted(str(grant.scope), 0, len(items), [i.id for i in items])
    # a maintainer's: written now, under the scope's daily budget as a save is
    rt.listings.forget(scope.key)  # this container's bound sessions see it next turn

    with imports_admitted(rt, scope, 1, "memory promotion"):
        note_writer(rt, caller, scope)
        admitted = Memory(rt, scope).save(
            lines,
            authority=authority,
            provenance=f"{SOURCE_PREFIX} {fields}",
            at=now,
            writer=f"{origin}: {VIA} {by_writer(caller)}",
        )
    return Promoted(str(grant.scope), len(admitted.lines), len(admitted.held), [])


def propose(
    rt: Runtime,
    caller: User,
    grant: Grant,
    content: str,
    *,
    origin: str,
    session_id: str | None = None,
    turns: list[int] | None = None,
) -> Promoted:
    """``POST /v1/memory/promote`` and the MCP tool: everything checked first (a shared
    scope, the lines, the turns named committed turns of the caller's session), then
    ``promote``."""
    from agent_harness.ids import validate_session_id
    from agent_harness.memory.files import save_source

    if not grant.scope.shared:
        raise ValidationFailedError(
            "promote into a shared scope: project:<name>, agent:<name> or org"
        )
    lines = check_lines(rt, content)
    source = None
    if session_id is not None:
        session_id = validate_session_id(session_id, rt.settings.max_session_id_chars)
        save_source(rt, caller, session_id, turns or [])
        source = Source(session_id, tuple(sorted(set(turns or []))))
    return promote(rt, caller, grant, lines, source=source, origin=origin)
