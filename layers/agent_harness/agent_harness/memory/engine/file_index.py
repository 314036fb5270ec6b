"""One file's records indexed for search: lines, BM25 postings, neighbours and links.

Built once per file version (``memory.engine.cache`` keeps it by ETag), its postings on the
first ranked query; or restored from a ranked-index snapshot (``export``/``restore``,
the format in ``memory.engine.snapshots``), whose postings stay one text until a query asks
for a term. ``memory.engine.index`` ranks over these.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple

from agent_harness.memory.facts.ledger import SOURCE_PREFIX, is_heading, is_structure, parse_source
from agent_harness.text import fold, terms

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

__all__ = ["CONTEXT_WEIGHT", "Exported", "FileIndex", "Links", "Turns", "pack", "unpack"]

#: how much a neighbouring line's terms count towards a line's score (0 turns it off)
CONTEXT_WEIGHT = 0.4
_TF_BITS = 10
_TF_MAX = (1 << _TF_BITS) - 1
#: sorts after any turns tuple: (n, _LAST) bisects past every section starting at n
_LAST = (("\U0010ffff", 0),)


#: the (session, turn) pairs a record is linked to
Turns = tuple[tuple[str, int], ...]


class Links(NamedTuple):
    """Each record's turn, as two columns: a thread segment's messages. Not a tuple per
    record: a cold query restores tens of thousands, which the collector would walk."""

    sessions: list[str]
    turns: list[int]

    def key(self, number: int) -> tuple[str, int]:
        return (self.sessions[number], self.turns[number])

    def keys(self) -> Iterator[tuple[str, int]]:
        return zip(self.sessions, self.turns, strict=True)


class Exported(NamedTuple):
    """What ``FileIndex.restore`` needs besides the lines (the persisted index)."""

    own: Sequence[int]
    before: Sequence[int]
    after: Sequence[int]
    #: every term's postings as text: "|term:packed packed ...|..." (``pack``), so a
    #: restored index finds a term with one string search instead of building a dict
    postings: str
    #: a Markdown file's section starts as JSON: [[first line, [[session, turn], ...]], ...]
    sections: str


@dataclass
class FileIndex:
    """One file's lines (folded on first use), indexed once per ETag; its BM25 postings
    are built on the first ranked query and kept with it, or restored from a snapshot
    (``export``/``restore``: the persisted index, memory.engine.snapshots)."""

    #: the lines (never holding a newline); None: a restored index's, still ``_joined``
    _lines: list[str] | None
    size: int = 0
    #: records whose neighbours give context share a group; None: blocks of a Markdown
    #: file (lines between headings, provenance lines and blank lines)
    groups: list[str] | None = field(default=None, repr=False)
    #: term -> packed (line << _TF_BITS | count): plain ints, which the garbage collector
    #: does not track (a tuple per posting made its passes half the cost of a first query)
    _postings: dict[str, list[int]] | None = field(default=None, repr=False)
    #: a restored index's postings as ``pack`` wrote them, decoded per term on first use
    _packed: str | None = field(default=None, repr=False)
    #: ranking-only words of each record (its date); never shown, never matched literally
    fields: list[str] | None = field(default=None, repr=False)
    _folded: list[str] | None = field(default=None, repr=False)
    #: each record's length with context; None until first asked (``_measure``)
    _lengths: list[float] | None = field(default=None, repr=False)
    _records: int = field(default=0, repr=False)
    _length_sum: float = field(default=0.0, repr=False)
    #: (a restored index's: arrays, as the snapshot stores them)
    _before: Sequence[int] = field(default_factory=list, repr=False)
    _after: Sequence[int] = field(default_factory=list, repr=False)
    #: each record's own term count (without context)
    _own: Sequence[int] = field(default_factory=list, repr=False)
    #: each record's turns, given (a thread record: its own turn); None: a Markdown
    #: file's records take the turns their section's source line names
    links: Links | None = field(default=None, repr=False)
    #: the records linked to turns, with their turns (``linked_groups``, on first use)
    _groups: list[tuple[list[int], Turns]] | None = field(default=None, repr=False)
    _sections: list[tuple[int, Turns]] | None = field(default=None, repr=False)
    #: what other modules derive from the lines, kept with the index (per ETag) so a
    #: warm query does not derive it again (memory.engine.vectors: each line's key)
    memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _sections_json: str | None = field(default=None, repr=False)
    _link_counts: list[int] = field(default_factory=list, repr=False)
    #: ranking's split of long sections by the turns their records align with
    #: (``memory.engine.alignment``), per (section's first record, its settings)
    #: (each part: its records and the slice [from, to) of the section's turns)
    aligned: dict[tuple[int, int, int], list[tuple[list[int], int, int]]] = field(
        default_factory=dict, repr=False
    )
    #: a restored index's lines joined by newlines (as a snapshot keeps them), split on
    #: first use: ranking needs only the lines of its hits
    _joined: str = field(default="", repr=False)

    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = self._joined.split("\n") if self._own else []
        return self._lines

    @classmethod
    def build(cls, text: str, field_words: str = "") -> FileIndex:
        """A Markdown file; ``field_words`` (its day, as words) ranks with every line."""
        lines = text.split("\n")
        fields = [field_words] * len(lines) if field_words else None
        return cls.from_lines(lines, len(text), fields=fields)

    @classmethod
    def from_lines(
        cls,
        lines: list[str],
        size: int,
        groups: list[str] | None = None,
        fields: list[str] | None = None,
        links: Links | None = None,
    ) -> FileIndex:
        return cls(lines, size, groups=groups, fields=fields, links=links)

    @property
    def folded(self) -> list[str]:
        """The lines case-folded: for phrase/all/any, and to build postings (a restored
        index never folds them for ranked)."""
        if self._folded is None:
            self._folded = [fold(line) for line in self.lines]
        return self._folded

    def export(self) -> Exported:
        """What ``restore`` needs besides the lines: each record's own term count, its
        neighbours, the postings, and (a Markdown file) where its sections start."""
        postings = self._ranking()
        packed = self._packed if self._packed is not None else pack(postings)
        # a flushed session's sections name the same turns: each list is written once,
        # later sections refer to the first one that named it
        sections: list[tuple[int, Turns | int]] = []
        first: dict[Turns, int] = {}
        for number, (start, turns) in enumerate(
            self._section_starts() if self.links is None else []
        ):
            earlier = first.setdefault(turns, number) if turns else number
            sections.append((start, turns if earlier == number else earlier))
        text = json.dumps(sections, ensure_ascii=False, separators=(",", ":"))
        return Exported(self._own, self._before, self._after, packed, text)

    @classmethod
    def restore(
        cls,
        joined: str,
        size: int,
        exported: Exported,
        links: Links | None = None,
    ) -> FileIndex:
        """An index ranked search can use at once: ``exported`` from ``export``, and
        ``joined`` its lines joined by newlines (split, and each term's postings decoded,
        when first needed). Raises ValueError if they do not make one line per record."""
        count = len(exported.own)
        if joined.count("\n") + 1 != count and (count or joined):
            raise ValueError("the lines do not match the index")
        made = cls(None, size, links=links, _joined=joined)
        made._own, made._before, made._after = exported.own, exported.before, exported.after
        made._postings, made._packed = {}, exported.postings
        made._sections_json = exported.sections if links is None else None
        return made

    def _measure(self) -> list[float]:
        """Each record's length with its neighbours as context, and the totals: on first
        use (a thread segment restored for ranked memory_search is never measured)."""
        self._ranking()
        if self._lengths is not None:
            return self._lengths
        own = self._own
        padded = [*own, 0]  # a missing neighbour (-1) reads the 0 at the end
        lengths = [
            o + CONTEXT_WEIGHT * (padded[b] + padded[a]) if o else 0.0
            for o, b, a in zip(own, self._before, self._after, strict=True)
        ]
        self._records = len(own) - own.count(0)
        self._length_sum = sum(lengths)
        self._lengths = lengths  # last: another thread reading it finds the totals set
        return lengths

    def _ranking(self) -> dict[str, list[int]]:
        """Built on the first ranked query: each record's own term postings, its
        neighbours (the records next to it in its group) and its length with context."""
        if self._postings is None:
            postings: dict[str, list[int]] = {}
            own: list[int] = []
            # a record's neighbours: the previous and next record of its group (-1: none);
            # flat int lists, not a list per record, to keep the collector's passes short
            before = [-1] * len(self.lines)
            after = [-1] * len(self.lines)
            last: dict[str, int] = {}
            block = 0
            for number, line in enumerate(self.lines):
                if self.groups is None and (is_structure(line) or not line.strip()):
                    block += 1
                    own.append(0)
                    continue
                counts = Counter(terms(_untagged(self.folded[number]), folded=True))
                if counts and self.fields and self.fields[number]:
                    counts.update(field_terms(self.fields[number]))
                own.append(sum(counts.values()))
                for term, tf in counts.items():
                    packed = number << _TF_BITS | min(tf, _TF_MAX)
                    postings.setdefault(term, []).append(packed)
                if not counts:
                    continue
                group = str(block) if self.groups is None else self.groups[number]
                previous = last.get(group, -1)
                if previous >= 0:
                    before[number], after[previous] = previous, number
                last[group] = number
            self._own, self._before, self._after = own, before, after
            self._postings = postings
        return self._postings

    def _posting(self, term: str) -> list[int]:
        """The packed postings of ``term`` (a restored index's decoded now, once)."""
        postings = self._ranking()
        found = postings.get(term)
        if found is None and self._packed is not None:
            found = postings[term] = unpack(self._packed, term)
        return found or []

    def _section_starts(self) -> list[tuple[int, Turns]]:
        """Where a Markdown file's sections start: after a heading (no turns) and after a
        source line naming turns (those turns)."""
        if self._sections is None and self._sections_json is not None:
            try:  # a restored index: as the snapshot has them (lists made tuples)
                self._sections = _restored_sections(json.loads(self._sections_json))
            except (TypeError, ValueError, IndexError):
                self._sections_json = None  # damaged: read them from the lines
        if self._sections is None:
            starts: list[tuple[int, Turns]] = []
            same: dict[Turns, Turns] = {}  # one object for the same turns: see _join
            for number, line in enumerate(self.lines):
                if is_heading(line):
                    starts.append((number + 1, ()))
                elif line.startswith(SOURCE_PREFIX) and (source := parse_source(line)):
                    turns = tuple((source.session_id, t) for t in source.turns)
                    starts.append((number + 1, same.setdefault(turns, turns)))
            self._sections = starts
        return self._sections

    def linked_groups(self) -> list[tuple[list[int], Turns]]:
        """The records linked to turns, in groups that share their turns: each section
        whose source names turns (its records, those turns), or each turn of a thread
        segment (its messages, that turn). Built on first use: only ranking with linked
        texts needs it."""
        if self._groups is None:
            own = self.own_lengths()
            groups: list[tuple[list[int], Turns]] = []
            if self.links is not None:
                by_turn: dict[tuple[str, int], list[int]] = {}
                for number, link in enumerate(self.links.keys()):
                    if own[number]:
                        by_turn.setdefault(link, []).append(number)
                groups = [(records, (key,)) for key, records in by_turn.items()]
            else:
                starts = self._section_starts()
                ends = [start for start, _ in starts[1:]] + [len(own)] * bool(starts)
                counts = [0] * len(own)
                for (start, turns), end in zip(starts, ends, strict=True):
                    records = [n for n in range(start, end) if own[n]] if turns else []
                    if records:
                        groups.append((records, turns))
                        counts[start:end] = [len(turns)] * (end - start)
                self._link_counts = counts
            self._groups = groups  # last: another thread reading it finds the counts set
        return self._groups

    def link_counts(self) -> list[int] | None:
        """How many turns each record is linked to (None: one each, a thread record)."""
        if self.links is not None:
            return None
        self.linked_groups()
        return self._link_counts

    def own_lengths(self) -> Sequence[int]:
        """Each record's own term count (0: structure, blank, or no words)."""
        self._ranking()
        return self._own

    def own_terms(self, term: str) -> list[tuple[int, int]]:
        """(record, count) of the records holding ``term`` themselves (no context)."""
        return [(p >> _TF_BITS, p & _TF_MAX) for p in self._posting(term)]

    def keys_of(self, number: int) -> Turns:
        """The turns record ``number`` is linked to (a Markdown file's: those of the last
        section start at or before it)."""
        if self.links is not None:
            return (self.links.key(number),)
        starts = self._section_starts()
        found = bisect_right(starts, (number, _LAST)) - 1
        return starts[found][1] if found >= 0 else ()

    @property
    def lengths(self) -> list[float]:
        return self._measure()

    def totals(self) -> tuple[int, float]:
        """How many records rank (not structure, not empty) and their summed length."""
        self._measure()
        return self._records, self._length_sum

    def weights(self, term: str) -> dict[int, float]:
        """Records holding ``term`` with their weight: its count in the record plus
        ``CONTEXT_WEIGHT`` times its count in each neighbour."""
        out: dict[int, float] = {}
        self._ranking()
        for packed in self._posting(term):
            number, tf = packed >> _TF_BITS, packed & _TF_MAX
            out[number] = out.get(number, 0.0) + tf
            if CONTEXT_WEIGHT:
                for other in (self._before[number], self._after[number]):
                    if other >= 0:
                        out[other] = out.get(other, 0.0) + CONTEXT_WEIGHT * tf
        return out


#: a fact line's authority tag (memory.facts.authority), which says who, not what
_TAG = re.compile(r"^\s*[-*+•]\s+\[[a-z]+(?::[^\]\s]{1,64})?\]\s")


def _untagged(folded: str) -> str:
    """A line's text for ranking: a fact's tag left out, so "user" or "tool" in every
    fact never weighs in a query that has the word."""
    return _TAG.sub("- ", folded, count=1) if "[" in folded[:8] else folded


def pack(postings: dict[str, list[int]]) -> str:
    """Postings as one text: ``|term:packed packed ...`` per term. A term is letters and
    digits only (``text.WORD``), so ``|`` and ``:`` never occur in one; and neither needs
    escaping in JSON, whose decoder copies such a string in one pass (newlines and tabs
    made decoding a snapshot twice as slow)."""
    rows = "".join(f"|{term}:{' '.join(map(str, p))}" for term, p in postings.items())
    return f"{rows}|"


def unpack(packed: str, term: str) -> list[int]:
    """One term's postings from ``pack``'s text (none: the term is not there)."""
    start = packed.find(f"|{term}:")
    if start < 0:
        return []
    start += len(term) + 2
    return [int(p) for p in packed[start : packed.index("|", start)].split()]


@lru_cache(maxsize=4096)
def field_terms(words: str) -> tuple[str, ...]:
    return tuple(terms(words))


def _restored_sections(stored: list[list[Any]]) -> list[tuple[int, Turns]]:
    """Sections as a snapshot keeps them: each with its turns, or the number of the
    earlier section that named the same turns (one object for both)."""
    out: list[tuple[int, Turns]] = []
    same: dict[Turns, Turns] = {}  # a snapshot written before the references, too
    for start, turns in stored:
        if isinstance(turns, int):
            earlier = out[turns][1] if 0 <= turns < len(out) else None
            if not earlier:
                raise ValueError("a section refers to no earlier turns")
            out.append((start, earlier))
        else:
            listed = tuple(map(tuple, turns))
            out.append((start, same.setdefault(listed, listed)))
    return out
