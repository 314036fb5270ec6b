"""``HarnessStore``: LangGraph's ``BaseStore`` over the stack's memory
(``pip install "./clients/python[langgraph]"``).

    from agent_harness_client.langgraph import HarnessStore

    store = HarnessStore()  # AGENT_HARNESS_URL, AGENT_HARNESS_USER or _TOKEN
    graph = builder.compile(store=store)

Namespaces are whose memory: ``("memories", <user>)``, ``("memories",)`` or
``("user",)`` is the caller's own (the client's identity decides who that is: a
``<user>`` that is not the client's ``user_id`` is refused); ``("scope",
"project:apollo")`` is that shared scope's (reading takes its member role, writing its
maintainer role).

An item is a fact: ``put(namespace, key, {"text": ...})`` (or ``"content"``) saves the
text as one fact through the gate (``POST /v1/memory/save``), ending in a visible key
mark, ``I prefer oolong. [key:tea]``, that finds it again; a ``put`` of a key that holds
a fact supersedes that fact with the new text (a correction, kept in its history);
``delete`` retracts it. ``get`` finds the current fact of the key (a phrase search for
its mark), ``search(namespace, query=...)`` ranks memory by words and, with an
embedding model on the stack, by meaning (``match_mode="ranked"``); without a query it
lists the keyed facts. The item's ``value`` is what the stack keeps of the fact:
``text`` (mark and tags left out), ``fact_id``, ``authority`` (who said it: ``save:api``
for a save, ``user`` for a correction of yours), ``state`` (``current``), ``day``,
``path`` and ``line``. Other fields of a value put are not kept: memory holds sentences.
A line the gate holds for review (an instruction, a claim about credentials) is not
stored until a person approves it (``client.memory.review()``), so ``get`` finds
nothing meanwhile. Keys hold no ``]`` and no line break; TTLs are not supported.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        Item,
        ListNamespacesOp,
        PutOp,
        SearchItem,
        SearchOp,
    )
except ImportError as missing:  # the extra is not installed
    raise ImportError(
        'HarnessStore needs LangGraph: pip install "agent-harness-client[langgraph]"'
    ) from missing

from agent_harness_client import _endpoints as e
from agent_harness_client._async import AsyncAgentHarness
from agent_harness_client._base import Call
from agent_harness_client._sync import AgentHarness
from agent_harness_client.errors import NotFoundError

if TYPE_CHECKING:
    from collections.abc import Generator, Iterable, Sequence

    from langgraph.store.base import Op, Result

    from agent_harness_client.models import Fact, MatchMode, MemoryHit, MemorySearch

__all__ = ["HarnessStore", "key_mark"]

_MARK = re.compile(r"\s*\[key:([^\]\n]+)\]")
_TAG = re.compile(r"^\s*-\s*\[[^\]]+\]\s*")
_CHANGE = re.compile(r"\s*\((?:supersedes|retracts) [^)]*\)\s*$")
#: the most hits one search reads (the API's cap)
MAX_HITS = 200


def key_mark(key: str) -> str:
    """The mark that ends the fact of ``key``: ``[key:<key>]``."""
    if not key or "]" in key or "\n" in key or "\r" in key:
        raise ValueError(f"a key holds no ']' and no line break, and is not empty: {key!r}")
    return f"[key:{key}]"


def _key_of(text: str) -> str | None:
    found = _MARK.findall(text)
    return str(found[-1]) if found else None


def _clean(text: str) -> str:
    """A line's text without its bullet and tag, key mark and lifecycle marks."""
    return _MARK.sub("", _CHANGE.sub("", _TAG.sub("", text))).strip()


def _time(value: str | None) -> datetime:
    if not value:
        return datetime.now(UTC)
    when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _day_time(fact_id: str | None) -> datetime:
    """The start of a ledger fact's day (its id begins with it); now, for a line with
    no fact id (a MEMORY.md line)."""
    return _time(f"{fact_id[:10]}T00:00:00+00:00" if fact_id else None)


#: what a ledger line tells of a fact that its MEMORY.md line does not
_LEDGER = ("fact_id", "state", "day")


def _value(hit: MemoryHit) -> dict[str, Any]:
    """An item's value, from the search hit of its line."""
    return {
        "text": _clean(hit.text),
        "fact_id": hit.fact_id,
        "authority": hit.authority,
        "state": hit.state or "current",
        "day": hit.fact_id[:10] if hit.fact_id else None,
        "path": hit.path,
        "line": hit.line,
    }


def _compare(value: Any, condition: Any) -> bool:
    """LangGraph's filter on one field: a value, or operators (``$eq``, ``$gt``, ...)."""
    if not isinstance(condition, dict):
        return bool(value == condition)
    for op, arg in condition.items():
        if op == "$eq":
            ok = value == arg
        elif op == "$ne":
            ok = value != arg
        elif value is None:
            ok = False
        elif op == "$gt":
            ok = value > arg
        elif op == "$gte":
            ok = value >= arg
        elif op == "$lt":
            ok = value < arg
        elif op == "$lte":
            ok = value <= arg
        else:
            raise ValueError(f"unknown filter operator {op!r}")
        if not ok:
            return False
    return True


def _matches(value: dict[str, Any], wanted: dict[str, Any] | None) -> bool:
    return all(_compare(value.get(k), c) for k, c in (wanted or {}).items())


def _pattern(namespace: tuple[str, ...], path: tuple[str, ...], suffix: bool) -> bool:
    if len(path) > len(namespace):
        return False
    part = namespace[-len(path) :] if suffix and path else namespace[: len(path)]
    return all(p in ("*", n) for p, n in zip(path, part, strict=True))


class HarnessStore(BaseStore):
    """LangGraph's store over the stack's memory (see the module).

    ``client`` and ``async_client``: the clients ``batch`` and ``abatch`` use (default:
    one made like the other, or both configured by the environment); ``scopes``: the
    shared scopes ``list_namespaces`` names; ``match_mode``: how ``search`` with a
    query matches (default ``ranked``)."""

    def __init__(
        self,
        client: AgentHarness | None = None,
        *,
        async_client: AsyncAgentHarness | None = None,
        scopes: Sequence[str] = (),
        match_mode: MatchMode = "ranked",
    ) -> None:
        like = client or async_client
        self._settings: dict[str, Any] = {}
        if like is not None:
            self._settings = {
                "base_url": like.base_url,
                "token": like.token,
                "user_id": like.user_id,
                "timeout": like.timeout,
                "max_retries": like.max_retries,
                "headers": like._headers,
            }
        self._client = client
        self._async_client = async_client
        self.scopes = tuple(scopes)
        self.match_mode = match_mode

    @property
    def client(self) -> AgentHarness:
        """The sync client (``batch``), made like the async one when not given."""
        if self._client is None:
            self._client = AgentHarness(**self._settings)
        return self._client

    @property
    def async_client(self) -> AsyncAgentHarness:
        """The async client (``abatch``), made like the sync one when not given."""
        if self._async_client is None:
            self._async_client = AsyncAgentHarness(**self._settings)
        return self._async_client

    @property
    def user_id(self) -> str | None:
        """The user the store acts as, when its client names one (dev mode)."""
        like = self._client or self._async_client or self.client
        return like.user_id

    # -- where: a namespace is whose memory --------------------------------------------------
    def _scope(self, namespace: tuple[str, ...], *, prefix: bool = False) -> str | None:
        """The shared scope ``namespace`` names, or None for the caller's own memory
        (``prefix``: a search's, where ``()`` is the caller's memory too)."""
        if namespace[:1] == ("scope",) and len(namespace) == 2:
            return namespace[1]
        if namespace in (("user",), ("memories",)) or (prefix and namespace == ()):
            return None
        if namespace[:1] == ("memories",) and len(namespace) == 2:
            user = self.user_id
            if user is not None and namespace[1] != user:
                raise ValueError(
                    f"namespace {namespace} names {namespace[1]!r}, but this store acts as "
                    f"{user!r}: its memory is ('memories', {user!r})"
                )
            return None
        raise ValueError(
            f"namespace {namespace}: the caller's memory is ('memories', <user>), "
            "('memories',) or ('user',); a shared scope's is ('scope', '<scope>')"
        )

    # -- plans: the calls of each operation, sent by the sync or the async client ------------
    def _find(self, scope: str | None, key: str) -> Generator[Call[Any], Any, MemoryHit | None]:
        """The current fact of ``key``: the newest ledger line with its mark (it has a
        fact id), else a MEMORY.md line with it."""
        body = {"query": key_mark(key), "match_mode": "phrase", "limit": 50, "scope": scope}
        found: MemorySearch = yield Call(e.SEARCH, body=body)
        hits = [h for h in found.hits if _key_of(h.text) == key]
        ledger = [h for h in hits if h.fact_id]
        if ledger:
            return max(ledger, key=lambda h: ((h.fact_id or "")[:10], h.line))
        return hits[0] if hits else None

    def _get(self, op: GetOp) -> Generator[Call[Any], Any, Item | None]:
        scope = self._scope(op.namespace)
        hit = yield from self._find(scope, op.key)
        if hit is None:
            return None
        value = _value(hit)
        created = updated = _day_time(hit.fact_id)
        if hit.fact_id is not None:
            try:
                fact: Fact = yield Call(e.FACT, {"fact_id": hit.fact_id}, {"scope": scope})
            except NotFoundError:  # retired meanwhile
                return None
            value |= {"text": _clean(fact.text), "authority": fact.authority}
            value |= {"state": fact.state, "day": fact.day, "line": fact.line}
            created = _time(min([fact.recorded, *(h.recorded for h in fact.history)]))
            updated = _time(fact.recorded)
        return Item(
            value=value, key=op.key, namespace=op.namespace, created_at=created, updated_at=updated
        )

    def _put(self, op: PutOp) -> Generator[Call[Any], Any, None]:
        scope = self._scope(op.namespace)
        mark = key_mark(op.key)
        existing = yield from self._find(scope, op.key)
        if op.value is None:  # a delete: retract the key's fact
            if existing is not None and existing.fact_id:
                body = {"scope": scope}
                yield Call(e.SUPERSEDE, {"fact_id": existing.fact_id}, body=body)
            return None
        text = op.value.get("text", op.value.get("content"))
        if not isinstance(text, str) or not text.strip():
            raise ValueError("a value to put holds its fact as a string in 'text' or 'content'")
        line = f"{' '.join(text.split())} {mark}"
        if existing is not None and _clean(existing.text) == _clean(line):
            return None  # already so
        if existing is not None and existing.fact_id:
            body = {"by": line, "scope": scope}
            yield Call(e.SUPERSEDE, {"fact_id": existing.fact_id}, body=body)
        else:
            yield Call(e.SAVE, body={"content": line, "scope": scope})
        return None

    def _search(self, op: SearchOp) -> Generator[Call[Any], Any, list[SearchItem]]:
        scope = self._scope(op.namespace_prefix, prefix=True)
        namespace = op.namespace_prefix or ("user",)
        # a fact is often found twice (MEMORY.md and its ledger); a filter drops some
        wanted = MAX_HITS if op.filter else min(MAX_HITS, 2 * (op.offset + op.limit))
        query, mode = (op.query, self.match_mode) if op.query else ("[key:", "phrase")
        body = {"query": query, "match_mode": mode, "limit": wanted, "scope": scope}
        found: MemorySearch = yield Call(e.SEARCH, body=body)
        values: dict[str, dict[str, Any]] = {}
        scores: dict[str, float | None] = {}
        for hit in found.hits:
            key = _key_of(hit.text) or hit.fact_id or f"{hit.path}#{hit.line}"
            if key not in values:  # the best ranked line of the key
                values[key], scores[key] = _value(hit), hit.score
            elif hit.fact_id and not values[key]["fact_id"]:  # and its ledger line's id
                values[key] |= {k: v for k, v in _value(hit).items() if k in _LEDGER}
        items = [
            SearchItem(namespace, key, value, when, when, score=scores[key])
            for key, value in values.items()
            if _matches(value, op.filter)
            for when in [_day_time(value["fact_id"])]
        ]
        return items[op.offset : op.offset + op.limit]

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        user = self.user_id
        known = [("memories", user) if user else ("user",)]
        known += [("scope", scope) for scope in self.scopes]
        out: list[tuple[str, ...]] = []
        for namespace in known:
            if not all(
                _pattern(namespace, c.path, c.match_type == "suffix")
                for c in op.match_conditions or ()
            ):
                continue
            cut = namespace[: op.max_depth] if op.max_depth is not None else namespace
            if cut not in out:
                out.append(cut)
        return out[op.offset : op.offset + op.limit]

    def _plan(self, op: Op) -> Generator[Call[Any], Any, Result]:
        if isinstance(op, GetOp):
            return (yield from self._get(op))
        if isinstance(op, PutOp):
            yield from self._put(op)
            return None
        if isinstance(op, SearchOp):
            return (yield from self._search(op))
        if isinstance(op, ListNamespacesOp):
            return self._namespaces(op)
        raise TypeError(f"unknown store operation: {op!r}")

    # -- running the plans ---------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            plan = self._plan(op)
            try:
                call = next(plan)
                while True:
                    try:
                        answer = self.client._request(call)
                    except NotFoundError as exc:
                        call = plan.throw(exc)
                    else:
                        call = plan.send(answer)
            except StopIteration as done:
                results.append(cast("Result", done.value))
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            plan = self._plan(op)
            try:
                call = next(plan)
                while True:
                    try:
                        answer = await self.async_client._request(call)
                    except NotFoundError as exc:
                        call = plan.throw(exc)
                    else:
                        call = plan.send(answer)
            except StopIteration as done:
                results.append(cast("Result", done.value))
        return results
