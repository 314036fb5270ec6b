"""The search engine: indexed lines, the four match modes, BM25 ranking, and the cache.

Pure computation over text already read: no AWS, no Runtime. The services over it
(``memory.search`` for memory_search, ``memory.threads`` for thread_search) read the files
through ``memory.corpus`` and hand them here. A record is one line. Match modes:

    phrase   the query (trimmed) as a literal, case-insensitive substring   (default; null)
    all      every whitespace-separated keyword occurs in the line, any order
    any      at least one keyword occurs in the line
    ranked   best first by BM25 over stemmed word terms (CJK as character bigrams), each
             distinct line once; section headers and provenance lines are not results.
             A line is scored with its neighbours as context: the lines just before and
             after it in the same block (a thread record: the messages just before and
             after it in the same session) count at ``CONTEXT_WEIGHT``, since a fact or a
             reply is often only findable by the words around it. A dated record is
             also scored with its date as words ("8 May 2023": a ledger line its file's
             day, a message the day it was sent), so "in June" or "2023" finds it.
             A ledger line whose section names its turns (a flush, or a save with a
             source) is also scored with those turns' messages at ``SOURCE_WEIGHT``:
             the fact "prefers aisle seats" is found by "what did I say about flying?"
             when the turn it came from talked about flying. The other way round, a
             message is scored with the ledger facts that name its turn at
             ``FACT_WEIGHT`` (thread_search): a fact's words find the conversation.

Keywords are literal text (no regex), duplicates and extra whitespace are ignored, and
case folding is Unicode-aware (``casefold``: "ÄPFEL" finds "äpfel"; the reference folded
ASCII only). A blank query matches nothing. phrase/all/any keep the files' order, then
line order.
"""

from __future__ import annotations

import math
import threading
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal, Protocol

from agent_harness.memory.ledger import is_heading, is_structure, parse_source
from agent_harness.text import WORD, fold, terms

__all__ = [
    "MATCH_MODES",
    "FileIndex",
    "Hit",
    "LinkedIndexes",
    "LinkedTexts",
    "MemoryIndexCache",
    "Mode",
    "date_words",
    "keywords",
    "linked_texts",
    "parse_match_mode",
    "rank",
    "search_files",
]

Mode = Literal["phrase", "all", "any", "ranked"]
MATCH_MODES: tuple[Mode, ...] = ("phrase", "all", "any", "ranked")
DEFAULT_LIMIT = 20
MAX_LIMIT = 200

#: BM25 saturation and length normalisation (the Anserini defaults; on LoCoMo's tuning
#: conversations they beat the textbook 1.2/0.75 for these short documents)
K1, B = 0.9, 0.4
#: how much a neighbouring line's terms count towards a line's score (0 turns it off)
CONTEXT_WEIGHT = 0.4
#: how much the messages of the turns a ledger section names count towards its lines
SOURCE_WEIGHT = 0.5
#: how much the ledger facts naming a message's turn count towards the message
FACT_WEIGHT = 0.5
_TF_BITS = 10
_TF_MAX = (1 << _TF_BITS) - 1


def parse_match_mode(value: object) -> Mode:
    """``None`` means phrase; anything not a known mode (``""`` included) is an error."""
    if value is None:
        return "phrase"
    if isinstance(value, str) and value in MATCH_MODES:
        return value
    raise ValueError(f"matchMode must be one of {', '.join(MATCH_MODES)} (or null)")


def keywords(query: str) -> list[str]:
    """Distinct whitespace-separated keywords, folded, in first-seen order."""
    return list(dict.fromkeys(fold(query).split()))


@dataclass(frozen=True)
class Hit:
    path: str
    line: int
    text: str
    score: float | None = None


@dataclass
class FileIndex:
    """One file's lines and folded lines (built once per ETag); its BM25 postings are
    built on the first ranked query and kept with it."""

    lines: list[str]
    folded: list[str]
    size: int = 0
    #: records whose neighbours give context share a group; None: blocks of a Markdown
    #: file (lines between headings, provenance lines and blank lines)
    groups: list[str] | None = field(default=None, repr=False)
    #: term -> packed (line << _TF_BITS | count): plain ints, which the garbage collector
    #: does not track (a tuple per posting made its passes half the cost of a first query)
    _postings: dict[str, list[int]] | None = field(default=None, repr=False)
    #: ranking-only words of each record (its date); never shown, never matched literally
    fields: list[str] | None = field(default=None, repr=False)
    _lengths: list[float] = field(default_factory=list, repr=False)
    _records: int = field(default=0, repr=False)
    _length_sum: float = field(default=0.0, repr=False)
    _before: list[int] = field(default_factory=list, repr=False)
    _after: list[int] = field(default_factory=list, repr=False)
    #: each record's own term count (without context)
    _own: list[int] = field(default_factory=list, repr=False)
    #: each record's turns, given (a thread record: its own turn); None: a Markdown
    #: file's records take the turns their section's source line names
    links: list[tuple[str, int]] | None = field(default=None, repr=False)
    #: (session, turn) -> the records linked to that turn
    _cited: dict[tuple[str, int], list[int]] = field(default_factory=dict, repr=False)
    #: each record's linked turns (the same tuple object for a whole section)
    _keys: list[tuple[tuple[str, int], ...]] = field(default_factory=list, repr=False)

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
        links: list[tuple[str, int]] | None = None,
    ) -> FileIndex:
        folded = [fold(line) for line in lines]
        return cls(lines, folded, size, groups=groups, fields=fields, links=links)

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
            cited: dict[tuple[str, int], list[int]] = {}
            keys: list[tuple[tuple[str, int], ...]] = []
            section: tuple[tuple[str, int], ...] = ()  # the turns the section names
            for number, line in enumerate(self.lines):
                if self.links is not None:
                    section = (self.links[number],)
                keys.append(section)
                if self.groups is None and (is_structure(line) or not line.strip()):
                    block += 1
                    own.append(0)
                    if is_heading(line):
                        section = ()
                    elif (source := parse_source(line)) is not None:
                        section = tuple((source.session_id, t) for t in source.turns)
                    continue
                counts = Counter(terms(self.folded[number], folded=True))
                if counts and self.fields and self.fields[number]:
                    counts.update(field_terms(self.fields[number]))
                own.append(sum(counts.values()))
                for term, tf in counts.items():
                    postings.setdefault(term, []).append(number << _TF_BITS | min(tf, _TF_MAX))
                if not counts:
                    continue
                for key in section:
                    cited.setdefault(key, []).append(number)
                group = str(block) if self.groups is None else self.groups[number]
                previous = last.get(group, -1)
                if previous >= 0:
                    before[number], after[previous] = previous, number
                last[group] = number
            self._before, self._after = before, after
            self._lengths = [
                own[n]
                + CONTEXT_WEIGHT
                * (
                    (own[before[n]] if before[n] >= 0 else 0)
                    + (own[after[n]] if after[n] >= 0 else 0)
                )
                if own[n]
                else 0.0
                for n in range(len(self.lines))
            ]
            self._records = sum(1 for n in self._lengths if n)
            self._length_sum = sum(self._lengths)
            self._own, self._cited, self._keys = own, cited, keys
            self._postings = postings
        return self._postings

    def own_terms(self, term: str) -> list[tuple[int, int]]:
        """(record, count) of the records holding ``term`` themselves (no context)."""
        return [(p >> _TF_BITS, p & _TF_MAX) for p in self._ranking().get(term, ())]

    def own_length(self, number: int) -> int:
        self._ranking()
        return self._own[number]

    def cited(self) -> dict[tuple[str, int], list[int]]:
        """(session, turn) -> the records linked to that turn (a ledger: the records of
        the sections whose source names it)."""
        self._ranking()
        return self._cited

    def keys_of(self, number: int) -> tuple[tuple[str, int], ...]:
        """The turns record ``number`` is linked to."""
        self._ranking()
        return self._keys[number]

    @property
    def lengths(self) -> list[float]:
        self._ranking()
        return self._lengths

    def totals(self) -> tuple[int, float]:
        """How many records rank (not structure, not empty) and their summed length."""
        self._ranking()
        return self._records, self._length_sum

    def weights(self, term: str) -> dict[int, float]:
        """Records holding ``term`` with their weight: its count in the record plus
        ``CONTEXT_WEIGHT`` times its count in each neighbour."""
        out: dict[int, float] = {}
        for packed in self._ranking().get(term, ()):
            number, tf = packed >> _TF_BITS, packed & _TF_MAX
            out[number] = out.get(number, 0.0) + tf
            if CONTEXT_WEIGHT:
                for other in (self._before[number], self._after[number]):
                    if other >= 0:
                        out[other] = out.get(other, 0.0) + CONTEXT_WEIGHT * tf
        return out


class Sized(Protocol):
    size: int


class LinkedTexts(Protocol):
    """Texts about a user's turns, ranked with the records linked to the same turns: the
    turns' own messages (for ledger facts), or the ledger facts naming them (for messages)."""

    #: where ranked search keeps its join of records with these texts
    joins: dict[_JoinKey, _Join]

    def counts(self, term: str) -> dict[tuple[str, int], int]:
        """(session, turn) -> how often ``term`` occurs in the texts about that turn."""
        ...

    def length(self, key: tuple[str, int]) -> int:
        """The term count of the texts about that turn (0: none)."""
        ...


class MemoryIndexCache:
    """Warm per-container cache of parsed files (ledger indexes, thread segments), keyed by
    (user key, path, ETag) so it is never stale and never crosses users; bounded by total
    text size (LRU)."""

    def __init__(self, max_bytes: int = 32 * 1024 * 1024) -> None:
        self._max_bytes = max_bytes
        self._items: OrderedDict[tuple[str, str, str], Any] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> Any:
        with self._lock:
            index = self._items.get(key)
            if index is not None:
                self._items.move_to_end(key)
            return index

    def put(self, key: tuple[str, str, str], index: Sized) -> None:
        with self._lock:
            if key in self._items:
                return
            self._items[key] = index
            self._bytes += index.size
            while self._bytes > self._max_bytes and len(self._items) > 1:
                _, evicted = self._items.popitem(last=False)
                self._bytes -= evicted.size


def _line_matches(folded_line: str, mode: Mode, phrase: str, words: list[str]) -> bool:
    if mode == "phrase":
        return phrase in folded_line
    if mode == "all":
        return all(w in folded_line for w in words)
    return any(w in folded_line for w in words)


def search_files(
    files: list[tuple[str, FileIndex]],
    query: str,
    mode: Mode,
    limit: int = DEFAULT_LIMIT,
    linked: LinkedTexts | None = None,
    weight: float = 0.0,
) -> list[Hit]:
    """Search already-indexed files (in result order: MEMORY.md first, then by path);
    ranked search scores each record with ``linked``'s texts about its turns at
    ``weight``."""
    if not query or not query.strip():
        return []
    if mode == "ranked":
        return rank(files, query, limit, linked, weight)
    phrase, words = fold(query.strip()), keywords(query)
    hits: list[Hit] = []
    for path, index in files:
        for number, folded_line in enumerate(index.folded):
            if _line_matches(folded_line, mode, phrase, words):
                hits.append(Hit(path, number + 1, index.lines[number]))
                if len(hits) >= limit:
                    return hits
    return hits


#: a join's weight and the ids of the file indexes it joined
_JoinKey = tuple[float, tuple[int, ...]]


@dataclass
class _Join:
    """Records joined with the linked texts about their turns, for one list of files."""

    files: list[FileIndex]
    #: (session, turn) -> the (file, record) pairs citing it
    cited: dict[tuple[str, int], list[tuple[int, int]]]
    #: each file's record lengths plus the weight times their linked texts' lengths
    lengths: list[list[float]]
    added: float


def _join(files: list[tuple[str, FileIndex]], linked: LinkedTexts | None, weight: float) -> _Join:
    """The join of ``files`` with ``linked``, computed once per (files, texts, weight): the
    texts object keeps the last one (warm queries over unchanged files reuse it)."""
    indexes = [f for _, f in files]
    signature = (weight, tuple(id(f) for f in indexes))
    memo: dict[_JoinKey, _Join] = linked.joins if linked is not None else {}
    known = memo.get(signature)
    if known is not None and all(a is b for a, b in zip(known.files, indexes, strict=True)):
        return known
    cited: dict[tuple[str, int], list[tuple[int, int]]] = {}
    lengths = [f.lengths for f in indexes]
    added = 0.0
    if linked is not None and weight:
        for file_no, f in enumerate(indexes):
            own = lengths[file_no]
            for key, records in f.cited().items():
                length = linked.length(key)
                if not length:
                    continue
                if own is f.lengths:
                    own = lengths[file_no] = list(f.lengths)  # this file's own copy
                pairs = cited.setdefault(key, [])
                for number in records:
                    pairs.append((file_no, number))
                    own[number] += weight * length
                    added += weight * length
    joined = _Join(indexes, cited, lengths, added)
    memo.clear()  # one join per texts object: the newest list of files
    memo[signature] = joined
    return joined


def rank(
    files: list[tuple[str, FileIndex]],
    query: str,
    limit: int,
    linked: LinkedTexts | None = None,
    weight: float = 0.0,
) -> list[Hit]:
    wanted = list(dict.fromkeys(terms(query)))
    if not wanted:
        return []
    totals = [f.totals() for _, f in files]
    join = _join(files, linked, weight)
    total_lines = sum(n for n, _ in totals) or 1
    avg_len = ((sum(length for _, length in totals) + join.added) / total_lines) or 1.0
    scores: dict[tuple[int, int], float] = {}
    for term in wanted:
        weighted = [f.weights(term) for _, f in files]
        if join.cited and linked is not None:
            for turn, count in linked.counts(term).items():
                for file_no, number in join.cited.get(turn, ()):
                    by_line = weighted[file_no]
                    by_line[number] = by_line.get(number, 0.0) + weight * count
        df = sum(len(w) for w in weighted)
        if not df:
            continue
        idf = math.log(1 + (total_lines - df + 0.5) / (df + 0.5))
        for file_no, (lengths, by_line) in enumerate(zip(join.lengths, weighted, strict=True)):
            for number, tf in by_line.items():
                norm = K1 * (1 - B + B * lengths[number] / avg_len)
                key = (file_no, number)
                scores[key] = scores.get(key, 0.0) + idf * tf * (K1 + 1) / (tf + norm)
    ordered = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    hits: list[Hit] = []
    seen: set[str] = set()
    for (file_no, number), score in ordered:
        path, f = files[file_no]
        text = f.lines[number]
        words = " ".join(WORD.findall(fold(text.lstrip("-*• "))))
        if words in seen:
            continue
        seen.add(words)
        hits.append(Hit(path, number + 1, text, round(score, 4)))
        if len(hits) >= limit:
            break
    return hits


_MONTHS = (
    "January February March April May June July August September October November December"
).split()


def date_words(year: int, month: int, day: int) -> str:
    """A day as the words a question would use: "8 May 2023" (English, locale-free)."""
    return f"{day} {_MONTHS[month - 1]} {year}" if 1 <= month <= 12 else ""


@lru_cache(maxsize=4096)
def field_terms(words: str) -> tuple[str, ...]:
    return tuple(terms(words))


class LinkedIndexes:
    """``LinkedTexts`` made of indexes whose records are linked to turns: the thread
    segments (each message to its turn) for ranked memory_search, the ledgers (each fact
    to the turns its section names) for ranked thread_search."""

    def __init__(self, indexes: list[FileIndex]) -> None:
        self.indexes = indexes
        self._lengths: dict[tuple[str, int], int] = {}
        for f in indexes:
            for key, records in f.cited().items():
                added = sum(f.own_length(n) for n in records)
                self._lengths[key] = self._lengths.get(key, 0) + added
        self.joins: dict[_JoinKey, _Join] = {}
        # for the cache's bound: the indexes it keeps alive, and its own dict roughly
        self.size = sum(f.size for f in indexes) + 64 * len(self._lengths)

    def counts(self, term: str) -> dict[tuple[str, int], int]:
        out: dict[tuple[str, int], int] = {}
        for f in self.indexes:
            for number, tf in f.own_terms(term):
                for key in f.keys_of(number):
                    out[key] = out.get(key, 0) + tf
        return out

    def length(self, key: tuple[str, int]) -> int:
        return self._lengths.get(key, 0)


def linked_texts(
    cache: MemoryIndexCache, user_key: str, name: str, indexes: list[FileIndex]
) -> LinkedIndexes:
    """The ``LinkedTexts`` of ``indexes`` (cached files): while none of them changes, the
    same object, with the joins ranked search made."""
    key = (user_key, name, ",".join(str(id(f)) for f in indexes))
    known: LinkedIndexes | None = cache.get(key)
    if known is not None and all(a is b for a, b in zip(known.indexes, indexes, strict=True)):
        return known
    made = LinkedIndexes(indexes)
    cache.put(key, made)
    return made
