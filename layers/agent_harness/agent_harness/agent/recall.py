"""Automatic recall inside a turn: the ledgers are read beside the turn's own reads, then
the lines for the new message are chosen (memory.recall) and rendered as reference data
(agent.context). At most one more request on a warm container: the LIST of memory/,
which the container reuses for ``recall_listing_seconds`` (a flush lands seconds after
its turn, and the session's own recent turns are in its context anyway); the ledgers come
from the per-container cache while their ETags hold. With ``recall_messages`` the thread
segments are read the same way beside them, both folders listed in that one request
(``memory.engine.corpus.joint_listing``: they are neighbours in key order); then a GET of each
month changed since (after a turn, the current month's)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from itertools import chain, zip_longest
from typing import TYPE_CHECKING, Any, TypeVar

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness import markup
from agent_harness.agent.context import memory_reference, recall_frame_tokens, recall_reference
from agent_harness.errors import HarnessError
from agent_harness.memory.engine.cache import building
from agent_harness.memory.engine.corpus import (
    fact_texts,
    index_read,
    joint_listing,
    load_ledgers,
    load_segments,
    recent_listing,
)
from agent_harness.memory.engine.fusion import floor
from agent_harness.memory.engine.segments import record_text
from agent_harness.memory.engine.truth import truth_of
from agent_harness.memory.facts.authority import fact_id
from agent_harness.memory.facts.gate import Policy
from agent_harness.memory.facts.ledger import day_of
from agent_harness.memory.recall import (
    MESSAGE_CHARS,
    Meaning,
    PastMessages,
    Recalled,
    RecallReport,
    recall_query,
    select_lines,
)
from agent_harness.memory.vectors import lines_by_meaning, query_vectors
from agent_harness.paths import LEDGER_DIR, SEGMENT_DIR, VECTOR_DIR
from agent_harness.records import RecallCut, RecalledLine

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from concurrent.futures import Future

    from agent_harness.agent.scoped import ScopeMemories
    from agent_harness.embeddings.queries import QueryVectors
    from agent_harness.ids import User
    from agent_harness.memory.engine.cache import MemoryIndexCache
    from agent_harness.memory.engine.file_index import FileIndex
    from agent_harness.memory.engine.segments import Segment
    from agent_harness.models.base import Message
    from agent_harness.ports import ObjectInfo, StoredObject
    from agent_harness.runtime import Runtime

__all__ = ["Recall", "RecallPreview", "RecallResult", "preview_recall", "start_recall"]

T = TypeVar("T")
logger = Logger(child=True)
metrics = Metrics()
#: threads that read the ledgers while the turn reads its context and MEMORY.md
_READERS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="recall")


class Recall:
    """The ledgers (and the thread segments, with ``recall_messages``) being read for one
    turn; ``message`` waits for them."""

    def __init__(
        self,
        rt: Runtime,
        user: User,
        session: str | None = None,
        *,
        fresh: bool = False,
        queries: QueryVectors | None = None,
        text: str | None = None,
    ) -> None:
        self._rt, self._user, self._session = rt, user, session
        self._queries = queries
        if queries is not None and text is not None:
            queries.prefetch(text)  # embedded while the reads below are in flight
        # a turn may reuse the container's recent LIST of memory/; an operator's preview
        # must see what was just flushed
        listing_seconds = 0 if fresh else rt.settings.recall_listing_seconds
        cache, listings = rt.search_cache, rt.listings
        read = partial(_read, rt=rt, user=user, cache=cache, max_age=listing_seconds)
        self._ledgers: Future[list[tuple[str, FileIndex]]]
        self._segments: Future[list[tuple[str, Segment]]] | None = None
        self._joint: Future[dict[str, list[ObjectInfo]]] | None = None
        self._listing_seconds = listing_seconds
        if not rt.settings.recall_messages:
            self._ledgers = _READERS.submit(read, load_ledgers, None)
            return
        # the folders in one LIST (the vectors' too), each then read apart. No deadlock: a
        # task waits only on one submitted before it, so already started
        joint = _READERS.submit(joint_listing, rt, user, listings, listing_seconds)
        self._joint = joint
        self._ledgers = _READERS.submit(read, load_ledgers, joint, LEDGER_DIR)
        self._segments = _READERS.submit(read, load_segments, joint, SEGMENT_DIR)

    def current_memory(self, memory: StoredObject | None, loaded_at: str) -> StoredObject | None:
        """MEMORY.md as the turn injects it: without lines that restate a fact since
        superseded, retracted or expired (memory.engine.truth), from the ledgers this
        recall reads anyway. A failed read leaves MEMORY.md as stored."""
        if memory is None:
            return None
        try:
            files = self._ledgers.result()
        except HarnessError:
            return memory  # message() reports the failure
        day = day_of(datetime.fromisoformat(loaded_at), self._rt.settings.zone)
        current = truth_of(files, day).current_memory(memory.content)
        return memory if current == memory.content else replace(memory, content=current)

    def message(
        self,
        memory: StoredObject | None,
        reference: Message | None,
        text: str,
        loaded_at: str,
        context: Sequence[Message] = (),
        scoped: ScopeMemories | None = None,
    ) -> RecallResult:
        """The recall message for the new message ``text``, its tokens, its lines and
        what was left out. ``context`` (the session's messages) gives the query the
        user's previous message, and no line repeats one of them as thread search keeps
        it (capped, so the comparison costs little): an OpenAI client without a session
        id sends its conversation each time, so earlier requests' sessions hold copies.
        A failed read costs the turn its recall, never the turn itself."""
        said = [m.content for m in context if m.role == "user"]
        try:
            files = self._ledgers.result()
        except HarnessError as exc:
            logger.warning("recall skipped: reading the ledgers failed", extra={"error": str(exc)})
            metrics.add_metric("RecallFailures", MetricUnit.Count, 1)
            return RecallResult(None, 0, [], RecallReport())
        settings = self._rt.settings
        truth = truth_of(files, day_of(datetime.fromisoformat(loaded_at), settings.zone))
        if memory is not None:
            files = [(memory.path, index_read(self._rt.search_cache, self._user, memory)), *files]
        shown = markup.extract(reference.content, markup.MEMORY) or "" if reference else ""
        counter = self._rt.counter
        budget = settings.recall_max_tokens  # the whole message: frame and lines
        report = RecallReport()
        query = recall_query(text, said[-1] if said else None)
        in_context = [text, *map(record_text, context)]
        with building():  # a cold ranking indexes the files once, for the cache
            messages = self._past_messages(files)
            room = budget - recall_frame_tokens(counter, loaded_at, messages is not None)
            lines = select_lines(
                files,
                query,
                shown=shown,
                counter=counter,
                max_tokens=room,
                min_score=settings.recall_min_score,
                messages=messages,
                in_context=in_context,
                report=report,
                truth=truth,
                meaning=self._meaning(files, query),
            )
            if scoped is not None:
                lines = self._with_scopes(lines, scoped, query, loaded_at, room, in_context, report)
        message, tokens = recall_reference(lines, counter, loaded_at)
        while lines and tokens > budget:  # lines counted apart can tokenize a bit longer
            report.over_budget.insert(0, lines[-1])
            lines = lines[:-1]
            message, tokens = recall_reference(lines, counter, loaded_at)
        metrics.add_metric("RecalledLines", MetricUnit.Count, len(lines))
        return RecallResult(message, tokens, lines, report)

    def _meaning(self, files: list[tuple[str, FileIndex]], query: str) -> Meaning | None:
        """The message's cosine with each line (recall by meaning), or None: no
        embedding model, or the query could not be embedded in time (ranking stays
        lexical; ``Embedder.query`` logs and counts it)."""
        queries = self._queries or query_vectors(self._rt, self._user)
        if queries is None:
            return None
        vector = queries.vector(query)
        if vector is None:
            return None
        embedder = queries.embedder
        try:
            listed = self._vector_listing()
            cosines = lines_by_meaning(self._rt, self._user, files, embedder, vector, listed)
        except HarnessError as exc:
            logger.warning("recall by meaning skipped", extra={"error": str(exc)})
            return None
        return cosines, floor(embedder.name, self._rt.settings.embedding_min_score)

    def _vector_listing(self) -> list[ObjectInfo] | None:
        """The vector objects as this turn's joint LIST (or the container's recent one)
        found them; None: not listed, a GET decides."""
        joint = self._joint.result() if self._joint is not None else {}
        if VECTOR_DIR in joint:
            return joint[VECTOR_DIR]
        rt = self._rt
        return recent_listing(rt, self._user, VECTOR_DIR, rt.listings, self._listing_seconds)

    def _with_scopes(
        self,
        own: list[Recalled],
        scoped: ScopeMemories,
        query: str,
        loaded_at: str,
        max_tokens: int,
        in_context: list[str],
        report: RecallReport,
    ) -> list[Recalled]:
        """The user's lines and each bound scope's (chosen from its MEMORY.md and ledgers
        as the user's are, each labelled with its scope), taken in turn, the user's first,
        within the one budget."""
        settings, counter = self._rt.settings, self._rt.counter
        day = day_of(datetime.fromisoformat(loaded_at), settings.zone)
        sources = [own]
        memories = dict(scoped.loaded())
        for grant, files in scoped.ledgers():
            scope = str(grant.scope)
            truth = truth_of(files, day)
            memory = memories.get(grant)
            if memory is not None:
                indexed = index_read(self._rt.search_cache, grant.owner, memory)
                files = [(memory.path, indexed), *files]
            found = select_lines(
                files,
                query,
                shown=scoped.shown.get(scope, ""),
                counter=counter,
                max_tokens=max_tokens,
                min_score=settings.recall_min_score,
                in_context=in_context,
                report=report,
                truth=truth,
            )
            sources.append([replace(line, scope=scope) for line in found])
        chosen, used = [], 0
        for line in (r for r in chain.from_iterable(zip_longest(*sources)) if r is not None):
            cost = counter.count(line.render()) + 1
            if used + cost > max_tokens:
                report.over_budget.append(line)
                continue
            chosen.append(line)
            used += cost
        return chosen

    def _past_messages(self, ledgers: list[tuple[str, FileIndex]]) -> PastMessages | None:
        """The segments to recall past messages from (None: off, or their read failed:
        the memory lines are still recalled)."""
        if self._segments is None:
            return None
        try:
            segments = self._segments.result()
        except HarnessError as exc:
            logger.warning("past messages skipped: reading them failed", extra={"error": str(exc)})
            metrics.add_metric("RecallFailures", MetricUnit.Count, 1)
            return None
        facts = fact_texts(self._rt.search_cache, self._user, ledgers, segments)
        settings = self._rt.settings
        return PastMessages(
            segments,
            facts,
            self._session,
            settings.zone,
            settings.recall_roles,
            Policy.of(settings),
        )


@dataclass(frozen=True)
class RecallResult:
    """Automatic recall's message for one turn, and what the turn records of it."""

    message: Message | None
    tokens: int
    lines: list[Recalled]
    report: RecallReport

    @property
    def sources(self) -> list[str]:
        return [line.source for line in self.lines]

    def recorded(self) -> dict[str, Any]:
        """The turn's ``MemoryInjection`` fields: each line shown with its fact id,
        authority, score and day, and what the budget, the floor and the checks cut."""
        shown = [
            RecalledLine(
                source=line.source,
                scope=line.scope,
                fact_id=fact_id(line.text),
                authority=line.authority,
                score=round(line.score, 4),
                day=line.day,
                text=line.text[:MESSAGE_CHARS],
                session_id=line.said[1] if line.said else None,
                turn=line.said[2] if line.said else None,
            )
            for line in self.lines
        ]
        report = self.report
        cut = RecallCut(
            budget=[line.source for line in report.over_budget],
            floor=report.below_floor,
            held=report.held,
        )
        return {"recall_tokens": self.tokens, "recalled": self.sources, "lines": shown, "cut": cut}


def _read(
    load: Callable[..., list[tuple[str, T]]],
    joint: Future[dict[str, list[ObjectInfo]]] | None,
    folder: str = "",
    *,
    rt: Runtime,
    user: User,
    cache: MemoryIndexCache,
    max_age: float,
) -> list[tuple[str, T]]:
    """``load`` (ledgers or segments) from the joint listing's ``folder`` if it has it,
    else from its own listing."""
    listed = joint.result().get(folder) if joint is not None else None
    return load(rt, user, cache, rt.listings, max_age, listed=listed)


def start_recall(
    rt: Runtime,
    user: User,
    session: str | None = None,
    *,
    fresh: bool = False,
    queries: QueryVectors | None = None,
    text: str | None = None,
) -> Recall | None:
    """Start reading for automatic recall (for a turn of ``session``, whose own messages
    are not recalled), or None when it is off. ``queries``: the turn's query vectors
    (metered with the turn; None: made on use, counted in the user's day), which start
    embedding the turn's message ``text`` now."""
    settings = rt.settings
    if settings.disable_memory_hooks or settings.recall_max_tokens <= 0:
        return None
    return Recall(rt, user, session, fresh=fresh, queries=queries, text=text)


@dataclass(frozen=True)
class RecallPreview:
    """What automatic recall would inject for a message now (``off``: it is disabled)."""

    off: bool
    content: str | None
    tokens: int
    sources: list[str]


def preview_recall(rt: Runtime, user: User, text: str) -> RecallPreview:
    """The recall message a new session's first turn with ``text`` would get, built by the
    turn's own code (MEMORY.md's lines skipped as the turn skips them); writes nothing."""
    from agent_harness.clock import iso
    from agent_harness.paths import MEMORY_FILE

    recall = start_recall(rt, user, None, fresh=True)
    if recall is None:
        return RecallPreview(True, None, 0, [])
    memory = rt.store.get(user, MEMORY_FILE)
    now = iso(rt.clock.now())
    reference, _ = memory_reference(memory, rt.counter, rt.settings.consolidation_max_tokens, now)
    found = recall.message(memory, reference, text, now)
    content = found.message.content if found.message else None
    return RecallPreview(False, content, found.tokens, found.sources)
