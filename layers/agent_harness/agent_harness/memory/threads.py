"""thread_search: every past message of a user, searchable without reading turn objects.

The post-turn job appends the messages of each new turn to a derived search segment, one
per month in the configured zone (``index/threads/YYYY-MM.jsonl``; the row format is
``memory.engine.segments``). Segments are appended with the same CAS loop as ledgers, in order
per user (FIFO group), and de-duplicated by (session, turn), so a redelivered job adds
nothing. They are derived data: running ``index_turns`` over a user's turn objects
recreates a lost or damaged segment. A search is one LIST plus one GET per month whose
ETag is not cached (docs/design.md#budgets), with the match modes of memory_search;
ranked, a message is also scored with the ledger facts naming its turn (one more LIST,
of memory/, and GETs of the ledgers not cached), and, with an embedding model, by its
meaning (``memory.vectors``: the month vectors the post-turn job writes after indexing,
fused as memory search fuses; no match mode given and no message holding the phrase,
the same ranking, each hit marked ``ranked``).

No hit shows a secret: segment rows are redacted as they are indexed, and every hit
again as it is returned (``without_secrets``: a segment indexed before a pattern existed).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import groupby
from typing import TYPE_CHECKING

from agent_harness.memory.engine import index
from agent_harness.memory.engine.cache import building
from agent_harness.memory.engine.corpus import load_fact_texts, load_segments
from agent_harness.memory.engine.fusion import MESSAGES, floor, fuse
from agent_harness.memory.engine.index import search_files
from agent_harness.memory.engine.segments import entries, indexed_turns
from agent_harness.memory.engine.vectors import message_body
from agent_harness.memory.facts.secrets import without_secrets
from agent_harness.memory.owner.writes import Writes
from agent_harness.memory.vectors import messages_by_meaning, query_vectors
from agent_harness.paths import segment_path

if TYPE_CHECKING:
    from agent_harness.embeddings.queries import QueryVectors
    from agent_harness.ids import User
    from agent_harness.memory.engine.cache import MemoryIndexCache
    from agent_harness.memory.engine.index import Hit, Mode
    from agent_harness.memory.engine.segments import Segment
    from agent_harness.records import TurnRecord
    from agent_harness.runtime import Runtime

__all__ = ["ThreadHit", "format_thread_hits", "index_turns", "search_threads"]


@dataclass(frozen=True)
class ThreadHit:
    session_id: str
    turn: int
    role: str
    at: str
    text: str
    score: float | None = None
    #: "ranked" when the caller named no mode and no message held the phrase
    match_mode: str | None = None
    #: how a hybrid-ranked hit matched: "words", "meaning" or "both"
    matched: str | None = None


def index_turns(rt: Runtime, user: User, records: list[TurnRecord]) -> int:
    """Append the messages of ``records`` to their month segments, skipping turns a
    segment already holds (re-checked after every lost race). Returns entries added."""
    zone = rt.settings.zone
    added = 0
    ordered = sorted(records, key=lambda r: (segment_path(r.created().astimezone(zone)), r.turn))
    for path, group in groupby(ordered, key=lambda r: segment_path(r.created().astimezone(zone))):
        batch = list(group)
        written = [0]

        def build(
            existing: str, batch: list[TurnRecord] = batch, written: list[int] = written
        ) -> str | None:
            done = indexed_turns(existing)
            rows = [row for r in batch if (r.session_id, r.turn) not in done for row in entries(r)]
            written[0] = len(rows)
            return "".join(f"{row}\n" for row in rows) or None

        if Writes(rt, user).append_index(path, build) is not None:
            added += written[0]
    return added


def search_threads(
    rt: Runtime,
    user: User,
    query: str,
    mode: Mode,
    limit: int,
    cache: MemoryIndexCache,
    *,
    queries: QueryVectors | None = None,
) -> list[ThreadHit]:
    """``queries``: the request's query vectors (None: made here, counted in ``user``'s
    day); ranked (and ``auto`` once no message holds the phrase), the hybrid ranking
    when an embedding model is configured."""
    if not query or not query.strip():
        return []
    with building():  # a cold query fills the cache; its joins are kept there too
        segments = load_segments(rt, user, cache)
        by_path = dict(segments)
        facts, weight = None, index.FACT_WEIGHT  # read at call time: the ablation switches it
        if mode == "ranked" and weight:
            facts = load_fact_texts(rt, user, cache, segments)
        indexes = [(p, s.index) for p, s in segments]
        hits: list[Hit] = search_files(indexes, query, mode, limit, facts, weight)
        fell_back = mode == "auto" and (not hits or hits[0].match_mode == "ranked")
        if mode == "ranked" or fell_back:
            if queries is None:
                queries = query_vectors(rt, user)
            hits = _by_meaning(rt, user, segments, query, hits, limit, queries, auto=fell_back)
    out = []
    for hit in hits:
        session_id, turn, role, at = by_path[hit.path].meta(hit.line - 1)
        text = without_secrets(hit.text)  # the few hits returned, not every line ranked
        out.append(
            ThreadHit(session_id, turn, role, at, text, hit.score, hit.match_mode, hit.matched)
        )
    return out


def _by_meaning(
    rt: Runtime,
    user: User,
    segments: list[tuple[str, Segment]],
    query: str,
    lexical: list[Hit],
    limit: int,
    queries: QueryVectors | None,
    *,
    auto: bool,
) -> list[Hit]:
    """The hybrid ranking of messages (memory.engine.fusion, each message where it was
    said: no two are merged); the lexical one without an embedding model or a vector."""
    vector = queries.vector(query) if queries is not None else None
    if queries is None or vector is None:
        return lexical
    cosines = messages_by_meaning(rt, user, segments, queries.embedder, vector)
    cut = floor(queries.name, rt.settings.embedding_min_score)
    indexes = [(p, s.index) for p, s in segments]
    fused = fuse(
        indexes,
        query,
        lexical,
        cosines,
        limit,
        cut,
        profile=MESSAGES,
        body_of=message_body,
        distinct=False,
    )
    return [replace(h, match_mode="ranked") for h in fused] if auto else fused


def format_thread_hits(query: str, hits: list[ThreadHit]) -> str:
    if not query or not query.strip():
        return "No query provided"
    if not hits:
        return f"No past messages found for: {query}"
    rows = [
        f"Session {h.session_id}, turn {h.turn} ({h.role}, {h.at}): {h.text[:300]}" for h in hits
    ]
    noun = "message" if len(hits) == 1 else "messages"
    how = " (ranked: no message holds the phrase)" if hits[0].match_mode else ""
    return f"Found {len(hits)} {noun} for: {query}{how}\n" + "\n".join(rows)
