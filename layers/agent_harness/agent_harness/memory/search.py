"""memory_search: the lines of MEMORY.md and the ledgers that match a query.

A thin service over the engine (``memory.engine.index``: the match modes and ranking) and the
reader (``memory.engine.corpus``). Results keep file then line order for phrase/all/any
(MEMORY.md first, then memory/** by path, archive included); ``ranked`` is best first.

Current facts only (memory.engine.truth): a superseded, retracted or expired ledger fact,
a retraction record, and a MEMORY.md line that restates a retired fact are left out;
``include_superseded`` keeps them, each labelled with its state, by what and when.
``as_of`` (a day) answers from the ledgers as they stood at its end: facts recorded
later are not there, and what was current then is (MEMORY.md, which has no days, is left
out). Every ledger hit carries its fact id, for memory_correct; a current fact whose
ground changed (one it depends on was retired) carries ``recheck``: possibly outdated.

Reading (docs/design.md#budgets): one GET of MEMORY.md, one LIST of memory/, concurrent
GETs of the ledgers whose ETag is not in the warm per-container cache. A ranked query
over ledgers that name turns also reads the thread-search segments the same way (one
LIST of index/threads/, GETs of the months not cached), to score a fact with the
messages of the turns it came from.

A hit never shows a secret: its text is redacted as the gate redacts a fact
(``without_secrets``) once it is labelled, so a MEMORY.md line edited by hand, or a
ledger line written before a pattern existed, is shown as ``[redacted secret]`` too.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from agent_harness.memory.engine import index
from agent_harness.memory.engine.cache import building
from agent_harness.memory.engine.corpus import load_memory_files, load_turn_texts
from agent_harness.memory.engine.fusion import floor, fuse
from agent_harness.memory.engine.index import Hit, Mode, search_files
from agent_harness.memory.engine.truth import Truth, day_of_path, truth_of
from agent_harness.memory.facts.authority import parse_fact
from agent_harness.memory.facts.ledger import day_of
from agent_harness.memory.facts.secrets import without_secrets
from agent_harness.memory.vectors import lines_by_meaning, query_vectors
from agent_harness.paths import MEMORY_FILE

if TYPE_CHECKING:
    from agent_harness.embeddings.queries import QueryVectors
    from agent_harness.ids import User
    from agent_harness.memory.engine.cache import MemoryIndexCache
    from agent_harness.memory.engine.file_index import FileIndex
    from agent_harness.runtime import Runtime

__all__ = ["format_hits", "format_scoped_hits", "label", "search_memory"]

#: at most this many hits more are ranked, to fill ``limit`` once retired ones are out
OVERFETCH = 200


def search_memory(
    rt: Runtime,
    user: User,
    query: str,
    mode: Mode,
    limit: int,
    cache: MemoryIndexCache,
    *,
    include_superseded: bool = False,
    as_of: str | None = None,
    queries: QueryVectors | None = None,
) -> list[Hit]:
    """``queries``: the request's query vectors (one embedding per text however many
    memories it searches, counted where the request counts; None: made here, counted in
    ``user``'s day)."""
    if not query or not query.strip():
        return []
    with building():  # a cold query fills the cache; its joins are kept there too
        files = load_memory_files(rt, user, cache)
        if as_of is not None:
            files = [(p, f) for p, f in files if (day_of_path(p) or "9") <= as_of]
        today = as_of or day_of(rt.clock.now(), rt.settings.zone)
        truth = truth_of(files, today)
        turns = None
        weight = index.SOURCE_WEIGHT  # read at call time: the benchmark's ablation switches it
        if mode == "ranked" and weight and any(f.linked_groups() for _, f in files):
            turns = load_turn_texts(rt, user, cache)
        retired = sum(1 for st in truth.life.status.values() if st.state != "current")
        wanted = limit + (0 if include_superseded else min(retired, OVERFETCH))
        hits = search_files(files, query, mode, wanted, turns, weight)
        fell_back = mode == "auto" and (not hits or hits[0].match_mode == "ranked")
        if mode == "ranked" or fell_back:
            if queries is None:
                queries = query_vectors(rt, user)
            hits = _by_meaning(rt, user, files, query, hits, wanted, queries, auto=fell_back)
    labelled = (_labelled(h, truth) for h in hits)
    kept = [h for h in labelled if include_superseded or h.state in (None, "current")]
    # after labelling (truth finds a fact by its stored text), on the few hits returned
    return [replace(h, text=without_secrets(h.text)) for h in kept[:limit]]


def _by_meaning(
    rt: Runtime,
    user: User,
    files: list[tuple[str, FileIndex]],
    query: str,
    lexical: list[Hit],
    limit: int,
    queries: QueryVectors | None,
    *,
    auto: bool,
) -> list[Hit]:
    """The hybrid ranking (memory.engine.fusion) when an embedding model is configured;
    the lexical one otherwise, or when the query cannot be embedded in time
    (``Embedder.query``: logged, counted, never a failed search)."""
    if queries is None:
        return lexical
    vector = queries.vector(query)
    if vector is None:
        return lexical
    embedder = queries.embedder
    cosines = lines_by_meaning(rt, user, files, embedder, vector)
    cut = floor(embedder.name, rt.settings.embedding_min_score)
    fused = fuse(files, query, lexical, cosines, limit, cut)
    return [replace(h, match_mode="ranked") for h in fused] if auto else fused


def _labelled(hit: Hit, truth: Truth) -> Hit:
    parsed = parse_fact(hit.text)
    authority = parsed.authority if parsed is not None else None
    if hit.path == MEMORY_FILE:
        gone = truth.restated(hit.text)
        if gone is None:
            return replace(hit, authority=authority)
        status = truth.life.status[gone.id]
        state, by, at = status.state, status.by, status.at
        return replace(hit, authority=authority, fact_id=gone.id, state=state, by=by, at=at)
    fact = truth.fact(hit.path, hit.text)
    if fact is None:
        return replace(hit, authority=authority)
    status = truth.status(fact)
    return replace(
        hit,
        authority=authority,
        fact_id=fact.id,
        state="record" if fact.is_record else status.state,
        by=status.by,
        at=status.at,
        recheck=tuple(status.recheck),
    )


def label(hit: Hit) -> str:
    """What a hit's fact id and state say, for a reader: ``(fact <id>)``, and when it is
    not current, since when and by what."""
    if hit.fact_id is None:
        return ""
    if hit.state in (None, "current"):
        note = f" (fact {hit.fact_id}"
        if hit.recheck:
            note += f"; possibly outdated: {', '.join(hit.recheck)} changed"
        return note + ")"
    if hit.state == "record":
        return f" (record {hit.fact_id})"
    when = f" {hit.at}" if hit.at else ""
    by = f" by {hit.by}" if hit.by else ""
    return f" (fact {hit.fact_id}: {hit.state}{when}{by}; no longer current)"


def format_hits(query: str, hits: list[Hit]) -> str:
    """The tool's text answer: ``Source: <path>#<line> (fact <id>): <text>`` per hit (a
    fact's text starts with its authority, ``[user] ...``)."""
    return format_scoped_hits(query, [(None, hits)])


def format_scoped_hits(query: str, found: list[tuple[str | None, list[Hit]]]) -> str:
    """memory_search's answer over several memories: each hit's row as ``format_hits``
    writes it, a shared scope's labelled ``[scope <name>]``."""
    if not query or not query.strip():
        return "No query provided"
    rows = [
        ("" if scope is None else f"[scope {scope}] ")
        + f"Source: {h.path}#{h.line}{label(h)}: {h.text.strip()}"
        for scope, hits in found
        for h in hits
    ]
    if not rows:
        return f"No matching memories found for: {query}"
    noun = "match" if len(rows) == 1 else "matches"
    ranked = any(h.match_mode for _, hits in found for h in hits)
    how = " (ranked: no line holds the phrase)" if ranked else ""
    return f"Found {len(rows)} {noun} for: {query}{how}\n" + "\n".join(rows)
