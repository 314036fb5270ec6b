"""Corrections: a person, the user or an agent says a remembered fact is wrong, and the
ledger records it. One section is appended to today's ledger, its record line naming the
fact it retires (memory.facts.lifecycle owns the marks):

    ## Correction — 2026-12-02T10:04:00Z
    > source: api via=supersede
    - [operator] The user lives in Berlin. (supersedes 2026-11-02.3f9a0c1d)

    ## Correction — 2026-12-02T10:05:00Z
    > source: session=s1 turns=4 via=memory_correct
    - [user] (retracts 2026-11-02.77aa01bc) corrected: no longer true

The rules, for every caller (HTTP, MCP, the agent's tool, the CLI, the console):

    unknown or malformed id          404 fact_not_found (another user's id is unknown)
    already retired, or a record     409 fact_not_current, naming its state and by what
    the fact ranks above the caller  403 authority_too_low (memory.facts.authority.rank):
                                     a tool's or an agent's claim never retires what the
                                     user said or an operator wrote
    the gate holds the new text      422 correction_held: the text is queued for review
                                     as a save's would be, and nothing is retired (an
                                     approved item becomes an operator's fact; the person
                                     then corrects again, with its text)
    text over HARNESS_MAX_MESSAGE_CHARS  413 payload_too_large

The new text (or a retraction's reason) passes the same gate as saves, then the marks
are added: no saved or edited text can claim one (the gate strips them). A record's id
hashes its words and the facts it retracts, so two retractions with the same reason are
two records; a correction to words the day already holds (a fact written today) retracts
the fact and names the one that states them, since a day never holds one id twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent_harness.errors import (
    ConflictError,
    ForbiddenError,
    NotFoundError,
    PayloadTooLargeError,
    ValidationFailedError,
)
from agent_harness.memory.facts.authority import fact_line, parse_fact, rank, strip_tags
from agent_harness.memory.facts.ledger import day_of, render_section, saved_by, source_fields
from agent_harness.memory.facts.lifecycle import (
    FACT_ID,
    Marks,
    ledger_fact_id,
    lifecycle_of,
    render_marks,
    split_marks,
)
from agent_harness.memory.owner import Memory
from agent_harness.paths import LEDGER_DIR, archive_day, ledger_day

if TYPE_CHECKING:
    from agent_harness.ids import User
    from agent_harness.memory.facts.lifecycle import LedgerFact, Lifecycle, State
    from agent_harness.runtime import Runtime

__all__ = [
    "CORRECTION",
    "DEFAULT_REASON",
    "AuthorityTooLowError",
    "Correction",
    "CorrectionHeldError",
    "FactNotCurrentError",
    "FactNotFoundError",
    "apply_proposal",
    "check_correction",
    "check_length",
    "correct_fact",
    "fact_view",
    "find_fact",
    "propose_correction",
    "read_ledgers",
    "who_may_retire",
]

DEFAULT_REASON = "corrected: no longer true"
#: the review reason of a proposed correction (an exposed turn's, agent.exposure)
CORRECTION = "correction"


class FactNotFoundError(NotFoundError):
    code = "fact_not_found"


class FactNotCurrentError(ConflictError):
    code = "fact_not_current"


class AuthorityTooLowError(ForbiddenError):
    code = "authority_too_low"


class CorrectionHeldError(ValidationFailedError):
    code = "correction_held"


@dataclass(frozen=True)
class Correction:
    id: str  # the new record's id
    retired: str  # the fact it retires
    state: State  # "superseded" or "retracted"
    line: str  # the record line, as written
    day: str  # the ledger it was written to


def read_ledgers(rt: Runtime, user: User) -> dict[str, str]:
    """Every ledger of the user, active and archived, by day (one LIST, one GET each;
    a day both active and archived reads the active one)."""
    paths: dict[str, str] = {}
    for info in rt.store.list(user, LEDGER_DIR):
        day = ledger_day(info.path) or archive_day(info.path)
        if day and (day not in paths or ledger_day(info.path)):
            paths[day] = info.path
    got = rt.store.get_many(user, list(paths.values()))
    return {day: got[path].content for day, path in sorted(paths.items()) if path in got}


def find_fact(rt: Runtime, user: User, fact_id: str) -> tuple[LedgerFact, Lifecycle]:
    """The fact ``fact_id`` of the user's ledgers, and the lifecycle it stands in."""
    if not isinstance(fact_id, str) or FACT_ID.fullmatch(fact_id) is None:
        raise FactNotFoundError("a fact id reads YYYY-MM-DD.<8 hex digits>, as search hits show")
    # the fact's own day, and every day a change is on or names: its whole story
    life = lifecycle_of(read_ledgers(rt, user), whole=False, also=[fact_id[:10]])
    fact = life.facts.get(fact_id)
    if fact is None:
        raise FactNotFoundError(f"no fact {fact_id} in memory")
    return fact, life


def _brief(fact: LedgerFact, life: Lifecycle) -> dict[str, Any]:
    status = life.status[fact.id]
    return {
        "id": fact.id,
        "text": fact.text,
        "authority": fact.authority,
        "day": fact.day,
        "recorded": fact.recorded,
        "state": status.state,
        "by": status.by,
        "at": status.at,
    }


def fact_view(fact: LedgerFact, life: Lifecycle) -> dict[str, Any]:
    """GET /v1/memory/facts/{id}: the fact, where it stands, and its story."""
    status = life.status[fact.id]
    return {
        **_brief(fact, life),
        "line": fact.line,
        "valid_from": fact.marks.valid_from,
        "until": fact.marks.until,
        "depends": list(fact.marks.depends),
        "recheck": list(status.recheck),
        "history": [_brief(f, life) for f in life.history(fact.id)],
    }


def who_may_retire(authority: str | None) -> str:
    """Who may supersede or retract a fact of ``authority``, in words."""
    if authority == "operator":
        return "only an operator (POST /v1/memory/facts/{id}/supersede, the console, the CLI)"
    if authority in ("user", "import"):
        return (
            "only the user's own words or an operator "
            "(POST /v1/memory/facts/{id}/supersede, the console, the CLI)"
        )
    return f"an authority ranked at least as {authority or 'untagged'}"


def check_correction(fact: LedgerFact, life: Lifecycle, authority: str) -> None:
    """Raise unless ``authority`` may retire ``fact`` now (409, 403: see the module)."""
    status = life.status[fact.id]
    if fact.is_record:
        raise FactNotCurrentError(
            f"{fact.id} is a record (a retraction or confirmation), not a fact to correct"
        )
    if status.state != "current":
        by = f" by {status.by}" if status.by else ""
        at = f" on {status.at}" if status.at else ""
        raise FactNotCurrentError(
            f"fact {fact.id} is {status.state}{by}{at}: correct the current one"
        )
    if rank(authority) < rank(fact.authority):
        who = who_may_retire(fact.authority).replace("{id}", fact.id)
        raise AuthorityTooLowError(
            f"fact {fact.id} is {fact.authority}'s, and a {authority} correction may retire only "
            f"facts of equal or lower authority: {who} can retire it"
        )


def _admitted_text(rt: Runtime, user: User, text: str, authority: str, source: str) -> str:
    """``text`` through the gate as ``authority``'s: the text to write (its tag aside);
    held lines go to the review queue (the owner's screen) and raise
    CorrectionHeldError."""
    admitted, items = Memory(rt, user).screen(
        text, authority=authority, source=source, writer="memory_correct"
    )
    if admitted.held:
        named = ", ".join(i.id for i in items) or "already queued"
        raise CorrectionHeldError(
            f"the correction was held for a person's review (review item {named}: "
            f"{admitted.held[0].reason}); nothing was retired",
            details={"review_items": [i.id for i in items]},
        )
    fact = parse_fact(admitted.lines[0]) if admitted.lines else None
    if fact is None or not fact.text.strip():
        raise ValidationFailedError("nothing of the text is left once it passes the memory gate")
    return fact.text


def _still_current(fact: LedgerFact, day: str, existing: str) -> None:
    """409 when ``existing`` (today's ledger as the append will replace it) holds a line
    that retires ``fact`` under the lifecycle's rule (a change of at least its rank):
    written by a concurrent correction, flush or review since the fact was read."""
    for line in existing.splitlines():
        parsed = parse_fact(line)
        if parsed is None or fact.id not in parsed.text:
            continue
        marks = split_marks(strip_tags(parsed.text))[1]
        if fact.id in marks.changes() and rank(parsed.authority) >= rank(fact.authority):
            retirer = ledger_fact_id(day, line)
            raise FactNotCurrentError(
                f"fact {fact.id} was retired by {retirer} while this correction was being "
                "made: correct the current one",
                details={"by": retirer},
            )


def _record(fact_id: str, body: str, by: bool, day: str, taken: set[str]) -> tuple[str, Marks]:
    """The record's text and marks: ``body`` superseding ``fact_id``, or retracting it
    (a record's id names the facts it retracts, so it is new whatever its why). A
    correction to words the day already holds retracts the fact and names them."""
    if by:
        existing = ledger_fact_id(day, body)
        if existing not in taken:
            return body, Marks(supersedes=(fact_id,))
        body = f"corrected: now stated as {existing}"
    return body, Marks(retracts=(fact_id,))


def correct_fact(
    rt: Runtime,
    user: User,
    fact_id: str,
    by: str | None,
    *,
    authority: str,
    writer: str,
    via: str,
    reason: str | None = None,
    provenance: str | None = None,
) -> Correction:
    """Supersede ``fact_id`` with the text ``by`` (None: retract it, for ``reason``), as
    ``authority``'s; the section's source names ``writer`` and ``via`` (or is
    ``provenance``, a ``> source:`` line naming turns). See the module for the rules."""
    check_length(rt, by, reason)
    if by is not None and not by.strip():
        raise ValidationFailedError("by: the corrected text must not be blank (omit it to retract)")
    fact, life = find_fact(rt, user, fact_id)
    check_correction(fact, life, authority)
    source = provenance or saved_by(writer, via)
    text = by if by is not None else ((reason or "").strip() or DEFAULT_REASON)
    body = _admitted_text(rt, user, text, authority, source_fields(source) or source)
    now = rt.clock.now()
    day = day_of(now, rt.settings.zone)
    if by is not None and ledger_fact_id(day, body) == fact_id:
        raise ValidationFailedError(f"the corrected text is the words of {fact_id} itself")
    written: list[Correction] = []

    def addition(existing: str) -> str:
        # re-checked on the ledger this append replaces (its CAS retries with the new
        # one): of two concurrent corrections of one fact exactly one retires it
        _still_current(fact, day, existing)
        taken = set(lifecycle_of({day: existing}).facts)
        record, marks = _record(fact_id, body, by is not None, day, taken)
        line = fact_line(authority, render_marks(record, marks))
        state: State = "superseded" if marks.supersedes else "retracted"
        written[:] = [Correction(ledger_fact_id(day, line), fact_id, state, line, day)]
        return render_section("Correction", now, rt.settings.zone, [line], source)

    Memory(rt, user).retire(day, addition)  # and the retired fact's vector goes now
    return written[0]


def check_length(rt: Runtime, *texts: str | None) -> None:
    """413 for a correction's text or reason over ``HARNESS_MAX_MESSAGE_CHARS``."""
    limit = rt.settings.max_message_chars
    if any(t is not None and len(t) > limit for t in texts):
        raise PayloadTooLargeError(f"a correction's text is limited to {limit} characters")


def propose_correction(
    rt: Runtime,
    user: User,
    fact_id: str,
    by: str | None,
    reason: str | None,
    authority: str,
    source: str,
) -> None:
    """Queue a correction for the user's review instead of applying it: the item reads
    as the record line would (``<text> (supersedes <id>)``, ``(retracts <id>) <why>``),
    with the authority of what proposed it; approving it applies it as the decider's
    (``apply_proposal``). Nothing is retired until then."""
    from agent_harness.memory.facts.gate import Held

    check_length(rt, by, reason)
    fact, _ = find_fact(rt, user, fact_id)
    if by is not None:
        text = render_marks(" ".join(by.split()), Marks(supersedes=(fact.id,)))
    else:
        why = " ".join((reason or "").split()) or DEFAULT_REASON
        text = render_marks(why, Marks(retracts=(fact.id,)))
    day = day_of(rt.clock.now(), rt.settings.zone)
    held = [Held(text, authority, CORRECTION)]
    Memory(rt, user).propose(held, source=source, writer="memory_correct", day=day)


def apply_proposal(rt: Runtime, user: User, text: str, authority: str) -> list[str]:
    """An approved proposal (``propose_correction``'s item text), applied as the person
    who approved it; the record line written."""
    body, marks = split_marks(text)
    if marks.supersedes:
        done = correct_fact(
            rt, user, marks.supersedes[0], body, authority=authority, writer=authority, via="review"
        )
    elif marks.retracts:
        done = correct_fact(
            rt,
            user,
            marks.retracts[0],
            None,
            authority=authority,
            writer=authority,
            via="review",
            reason=body,
        )
    else:
        raise ValidationFailedError("the review item names no fact to correct")
    return [done.line]
