"""The search engine: the four match modes and BM25 ranking over indexed files.

Pure computation over text already read: no AWS, no Runtime. The services over it
(``memory.search`` for memory_search, ``memory.threads`` for thread_search) read the
files through ``memory.engine.corpus`` and hand them here, indexed
(``memory.engine.file_index``). A record is one line. Match modes:

    phrase   the query (trimmed) as a literal, case-insensitive substring
    auto     no mode named (null): the phrase; when it finds nothing, ranked (a question
             alone finds its fact: most MCP clients send only a query)
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
             when the turn it came from talked about flying (a long section's line with
             the few of its turns it matches: ``memory.engine.alignment``). The other way round, a
             message is scored with the ledger facts that name its turn at
             ``FACT_WEIGHT`` (thread_search): a fact's words find the conversation.
             A record linked to k turns counts each at its weight / k ** ``LINK_SHARE``,
             so a fact naming a whole session is not read as that session's every word.

Keywords are literal text (no regex), duplicates and extra whitespace are ignored, and
case folding is Unicode-aware (``casefold``: "ÄPFEL" finds "äpfel"; the reference folded
ASCII only). A blank query matches nothing. phrase/all/any keep the files' order, then
line order.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal, Protocol

from agent_harness.memory.engine.alignment import TurnWords, aligned_sections
from agent_harness.text import WORD, fold, terms

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from agent_harness.memory.engine.file_index import FileIndex, Turns

__all__ = [
    "MATCH_MODES",
    "MAX_QUERY_CHARS",
    "Hit",
    "LinkedIndexes",
    "LinkedTexts",
    "Mode",
    "answered_mode",
    "date_words",
    "keywords",
    "parse_match_mode",
    "rank",
    "search_files",
]

#: ``auto``: what a caller that names no mode gets: the phrase, and when the phrase finds
#: nothing, the ranking (each such hit says ``match_mode`` ranked)
Mode = Literal["phrase", "all", "any", "ranked", "auto"]
MATCH_MODES: tuple[Mode, ...] = ("phrase", "all", "any", "ranked")
DEFAULT_LIMIT = 20
MAX_LIMIT = 200
#: a search query's length: an "any" search costs about 27 µs per query character over
#: 2,000 lines (a 700,000-character query took 25 s)
MAX_QUERY_CHARS = 2000

#: BM25 saturation and length normalisation (the Anserini defaults; on LoCoMo's tuning
#: conversations they beat the textbook 1.2/0.75 for these short documents)
K1, B = 0.9, 0.4
#: how much the messages of the turns a ledger section names count towards its lines
SOURCE_WEIGHT = 0.5
#: how much the ledger facts naming a message's turn count towards the message
FACT_WEIGHT = 0.5
#: a record linked to k turns counts each at weight / k ** LINK_SHARE (0: at full weight;
#: 0.5 was best on LoCoMo's tuning conversations with whole-session links)
LINK_SHARE = 0.5


def parse_match_mode(value: object) -> Mode:
    """``None`` means ``auto`` (the phrase, else ranked); anything not a known mode
    (``""`` included) is an error."""
    if value is None:
        return "auto"
    if isinstance(value, str) and (value in MATCH_MODES or value == "auto"):
        return value  # type: ignore[return-value]
    raise ValueError(f"matchMode must be one of {', '.join(MATCH_MODES)} (or null)")


def answered_mode(mode: Mode, hits: Sequence[object]) -> Mode:
    """The mode that answered: ``auto``'s phrase, or the ranking it fell back to."""
    if mode != "auto":
        return mode
    return "ranked" if any(getattr(h, "match_mode", None) for h in hits) else "phrase"


def keywords(query: str) -> list[str]:
    """Distinct whitespace-separated keywords, folded, in first-seen order."""
    return list(dict.fromkeys(fold(query).split()))


@dataclass(frozen=True)
class Hit:
    path: str
    line: int
    text: str
    score: float | None = None
    #: who the fact's words come from (memory.facts.authority; memory_search sets it)
    authority: str | None = None
    #: a ledger fact's id and where it stands (memory.engine.truth; memory_search sets
    #: them): current, superseded, retracted, expired, or record; by what and when
    fact_id: str | None = None
    state: str | None = None
    by: str | None = None
    at: str | None = None
    #: the retired facts this current one depended on: it may be outdated
    recheck: tuple[str, ...] = ()
    #: how a hybrid ranking found it (memory.engine.fusion): words, meaning or both;
    matched: str | None = None
    #: "ranked" when the caller named no mode and the literal phrase found nothing
    match_mode: str | None = None


class LinkedTexts(Protocol):
    """Texts about a user's turns, ranked with the records linked to the same turns: the
    turns' own messages (for ledger facts), or the ledger facts naming them (for messages)."""

    #: where ranked search keeps its join of records with these texts
    joins: dict[_JoinKey, _Join]
    #: the words of each turn's messages, to align a long section's facts with its
    #: turns (``memory.engine.alignment``; None: sections are read whole)
    words: TurnWords | None

    def counts(self, term: str) -> dict[tuple[str, int], float]:
        """(session, turn) -> how often ``term`` occurs in the texts about that turn (a
        text about k turns counts 1 / k ** ``LINK_SHARE`` for each)."""
        ...

    def length(self, key: tuple[str, int]) -> float:
        """The term count of the texts about that turn, shared the same way (0: none)."""
        ...


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
    if mode == "auto":
        found = search_files(files, query, "phrase", limit)
        if found:
            return found
        ranked = rank(files, query, limit, linked, weight)
        return [replace(h, match_mode="ranked") for h in ranked]
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


#: a section's parts as the join keeps them: records, slice [from, to) of the section's
#: turns, and the weight each of those turns' texts counts with for them
_Parts = list[tuple[list[int], int, int, float]]


@dataclass
class _Join:
    """Records joined with the linked texts about their turns, for one list of files."""

    files: list[FileIndex]
    #: (session, turn) -> (a list of turns citing it, the turn's place in that list):
    #: a part of each section naming that list reads the turn when its slice holds the place
    cited: dict[tuple[str, int], list[tuple[int, int]]]
    #: per list of turns, the sections naming it: (file, the section's parts)
    sections: list[list[tuple[int, _Parts]]]
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
    sections: list[list[tuple[int, _Parts]]] = []
    lengths = [f.lengths for f in indexes]
    added = 0.0
    if linked is not None and weight:
        # the sections of a session flushed whole name the same turns, one object for
        # them all (FileIndex): each list is summed and cited once, by identity
        lists: dict[int, tuple[int, list[float]]] = {}
        for file_no, f in enumerate(indexes):
            extended: list[float] | None = None
            for turns, split in aligned_sections(f, linked.words):
                known_list = lists.get(id(turns))
                if known_list is None:
                    sums = [0.0]  # running sums of the turns' text lengths
                    for key in turns:
                        sums.append(sums[-1] + linked.length(key))
                    known_list = lists[id(turns)] = (len(sections), sums)
                    sections.append([])
                    for place, key in enumerate(turns):
                        if sums[place + 1] > sums[place]:
                            cited.setdefault(key, []).append((known_list[0], place))
                list_no, sums = known_list
                if not sums[-1]:
                    continue
                parts = [(r, lo, hi, weight / (hi - lo) ** LINK_SHARE) for r, lo, hi in split]
                sections[list_no].append((file_no, parts))
                for group, lo, hi, share in parts:
                    more = share * (sums[hi] - sums[lo])  # once per record of the part
                    if not more:
                        continue
                    if extended is None:
                        extended = lengths[file_no] = list(f.lengths)  # this file's own copy
                    for number in group:
                        extended[number] += more
                    added += more * len(group)
    joined = _Join(indexes, cited, sections, lengths, added)
    memo.clear()  # one join per texts object: the newest list of files
    memo[signature] = joined
    return joined


def _shares(counts: list[int] | None, weight: float) -> Callable[[int], float]:
    """A record's weight per linked turn: ``weight`` shared among its k turns."""
    if counts is None:
        return lambda number: weight
    by_count = {k: weight / k**LINK_SHARE if k else 0.0 for k in set(counts)}
    return lambda number: by_count[counts[number]]


_Scored = tuple[tuple[int, int], float]


def _order(item: _Scored) -> tuple[float, tuple[int, int]]:
    return (-item[1], item[0])


def _best_first(scores: dict[tuple[int, int], float], wanted: int) -> Iterator[_Scored]:
    """``scores`` best first (equal scores by file, then line). A query keeps a few of
    the thousands of lines it scores: the best ``2 * wanted`` come from a heap, and the
    rest are sorted only if the caller reads past them (it skips lines whose words it
    has already shown)."""
    head = heapq.nsmallest(2 * wanted, scores.items(), key=_order)
    yield from head
    if len(head) < len(scores):
        yield from sorted(scores.items(), key=_order)[len(head) :]


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
                for list_no, place in join.cited.get(turn, ()):
                    for file_no, parts in join.sections[list_no]:
                        by_line = weighted[file_no]
                        for group, lo, hi, share in parts:
                            if lo <= place < hi:
                                for number in group:
                                    by_line[number] = by_line.get(number, 0.0) + share * count
        df = sum(len(w) for w in weighted)
        if not df:
            continue
        idf = math.log(1 + (total_lines - df + 0.5) / (df + 0.5))
        for file_no, (lengths, by_line) in enumerate(zip(join.lengths, weighted, strict=True)):
            for number, tf in by_line.items():
                norm = K1 * (1 - B + B * lengths[number] / avg_len)
                key = (file_no, number)
                scores[key] = scores.get(key, 0.0) + idf * tf * (K1 + 1) / (tf + norm)
    hits: list[Hit] = []
    seen: set[str] = set()
    for (file_no, number), score in _best_first(scores, limit):
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


class LinkedIndexes:
    """``LinkedTexts`` made of indexes whose records are linked to turns: the thread
    segments (each message to its turn) for ranked memory_search, the ledgers (each fact
    to the turns its section names, a long section's facts to the turns they align
    with in ``segments``) for ranked thread_search."""

    def __init__(self, indexes: list[FileIndex], segments: Sequence[FileIndex] = ()) -> None:
        self.indexes = indexes
        self.segments = list(segments)
        # the turns' words come from whichever indexes are thread segments: ``segments``
        # for ledgers, the indexes themselves when they are segments
        linked = [f for f in [*indexes, *segments] if f.links is not None]
        self.words: TurnWords | None = TurnWords(linked) if linked else None
        self._lengths: dict[tuple[str, int], float] = {}
        #: per index, the turns of the records alignment narrowed (None: none)
        self._aligned: list[dict[int, Turns] | None] = []
        lengths = self._lengths
        for f in indexes:
            self._aligned.append(None)
            own = f.own_lengths()
            if f.links is not None:  # a record per turn: no groups to build for this
                for session, turn, length in zip(*f.links, own, strict=True):
                    if length:
                        key = (session, turn)
                        lengths[key] = lengths.get(key, 0.0) + length
                continue
            moved: dict[int, Turns] = {}
            for section, parts in aligned_sections(f, self.words):
                for group, lo, hi in parts:
                    turns = section[lo:hi]
                    if len(turns) < len(section):  # aligned: narrower than its section
                        moved.update(dict.fromkeys(group, turns))
                    added = sum(own[n] for n in group) / len(turns) ** LINK_SHARE
                    for key in turns:
                        lengths[key] = lengths.get(key, 0.0) + added
            self._aligned[-1] = moved or None
        self.joins: dict[_JoinKey, _Join] = {}
        # for the cache's bound: the indexes it keeps alive, and its own dict roughly
        self.size = sum(f.size for f in [*indexes, *segments]) + 64 * len(self._lengths)

    def counts(self, term: str) -> dict[tuple[str, int], float]:
        out: dict[tuple[str, int], float] = {}
        for f, aligned in zip(self.indexes, self._aligned, strict=True):
            shares = _shares(f.link_counts(), 1.0)
            for number, tf in f.own_terms(term):
                moved = aligned.get(number) if aligned is not None else None
                keys = f.keys_of(number) if moved is None else moved
                share = tf * (shares(number) if moved is None else 1 / len(moved) ** LINK_SHARE)
                for key in keys:
                    out[key] = out.get(key, 0.0) + share
        return out

    def length(self, key: tuple[str, int]) -> float:
        return self._lengths.get(key, 0.0)
