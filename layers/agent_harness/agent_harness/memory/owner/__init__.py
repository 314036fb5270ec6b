"""The owner of a memory (a user's, or a shared scope's): one object, ``Memory``, through
which every write of its MEMORY.md, ledgers, review queue and derived indexes passes.
Its storage verbs are ``writes.Writes`` (the only code that writes those files:
tests/unit/test_memory_writers.py); above them, the pipelines of every write people,
agents and the memory jobs make, each in one order:

    save(lines, authority=...)      new lines (the API's and MCP's save, the agent's
                                    memory_save, a maintainer's promotion into a scope):
                                    gate -> capacity -> MEMORY.md -> review hold -> the
                                    day's ledger -> index
    replace(content, authority=...) a person's MEMORY.md (an edit, a rollback): gate
                                    (lines the replaced version held keep their label) ->
                                    capacity -> MEMORY.md (conditional) -> review hold ->
                                    index
    add_approved(lines, ...)        lines a person approved from the review queue:
                                    capacity -> MEMORY.md (what it lacks) -> the day's
                                    ledger -> index
    record(candidates, day, source) a flush's facts (memory.jobs.flush): gate (each on
                                    its text, its marks re-attached) -> review hold -> the
                                    day's ledger (CAS; nothing once the turns are covered)
    merge(document, current, ...)   a consolidation's MEMORY.md, or its stale lines
                                    dropped (memory.jobs.consolidate): MEMORY.md
                                    (conditional; a 412 is the caller's to re-merge) ->
                                    review hold of what its gate held
    note(day, build)                a re-check's or a second look's records
                                    (memory.jobs.recheck, memory.jobs.second_look, each
                                    gating its own and dropping what is held): the day's
                                    ledger
    screen(text, authority=...)     a correction's text (memory.facts.corrections): gate
                                    -> review hold (the caller then writes nothing)
    retire(day, build)              a correction's record: the day's ledger -> vectors,
                                    at once (a retired fact's vector is personal data)
    propose(held, ...)              lines for a person's decision only (a member's
                                    promotion, a correction an exposed turn proposed):
                                    review hold

The label is where the words came from (``authority``, the caller's: who wrote them,
never word overlap); spend is the caller's (a save counts under the day's imports
budget before it reaches here). Index: a user's write outside a turn queues an index
job (its vectors, derived off the request path: memory.jobs.index; a scope's memory is
indexed by its consolidation); a turn's own writes and its flush's record are indexed
by its post-turn job (``index=False``), a consolidation's merge and notes at its end.
Retention (memory.jobs.maintenance: ``append_archive``, ``drop_ledger``) and forgetting
(memory.jobs.forget: ``purge``, ``scrub``, ``drop_versions``) move and erase files
through the storage verbs, on ``Memory`` too; only the derived indexes and the review
queue's own file format construct ``Writes`` (tests/unit/test_memory_writers.py).
Because every write of a memory is one of these, what must follow any write (a derived
index, a vector, an export's digest) has one place to hang.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.errors import MemoryFullError
from agent_harness.memory.owner.writes import Writes

if TYPE_CHECKING:
    from datetime import datetime

    from agent_harness.memory.facts.gate import Admitted, Candidate, Held, Policy
    from agent_harness.memory.facts.ledger import Source
    from agent_harness.memory.facts.lifecycle import Marks
    from agent_harness.memory.review_queue import ReviewItem
    from agent_harness.ports import AppendBuilder, StoredObject

__all__ = ["Memory", "Writes"]

logger = Logger(child=True)
metrics = Metrics()


class Memory(Writes):
    """``owner``'s memory: its storage verbs (``Writes``) and the pipelines above them."""

    def save(
        self,
        lines: list[str],
        *,
        authority: str,
        provenance: str,
        at: datetime,
        writer: str = "memory_save",
        index: bool = True,
    ) -> Admitted:
        """New lines as ``authority``'s: what the gate holds goes to the review queue,
        the rest is appended to MEMORY.md and recorded as a ``## Memory Save`` section
        in the ledger of ``at``'s day, both by compare-and-swap (a consolidation running
        at the same time re-merges onto the new MEMORY.md). MemoryFullError, and nothing
        written, when MEMORY.md has no room (``HARNESS_MAX_MEMORY_CHARS``)."""
        # the gate loads with the first write, not with every handler that can write
        from agent_harness.memory.facts.gate import Candidate, Policy, admit
        from agent_harness.memory.facts.ledger import day_of, render_section, source_fields

        admitted = admit(
            [Candidate(line, authority) for line in lines], Policy.of(self.rt.settings)
        )
        day = day_of(at, self.rt.settings.zone)
        if admitted.lines:  # first: a save MEMORY.md has no room for writes nothing
            block = "\n".join(admitted.lines) + "\n"
            self.append_memory(lambda existing: self._room(existing, block), writer=writer)
        self._hold(
            admitted.held,
            source=source_fields(provenance) or provenance,
            writer="memory_save",
            day=day,
        )
        if admitted.lines:
            section = render_section(
                "Memory Save", at, self.rt.settings.zone, admitted.lines, provenance
            )
            self.append_ledger(day, lambda existing: section)
            if index:
                self._index()
        return admitted

    def replace(
        self,
        content: str,
        *,
        current: str,
        etag: str | None,
        authority: str,
        writer: str,
        by: str,
        via: str,
        what: str = "MEMORY.md with its authority tags",
    ) -> tuple[str, str, int]:
        """MEMORY.md as a person (``by``) wrote it, in place of the version ``etag``
        names (None: created; 412 when another was written since): lines ``current``
        (that version) held keep their labels, every other line is ``authority``'s; what
        the gate holds goes to the review queue (``via``: the write's name there).
        ``writer`` is recorded on the new version. MemoryFullError (``what``), and
        nothing written, when the tagged document passes the cap. Returns the document,
        its ETag and how many lines were held."""
        from agent_harness.memory.facts.gate import Policy, admit_document
        from agent_harness.memory.facts.ledger import day_of

        document, admitted = admit_document(
            content,
            previous=current,
            assign=lambda _: authority,
            policy=Policy.of(self.rt.settings),
        )
        limit = self.rt.settings.max_memory_chars
        if len(document) > limit:
            raise MemoryFullError(len(document), limit, what)
        new_etag = self.replace_memory(document, etag=etag, writer=writer)
        day = day_of(self.rt.clock.now(), self.rt.settings.zone)
        self._hold(admitted.held, source=f"{by} via={via}", writer=via, day=day)
        self._index()
        return document, new_etag, len(admitted.held)

    def add_approved(self, lines: list[str], *, source: str, writer: str) -> None:
        """Lines a person approved: appended to MEMORY.md (those it does not hold yet,
        within the cap) and recorded as a ``## Review`` section of today's ledger."""
        from agent_harness.memory.facts.ledger import day_of, render_section

        if not lines:
            return
        at = self.rt.clock.now()

        def missing(existing: str) -> str:
            have = set(existing.splitlines())
            block = "".join(f"{line}\n" for line in lines if line not in have)
            return self._room(existing, block, gap=False) if block else ""

        self.append_memory(missing, writer=writer)
        section = render_section("Review", at, self.rt.settings.zone, lines, source)
        self.append_ledger(day_of(at, self.rt.settings.zone), lambda existing: section)
        self._index()

    def record(self, candidates: list[tuple[Candidate, Marks]], *, day: str, source: Source) -> int:
        """A flush's facts of ``source``'s turns, for the ledger of ``day``: each
        through the gate on its text alone (its checked marks re-attached), what the gate
        holds queued for review, then a ``## Flush`` section of the lines the ledger does
        not hold yet (CAS append), re-checked after every lost race: nothing when these
        turns are covered by then (a concurrent duplicate landed). Returns the lines
        written."""
        from agent_harness.memory.facts.gate import Policy
        from agent_harness.memory.facts.ledger import covered_turns, new_facts, render_section
        from agent_harness.memory.facts.lifecycle import strip_marks

        settings = self.rt.settings
        admitted = _admit_marked(candidates, Policy.of(settings))
        for name, count in admitted.counts.items():
            if count:
                metrics.add_metric(f"FlushCheck_{name}", MetricUnit.Count, count)
        if admitted.held or admitted.counts["secrets"]:
            logger.warning("the gate changed facts", extra=dict(admitted.counts))

        # held lines first: a retry after a failed append finds them queued (by id), while
        # a retry after the ledger append skips these turns altogether
        self._hold(admitted.held, source=source.fields(), writer="flush", day=day)
        bullets = admitted.lines
        if not bullets:
            return 0
        turns = set(source.turns)
        written: list[str] = []

        def build(existing: str) -> str | None:
            # re-checked after every lost race: a concurrent duplicate may have landed
            if covered_turns(existing, source.session_id) & turns:
                return None
            written[:] = new_facts(bullets, existing, words=strip_marks)
            if not written:
                return None
            now = self.rt.clock.now()
            return render_section("Flush", now, settings.zone, written, source.render())

        return len(written) if self.append_ledger(day, build) else 0

    def merge(
        self,
        document: str,
        *,
        current: StoredObject | None,
        writer: str,
        held: list[Held] | None = None,
        source: str = "",
    ) -> bool:
        """A consolidation's MEMORY.md (its merge, or its lines restating a retired fact
        dropped) in place of ``current``, the version it was made from (None: created):
        412, and nothing held, when another was written since (the caller merges again
        onto it). The same text (whitespace aside) writes nothing. Then what its gate
        ``held`` goes to the review queue (``source``: the consolidation's). Returns
        whether MEMORY.md was written."""
        from agent_harness.memory.facts.ledger import day_of

        before = current.content if current is not None else ""
        changed = document.strip() != before.strip()
        if changed:
            etag = current.etag if current is not None else None
            self.replace_memory(document, etag=etag, writer=writer)
        if held:
            day = day_of(self.rt.clock.now(), self.rt.settings.zone)
            self._hold(held, source=source, writer="consolidation", day=day)
        return changed

    def note(self, day: str, build: AppendBuilder) -> str | None:
        """A job's records (a re-check's, a second look's) in the ledger of ``day``: what
        ``build`` adds (CAS append; None: nothing added). Each job gates its records
        itself and drops what the gate holds (the fact stays as it was); the
        consolidation running them refreshes the vectors after."""
        return self.append_ledger(day, build)

    def screen(
        self, text: str, *, authority: str, source: str, writer: str
    ) -> tuple[Admitted, list[ReviewItem]]:
        """``text`` through the gate as ``authority``'s, before a write that depends on
        what passes (a correction's record names it): what the gate holds is queued for
        review (``writer``, ``source``: the write's), and then the caller writes nothing.
        Returns what the gate admitted and held, and the review items."""
        from agent_harness.memory.facts.gate import Candidate, Policy, admit
        from agent_harness.memory.facts.ledger import day_of

        admitted = admit([Candidate(text, authority)], Policy.of(self.rt.settings))
        if not admitted.held:
            return admitted, []
        day = day_of(self.rt.clock.now(), self.rt.settings.zone)
        return admitted, self._hold(admitted.held, source=source, writer=writer, day=day)

    def retire(self, day: str, build: AppendBuilder) -> None:
        """A correction's record in the ledger of ``day`` (CAS append: ``build``
        re-checks the fact is still current on every attempt), then the memory's vectors
        refreshed at once, not by a later job: a retired fact's vector is personal data,
        and it goes now."""
        from agent_harness.memory.vectors import refresh_best_effort

        self.append_ledger(day, build)
        refresh_best_effort(self.rt, self.owner, limit=0)

    def propose(self, held: list[Held], *, source: str, writer: str, day: str) -> list[ReviewItem]:
        """Lines for a person's decision only (a member's promotion into a scope, a
        correction an exposed turn proposed): queued for review, nothing written to
        memory until a person approves them. An item already queued is not queued twice;
        the items, as held."""
        return self._hold(held, source=source, writer=writer, day=day)

    def _room(self, existing: str, block: str, *, gap: bool = True) -> str:
        """``block`` as appended to MEMORY.md (``existing``), after a blank line
        (``gap``), within the cap."""
        from agent_harness.memory.capacity import within_cap

        joint = ("\n" if existing and not existing.endswith("\n") else "") + (
            "\n" if existing and gap else ""
        )
        return within_cap(self.rt, existing, joint + block)

    def _hold(self, held: list[Held], *, source: str, writer: str, day: str) -> list[ReviewItem]:
        from agent_harness.memory.review_queue import hold

        return hold(self.rt, self.owner, held, source=source, writer=writer, day=day)

    def _index(self) -> None:
        from agent_harness.memory.jobs.index import index_later

        index_later(self.rt, self.owner)


def _admit_marked(candidates: list[tuple[Candidate, Marks]], policy: Policy) -> Admitted:
    """Each candidate through the gate on its text alone, then its checked marks
    re-attached to the line admitted (``render_marks``)."""
    from agent_harness.memory.facts.authority import parse_fact
    from agent_harness.memory.facts.gate import Admitted, admit
    from agent_harness.memory.facts.lifecycle import render_marks

    out = Admitted()
    for candidate, marks in candidates:
        one = admit([candidate], policy)
        out.held += one.held
        out.counts.update(one.counts)
        for line in one.lines:
            fact = parse_fact(line)
            if fact is None or fact.authority is None:
                out.lines.append(line)
            else:
                out.lines.append(f"- [{fact.authority}] {render_marks(fact.text, marks)}")
    return out
