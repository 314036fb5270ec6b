"""Hybrid ranking: a line's words and its meaning, fused into one order.

    lexical  BM25 (``memory.engine.index.rank``: a fact's linked turns, a message's
             linked facts included) scaled by the best hit's, weighed by the line's
             coverage of the query (the share of its words, by rarity, the line itself
             holds: a line matched only through "user" or "'s" weighs next to
             nothing), and by how far the query's words can be trusted at all
             (``words_confidence``: a question worded unlike everything stored matches
             a word or two of any line, one that reuses a line's words most of them)
    semantic the cosine of the line's vector with the query's, counted only above the
             model's floor (``floor``), scaled between the floor and the best cosine
    fused    w * semantic + (1 - w) * lexical, w moving from the profile's
             ``semantic_weight`` (words trusted) to its ``untrusted_weight`` (not)

A lexical hit covering less than ``MIN_COVERAGE`` of a query whose words are not fully
trusted, with no semantic support, is noise and is not returned. Two profiles, each
chosen on the tuning data only (docs/benchmarks.md: the paraphrase set's tuning half and
the five LoCoMo tuning conversations; the held-out halves are the scorecard):
``FACTS`` for memory lines (short facts, where meaning is strong) and ``MESSAGES`` for
thread search (conversation, where the words carry more and a small model's meaning
less). A fused hit says how it matched: ``words``, ``meaning`` or ``both``. Pure: no
AWS, no Runtime.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from agent_harness.memory.engine.index import Hit
from agent_harness.memory.engine.vectors import fact_body, keyed_lines, line_keys
from agent_harness.text import terms

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_harness.memory.engine.file_index import FileIndex

__all__ = ["FACTS", "MESSAGES", "MIN_COVERAGE", "Profile", "coverage", "floor", "fuse"]


@dataclass(frozen=True)
class Profile:
    """How one kind of line is fused (see the module)."""

    semantic_weight: float
    untrusted_weight: float
    #: how much a line's own coverage weighs in its lexical score (the rest is its BM25
    #: rank, which counts the words of linked facts and turns too)
    coverage_weight: float
    #: the query's words are not trusted when its best lexical hits cover at most
    #: ``words_low`` of it, and trusted in full from ``words_full``
    words_low: float
    words_full: float


#: memory lines (memory search, automatic recall, the flush's related facts). Tuning
#: half: paraphrase R@5 0.94, LoCoMo observations 0.629 (BM25 alone 0.01 and 0.622)
FACTS = Profile(0.35, 0.7, 0.5, 0.25, 0.55)
#: messages (thread search). Tuning half: LoCoMo turns 0.693 (BM25 alone 0.680)
MESSAGES = Profile(0.3, 0.9, 0.2, 0.2, 0.4)
#: a lexical hit holding less of the question than this, with no semantic support, is noise
MIN_COVERAGE = 0.3
#: the lexical hits whose coverage says how far the query's words can be trusted
CONFIDENCE_HITS = 10
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


def words_confidence(shares: list[float], low: float, full: float) -> float:
    """How far a query's words can be trusted, 0 to 1, from the best coverage among its
    best lexical hits: a question worded unlike everything stored matches only a word
    or two of any line (nothing to trust: the ranking is by meaning), one that reuses a
    line's words matches most of them (the lexical ranking counts in full)."""
    best = max(shares[:CONFIDENCE_HITS], default=0.0)
    return min(1.0, max(0.0, (best - low) / max(full - low, 1e-6)))


def fuse(
    files: list[tuple[str, FileIndex]],
    query: str,
    lexical: list[Hit],
    cosines: dict[str, float],
    limit: int,
    min_cosine: float,
    *,
    profile: Profile = FACTS,
    min_coverage: float = MIN_COVERAGE,
    body_of: Callable[[str], str | None] = fact_body,
    distinct: bool = True,
) -> list[Hit]:
    """The best ``limit`` lines of ``files`` by fused score (``cosines``: line key ->
    cosine with the query, ``memory.engine.vectors``). ``body_of``: what of a line was
    embedded (a fact's text; a message as indexed); ``distinct``: each text once
    (memory: MEMORY.md repeats the ledgers' facts; not messages, each said at its own
    time)."""
    scores: dict[tuple[str, int], float] = {}
    how: dict[tuple[str, int], set[str]] = {}
    texts: dict[tuple[str, int], str] = {}
    best_lexical = max((h.score or 0.0 for h in lexical), default=0.0) or 1.0
    shares = coverage(files, query, lexical)
    trust = words_confidence(shares, profile.words_low, profile.words_full)
    # the less the words are trusted, the more the meaning
    semantic_weight = profile.untrusted_weight + trust * (
        profile.semantic_weight - profile.untrusted_weight
    )
    cw = profile.coverage_weight
    for hit, share in zip(lexical, shares, strict=True):
        place = (hit.path, hit.line)
        weight = trust * (1 - cw + cw * share)
        scores[place] = (1 - semantic_weight) * ((hit.score or 0.0) / best_lexical) * weight
        kept = trust > 0 and (share >= min_coverage or trust >= 1)
        how[place] = {"words"} if kept else set()
        texts[place] = hit.text
    above = {k: c for k, c in cosines.items() if c >= min_cosine}
    if above:
        best = max(above.values())
        span = max(best - min_cosine, 1e-6)
        lines = dict(files)
        for key, places in keyed_lines(files, body_of).items():
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
    keys = {path: line_keys(index, body_of) for path, index in files} if distinct else {}
    for place in ranked:
        if len(out) >= limit:
            break
        if distinct:
            found = keys[place[0]][place[1] - 1] if place[0] in keys else None
            key = found or texts[place].strip().casefold()
            if key in seen:  # each distinct line once
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
