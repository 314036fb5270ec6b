"""Ranking ideas measured on LoCoMo's tuning conversations and not kept: each wraps the
library's ``index.rank`` (the ablation switches it in for one variant), so what is
measured is the shipped ranking plus the idea, nothing else.

* pseudo-relevance feedback: the rarest words of the first pass's best lines (idf
  summed over the lines holding them) are added to the query at a fraction of a query
  word's weight. BM25 is a sum over terms, so that is the first pass's scores plus
  ``weight`` times the scores of the added words alone;
* proximity: a hit holding two words the query has side by side, side by side too, gains
  the rarer word's idf times ``weight`` (the best ``depth`` hits re-ordered);
* coverage: a hit's score times the share of the query's idf it holds itself, to a power
  (the best ``depth`` hits re-ordered).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from agent_harness.text import terms

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_harness.memory.engine.file_index import FileIndex
    from agent_harness.memory.engine.index import Hit

    Files = list[tuple[str, FileIndex]]
    Rank = Callable[..., list[Hit]]


def _idf(files: Files) -> Callable[[str], float]:
    """The idf ``rank`` gives a term on its own postings (context and links aside)."""
    total = sum(f.totals()[0] for _, f in files) or 1
    known: dict[str, float] = {}

    def idf(term: str) -> float:
        if term not in known:
            df = sum(len(f.own_terms(term)) for _, f in files)
            known[term] = math.log(1 + (total - df + 0.5) / (df + 0.5))
        return known[term]

    return idf


def _every_line(files: Files) -> int:
    return sum(len(f.lines) for _, f in files)


@dataclass(frozen=True)
class Feedback:
    """Pseudo-relevance feedback: ``words`` words from the best ``lines`` lines."""

    rank: Rank
    lines: int = 3
    words: int = 3
    weight: float = 0.1

    def __call__(self, files: Files, query: str, limit: int, *args: Any) -> list[Hit]:
        first = self.rank(files, query, _every_line(files), *args)  # every line it scores
        asked, idf = set(terms(query)), _idf(files)
        found: Counter[str] = Counter()
        for hit in first[: self.lines]:
            # sorted: words of equal weight are taken in one order, whatever the hash seed
            for term in sorted(set(terms(hit.text)) - asked):
                found[term] += idf(term)
        added = " ".join(term for term, _ in found.most_common(self.words))
        if not added:
            return first[:limit]
        score: dict[tuple[str, int], float] = {}
        hits: dict[tuple[str, int], Hit] = {}
        for share, found_hits in (
            (1.0, first),
            (self.weight, self.rank(files, added, 10**9, *args)),
        ):
            for hit in found_hits:
                key = (hit.path, hit.line)
                hits.setdefault(key, hit)
                score[key] = score.get(key, 0.0) + share * (hit.score or 0.0)
        best = sorted(score, key=lambda key: (-score[key], key))
        return [hits[key] for key in best[:limit]]


@dataclass(frozen=True)
class _Reordered:
    """The shipped ranking's best ``depth`` hits, re-ordered by ``scorer``'s score (equal
    scores in the order they came)."""

    rank: Rank
    depth: int = 50

    def scorer(self, files: Files, query: str) -> Callable[[Hit], float]:
        raise NotImplementedError

    def __call__(self, files: Files, query: str, limit: int, *args: Any) -> list[Hit]:
        score = self.scorer(files, query)
        hits = self.rank(files, query, max(limit, self.depth), *args)
        ordered = sorted(enumerate(hits), key=lambda item: (-score(item[1]), item[0]))
        return [hit for _, hit in ordered[:limit]]


@dataclass(frozen=True)
class Proximity(_Reordered):
    """Query words side by side in the hit gain ``weight`` times the rarer one's idf."""

    weight: float = 0.5

    def scorer(self, files: Files, query: str) -> Callable[[Hit], float]:
        pairs = {(a, b) for a, b in pairwise(terms(query)) if a != b}
        idf = _idf(files)

        def score(hit: Hit) -> float:
            near = set(pairwise(terms(hit.text)))
            bonus = sum(min(idf(a), idf(b)) for a, b in pairs if (a, b) in near or (b, a) in near)
            return (hit.score or 0.0) + self.weight * bonus

        return score


@dataclass(frozen=True)
class Coverage(_Reordered):
    """A hit's score times (its share of the query's idf) ** ``power``."""

    depth: int = 200
    power: float = 0.3

    def scorer(self, files: Files, query: str) -> Callable[[Hit], float]:
        wanted, idf = set(terms(query)), _idf(files)
        mass = sum(map(idf, wanted)) or 1.0

        def score(hit: Hit) -> float:
            share = sum(idf(t) for t in wanted & set(terms(hit.text))) / mass
            return (hit.score or 0.0) * share**self.power

        return score


def tried(rank: Rank) -> dict[str, Rank]:
    """The ideas as ablation variants, named for the table, at their best setting on the
    tuning conversations (of the few tried)."""
    return {
        "tried, not kept: pseudo-relevance feedback (3 words of the best 3 lines at 0.1)": (
            Feedback(rank)
        ),
        "tried, not kept: query words side by side (idf × 0.5, best 50 re-ordered)": (
            Proximity(rank)
        ),
        "tried, not kept: share of the query's idf a line holds (score × share ** 0.3)": (
            Coverage(rank)
        ),
    }
