"""Automatic recall: before a turn's first model call, the lines of the user's memory
most relevant to the new message, so the model sees them without calling a tool.

    query    the new message, with the previous user message when the new one is short
    rank     ``ranked`` over MEMORY.md and every ledger (archive included), without the
             thread segments: the turn's own GET of MEMORY.md, one LIST of memory/ beside
             the turn's reads, GETs only of the ledgers the container has not cached
    floor    a line must hold at least ``recall_min_score`` of the message's words,
             weighted by rarity (``coverage``): no memory beats a wrong one
    skip     lines the injected MEMORY.md already shows (or a line with the same words)
    order    best first; equal scores newest first
    render   each line with its ``path#line``; a ledger's path is its day
    budget   whole lines until ``recall_max_tokens`` less the message's frame (agent.recall)

The lines reach the model as reference data, never instructions (agent.context), and
the turn's log names every line it was shown (``MemoryInjection.recalled``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent_harness.memory.index import search_files
from agent_harness.paths import ledger_date
from agent_harness.text import WORD, fold, terms

if TYPE_CHECKING:
    from agent_harness.memory.file_index import FileIndex
    from agent_harness.memory.index import Hit
    from agent_harness.tokens import TokenCounter

__all__ = ["Recalled", "coverage", "recall_query", "select_lines"]

#: a message with fewer distinct terms than this is searched with the one before it
SHORT_QUERY_TERMS = 4
#: how many ranked hits are considered before the floor, the skips and the budget: at
#: least this many, and more for a larger budget (lines MEMORY.md shows are skipped)
MIN_CANDIDATES = 60
#: a recalled line's tokens, roughly, for sizing the candidates to the budget
LINE_TOKENS = 10


@dataclass(frozen=True)
class Recalled:
    """One recalled line and where it came from."""

    path: str
    line: int
    text: str
    day: str | None
    score: float

    @property
    def source(self) -> str:
        return f"{self.path}#{self.line}"

    def render(self) -> str:
        """The line as the model sees it, with its source. A ledger's path is its day
        (``day`` is read from it), so the day is not said twice: it was a third of an
        observation's tokens, and a budget holds that many more lines."""
        return f"- {self.text.strip().lstrip('-*• ').strip()} ({self.source})"


def recall_query(message: str, previous: str | None) -> str:
    """The text to search with: a short message ("and the second one?") is searched
    together with the user's message before it."""
    if previous and len(set(terms(message))) < SHORT_QUERY_TERMS:
        return f"{previous}\n{message}"
    return message


#: idf is taken as if memory held at least this many lines, so a small memory does not
#: make every word look common (and every missing word decisive)
MIN_IDF_LINES = 1000


def coverage(files: list[tuple[str, FileIndex]], query: str, hits: list[Hit]) -> list[float]:
    """For each hit, the share of the query's words the line itself holds (its date as
    words included, its neighbours not), each word weighted by its rarity: 1.0 when the
    line holds every word, 0.0 when it was found only through its neighbours. A floor on
    it means the same for a memory of three lines and of thirty thousand."""
    wanted = list(dict.fromkeys(terms(query)))
    by_path = dict(files)
    lines = max(sum(f.totals()[0] for _, f in files), MIN_IDF_LINES)
    holders: dict[str, dict[str, set[int]]] = {}
    weight: dict[str, float] = {}
    for term in wanted:
        holders[term] = {p: {n for n, _ in f.own_terms(term)} for p, f in files}
        df = sum(len(held) for held in holders[term].values())
        weight[term] = math.log(1 + (lines - df + 0.5) / (df + 0.5))
    total = sum(weight.values()) or 1.0
    out = []
    for hit in hits:
        if hit.path not in by_path:
            out.append(0.0)
            continue
        held = [t for t in wanted if hit.line - 1 in holders[t][hit.path]]
        out.append(sum(weight[t] for t in held) / total)
    return out


def _words(line: str) -> str:
    return " ".join(WORD.findall(fold(line.lstrip("-*• "))))


def select_lines(
    files: list[tuple[str, FileIndex]],
    query: str,
    *,
    shown: str,
    counter: TokenCounter,
    max_tokens: int,
    min_score: float,
) -> list[Recalled]:
    """The lines to inject for ``query``: ranked, holding at least ``min_score`` of its
    words by rarity, not already ``shown`` (the MEMORY.md text the model gets anyway),
    best first with newest-first ties, whole lines within ``max_tokens``."""
    if max_tokens <= 0 or not query.strip():
        return []
    seen = {w for w in map(_words, shown.splitlines()) if w}
    candidates = max(MIN_CANDIDATES, max_tokens // LINE_TOKENS)
    hits = search_files(files, query, "ranked", candidates)
    found: list[Recalled] = []
    for hit, share in zip(hits, coverage(files, query, hits), strict=True):
        words = _words(hit.text)
        if hit.score is None or share < min_score or not words or words in seen:
            continue
        seen.add(words)
        date = ledger_date(hit.path)
        day = f"{date[0]:04d}-{date[1]:02d}-{date[2]:02d}" if date else None
        found.append(Recalled(hit.path, hit.line, hit.text, day, hit.score))
    found.sort(key=lambda r: r.day or "", reverse=True)  # stable: the next sort keeps it
    found.sort(key=lambda r: -r.score)
    chosen: list[Recalled] = []
    used = 0
    for line in found:
        cost = counter.count(line.render()) + 1
        if used + cost <= max_tokens:
            chosen.append(line)
            used += cost
    return chosen
