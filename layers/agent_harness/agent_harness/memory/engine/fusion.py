"""Hybrid ranking: a line's words and its meaning, fused into one order.

    lexical  BM25 (``memory.engine.index.rank``) scaled by the best hit's, times the
             line's coverage: the share of the query's words the line itself holds,
             each weighted by its rarity (``coverage``). A line that matched only "user"
             or "'s" covers next to nothing of the question, so it no longer outranks
             the right line found by meaning; a lexical hit that covers less than
             ``MIN_COVERAGE`` and has no semantic support is noise and is not returned
    semantic the cosine of the line's vector with the query's, counted only above the
             model's floor (``floor``), scaled between the floor and the best cosine
    fused    ``SEMANTIC_WEIGHT`` * semantic + (1 - ``SEMANTIC_WEIGHT``) * lexical

Each weight and floor was chosen on the tuning data only (docs/benchmarks.md): the
paraphrase set's tuning half and the five LoCoMo tuning conversations; the figures on
the held-out halves are the scorecard. A fused hit says how it matched: ``words``,
``meaning`` or ``both``. Pure: no AWS, no Runtime.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

from agent_harness.memory.engine.index import Hit
from agent_harness.memory.engine.vectors import fact_body, keyed_lines, line_key
from agent_harness.text import terms

if TYPE_CHECKING:
    from agent_harness.memory.engine.file_index import FileIndex

__all__ = ["MIN_COVERAGE", "SEMANTIC_WEIGHT", "coverage", "floor", "fuse"]

SEMANTIC_WEIGHT = 0.6
#: a lexical hit holding less of the question than this, with no semantic support, is noise
MIN_COVERAGE = 0.3
#: each known model's floor: below it, a line's meaning is no evidence. e5's (its two
#: views' score, memory.engine.vectors) is the 2nd percentile of the right fact's on the
#: paraphrase set's tuning half; unrelated sentences sit around 0.70-0.78
FLOORS = {"local:multilingual-e5-small": 0.80, "stand-in": 0.5}
#: a model not in FLOORS (cosines of OpenAI's, Titan's and Cohere's models spread wider)
DEFAULT_FLOOR = 0.35
#: idf is taken as if memory held at least this many lines, so a small memory does not
#: make every word look common (and every missing word decisive)
MIN_IDF_LINES = 1000


def floor(model: str, configured: float | None = None) -> float:
    if configured is not None:
        return configured
    found = FLOORS.get(model)
    if found is None and "e5-small" in model:  # the same model behind an endpoint
        found = FLOORS["local:multilingual-e5-small"]
    return DEFAULT_FLOOR if found is None else found


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


def fuse(
    files: list[tuple[str, FileIndex]],
    query: str,
    lexical: list[Hit],
    cosines: dict[str, float],
    limit: int,
    min_cosine: float,
    *,
    semantic_weight: float = SEMANTIC_WEIGHT,
    min_coverage: float = MIN_COVERAGE,
) -> list[Hit]:
    """The best ``limit`` lines of ``files`` by fused score (``cosines``: line key ->
    cosine with the query, ``memory.engine.vectors``); a line found by its words alone
    must cover ``min_coverage`` of the query."""
    scores: dict[tuple[str, int], float] = {}
    how: dict[tuple[str, int], set[str]] = {}
    texts: dict[tuple[str, int], str] = {}
    best_lexical = max((h.score or 0.0 for h in lexical), default=0.0) or 1.0
    for hit, share in zip(lexical, coverage(files, query, lexical), strict=True):
        place = (hit.path, hit.line)
        scores[place] = (1 - semantic_weight) * ((hit.score or 0.0) / best_lexical) * share
        how[place] = {"words"} if share >= min_coverage else set()
        texts[place] = hit.text
    above = {k: c for k, c in cosines.items() if c >= min_cosine}
    if above:
        best = max(above.values())
        span = max(best - min_cosine, 1e-6)
        lines = dict(files)
        for key, places in keyed_lines(files).items():
            cosine = above.get(key)
            if cosine is None:
                continue
            for place in places:
                scores[place] = scores.get(place, 0.0) + semantic_weight * (
                    (cosine - min_cosine) / span
                )
                how.setdefault(place, set()).add("meaning")
                texts.setdefault(place, lines[place[0]].lines[place[1] - 1])
    ranked = sorted((p for p in scores if how.get(p)), key=lambda p: (-scores[p], p[0], p[1]))
    out: list[Hit] = []
    seen: set[str] = set()
    for place in ranked:
        if len(out) >= limit:
            break
        body = fact_body(texts[place])
        key = line_key(body) if body is not None else texts[place].strip().casefold()
        if key in seen:  # each distinct line once (MEMORY.md repeats the ledgers' facts)
            continue
        seen.add(key)
        matched = how[place]
        kind = "both" if len(matched) == 2 else next(iter(matched))
        out.append(
            replace(
                Hit(place[0], place[1], texts[place]),
                score=round(scores[place], 6),
                matched=kind,
            )
        )
    return out
