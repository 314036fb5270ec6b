"""The owner of a memory (a user's, or a shared scope's): one object, ``Memory``, through
which every write of its MEMORY.md, ledgers, review queue and derived indexes passes.
Its storage verbs are ``writes.Writes`` (the only code that writes those files:
tests/unit/test_memory_writers.py); above them, the pipelines of the writes people and
agents make, each in one order:

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

The label is where the words came from (``authority``, the caller's: who wrote them,
never word overlap); spend is the caller's (a save counts under the day's imports
budget before it reaches here). Index: a user's write outside a turn queues an index
job (its vectors, derived off the request path: memory.jobs.index; a scope's memory is
indexed by its consolidation); a turn's own writes are indexed by its post-turn job
(``index=False``). The flush, consolidation, corrections and
forgetting run their own model- or person-driven pipelines (memory.jobs,
memory.facts.corrections) over the same storage verbs. Because every write of a memory
is one of these, what must follow any write (a derived index, a vector, an export's
digest) has one place to hang.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_harness.errors import MemoryFullError
from agent_harness.memory.owner.writes import Writes

if TYPE_CHECKING:
    from datetime import datetime

    from agent_harness.memory.facts.gate import Admitted, Held

__all__ = ["Memory", "Writes"]


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

    def _room(self, existing: str, block: str, *, gap: bool = True) -> str:
        """``block`` as appended to MEMORY.md (``existing``), after a blank line
        (``gap``), within the cap."""
        from agent_harness.memory.capacity import within_cap

        joint = ("\n" if existing and not existing.endswith("\n") else "") + (
            "\n" if existing and gap else ""
        )
        return within_cap(self.rt, existing, joint + block)

    def _hold(self, held: list[Held], *, source: str, writer: str, day: str) -> None:
        from agent_harness.memory.review_queue import hold

        hold(self.rt, self.owner, held, source=source, writer=writer, day=day)

    def _index(self) -> None:
        from agent_harness.memory.jobs.index import index_later

        index_later(self.rt, self.owner)
