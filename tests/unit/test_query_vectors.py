"""One request's query vectors: each text embedded once, in the background when asked
early, never waited on past the provider's timeout or the request's deadline."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from agent_harness.embeddings.embedder import Embedder
from agent_harness.embeddings.queries import MAX_QUERIES, QueryVectors
from agent_harness.models.base import Usage


class Model:
    name = "openai:test"

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.gate = gate
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        if self.gate is not None:
            self.gate.wait(5)
        self.texts += texts
        return [[1.0, float(len(t))] for t in texts]


def test_a_prefetched_text_is_embedded_once_and_counted_once() -> None:
    model, spent = Model(), []
    queries = QueryVectors(Embedder(model), spent.append)
    queries.prefetch("where do I live?")
    queries.prefetch("where do I live?")
    first = queries.vector("where do I live?")
    again = queries.vector("where do I live?")
    assert first is again and first is not None
    assert model.texts == ["where do I live?"]
    assert len(spent) == 1 and isinstance(spent[0], Usage)


def test_a_prefetch_still_running_at_the_timeout_gives_no_vector() -> None:
    gate = threading.Event()
    queries = QueryVectors(Embedder(Model(gate), timeout_seconds=0.05), None)
    queries.prefetch("slow")
    assert queries.vector("slow") is None  # the search then ranks by words
    gate.set()


def test_no_time_left_in_the_request_gives_no_vector_and_no_call() -> None:
    model = Model()
    queries = QueryVectors(Embedder(model), None, seconds_left=lambda: 0.0)
    assert queries.vector("anything") is None
    assert model.texts == []


def test_a_request_embeds_at_most_max_queries_texts() -> None:
    model = Model()
    queries = QueryVectors(Embedder(model), None)
    found = [queries.vector(f"query {n}") for n in range(MAX_QUERIES + 3)]
    assert sum(v is not None for v in found) == MAX_QUERIES
    assert len(model.texts) == MAX_QUERIES


def test_a_query_embedding_leaves_the_requests_first_model_call_unguarded() -> None:
    from agent_harness.meter import Meter

    asked: list[int] = []
    meter = Meter(guard=asked.append)
    meter.add("embedding", Usage(input_tokens=7), guarded=False)
    meter.before_call()  # the agent's first model call: no budget read before it
    assert asked == []
    meter.add("agent", Usage(input_tokens=100, output_tokens=5))
    meter.before_call()  # a second model call is guarded, the embedding's tokens counted
    assert asked == [112]
    assert meter.pending.calls == {"embedding": 1, "agent": 1}
