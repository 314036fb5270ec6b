"""Recall by meaning: vectors written after memory writes, hybrid ranking, the fall back
of a search that names no mode, and a failing provider that leaves ranking lexical.

A scripted embedding model stands in for a real one: each word maps to a concept, a
text's vector is the sum of its concepts', so "beverage" meets "tea" as a real model's
would, and a question about nothing stored meets nothing. (The real local model is
proven in tests/integration/test_recall_by_meaning_local.py.)"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import pytest

from agent_harness.api.routes import build_app
from agent_harness.embeddings.embedder import Embedder
from agent_harness.errors import ModelUnavailableError
from agent_harness.ids import User
from agent_harness.memory.engine.vectors import decode, line_key, vector_path
from agent_harness.memory.vectors import refresh_vectors
from agent_harness.settings import Settings
from local_stack.lambdas import context_for, http_event
from tests.fakes import make_runtime

ALICE = User.from_id("alice")
CONCEPTS = {
    "tea": "drink",
    "coffee": "drink",
    "beverage": "drink",
    "morning": "dawn",
    "day": "dawn",
    "peanuts": "food",
    "eat": "food",
    "food": "food",
    "daughter": "child",
    "kid": "child",
    "lyon": "place",
    "city": "place",
    "moved": "home",
    "live": "home",
    "blood": "body",
    "type": "kind",
}
AXES = [*sorted(set(CONCEPTS.values())), "other"]
FACTS = [
    "I prefer green tea over coffee in the morning.",
    "My daughter Mia is allergic to peanuts.",
    "I moved to Lyon last month.",
]
QUESTIONS = [
    ("What hot beverage do I like to start my day with?", FACTS[0]),
    ("Which food must my kid never eat?", FACTS[1]),
    ("In which city do I live now?", FACTS[2]),
]


class ConceptModel:
    """A scripted embedding model: a text's vector is the sum of its words' concepts."""

    name = "openai:concepts"

    def __init__(self, *, failing: bool = False) -> None:
        self.failing = failing
        self.calls: list[tuple[str, list[str]]] = []

    def embed(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        self.calls.append((kind, list(texts)))
        if self.failing:
            raise ModelUnavailableError("embeddings down")
        out = []
        for text in texts:
            vector = [0.0] * len(AXES)
            vector[-1] = 0.05  # every text shares a little: cosines are never all zero
            for word in text.lower().replace("?", " ").replace(".", " ").split():
                if word in CONCEPTS:
                    vector[AXES.index(CONCEPTS[word])] += 1.0
            norm = math.sqrt(sum(v * v for v in vector))
            out.append([v / norm for v in vector])
        return out


def runtime(model: ConceptModel | None = None, **settings: object):
    rt = make_runtime(
        settings=Settings(auth_mode="dev", embedding_min_score=0.5, **settings)  # type: ignore[arg-type]
    )
    rt.embedder = Embedder(model or ConceptModel())
    rt.embeddings_built = True
    return rt


def call(rt, method: str, path: str, payload: object | None = None, **extra: str):
    headers = {"content-type": "application/json", "x-user-id": "alice", **extra}
    body = json.dumps(payload).encode() if payload is not None else b""
    event = http_event(method, path, headers=headers, body=body)
    response = build_app(rt).resolve(event, context_for("AgentCallFunction"))
    return response["statusCode"], json.loads(response["body"]) if response["body"] else None


def save(rt, *lines: str) -> None:
    """A save through the API, then its index job (as memory_flush runs it)."""
    status, _ = call(rt, "POST", "/v1/memory/save", {"content": "\n".join(lines)})
    assert status == 200
    index_jobs(rt)


def index_jobs(rt) -> int:
    from agent_harness.memory.jobs.index import run_index_job

    ran = 0
    while rt.queue.index:
        run_index_job(rt, rt.queue.index.pop(0))
        ran += 1
    return ran


def texts(body: dict) -> list[str]:
    return [h["text"] for h in body["hits"]]


@pytest.mark.parametrize(("question", "fact"), QUESTIONS)
def test_a_question_worded_unlike_its_fact_finds_it_by_meaning(question: str, fact: str) -> None:
    rt = runtime()
    save(rt, *FACTS)
    status, body = call(
        rt, "POST", "/v1/memory/search", {"query": question, "match_mode": "ranked", "limit": 5}
    )
    assert status == 200
    assert fact in body["hits"][0]["text"]
    assert body["hits"][0]["matched"] in ("meaning", "both")


def test_a_search_without_match_mode_falls_back_to_the_ranking_and_marks_its_hits() -> None:
    rt = runtime()
    save(rt, *FACTS)
    status, body = call(rt, "POST", "/v1/memory/search", {"query": QUESTIONS[1][0]})
    assert status == 200 and body["match_mode"] == "ranked"
    assert FACTS[1] in body["hits"][0]["text"]
    assert all(h["match_mode"] == "ranked" for h in body["hits"])
    # an explicit phrase stays literal
    _, body = call(
        rt, "POST", "/v1/memory/search", {"query": QUESTIONS[1][0], "match_mode": "phrase"}
    )
    assert body == {"hits": [], "match_mode": "phrase"}


def test_a_question_with_nothing_relevant_in_memory_gets_no_hits() -> None:
    rt = runtime()
    save(rt, *FACTS, "That's great! How's it going?")
    for mode in ("ranked", None):
        _, body = call(
            rt, "POST", "/v1/memory/search", {"query": "What is my blood type?", "match_mode": mode}
        )
        assert body["hits"] == [], mode


def test_with_embeddings_off_ranked_search_stays_lexical() -> None:
    rt = make_runtime(settings=Settings(auth_mode="dev"))
    assert rt.embeddings() is None
    save(rt, *FACTS)
    _, body = call(
        rt, "POST", "/v1/memory/search", {"query": QUESTIONS[0][0], "match_mode": "ranked"}
    )
    assert FACTS[0] not in " ".join(texts(body))
    assert not rt.store.list(ALICE, "index/vectors/")


def test_a_save_writes_the_vectors_of_its_lines_once_per_text() -> None:
    model = ConceptModel()
    rt = runtime(model)
    save(rt, *FACTS)
    save(rt, FACTS[0])  # the same fact again: no new vector
    stored = decode(rt.store.text(ALICE, vector_path(model.name)) or "", model.name)
    assert stored is not None
    assert sorted(stored.keys) == sorted(line_key(f) for f in FACTS)
    passages = [t for kind, batch in model.calls if kind == "passage" for t in batch]
    assert sorted(passages) == sorted(FACTS)


def test_a_save_embeds_nothing_on_its_request_and_queues_its_index_job() -> None:
    model = ConceptModel()
    rt = runtime(model)
    status, _ = call(rt, "POST", "/v1/memory/save", {"content": "\n".join(FACTS)})
    assert status == 200 and model.calls == []  # only a query is embedded on a request
    assert rt.store.text(ALICE, vector_path(model.name)) is None
    # found by meaning before the job runs: search embeds the few newest lines it lacks
    _, body = call(rt, "POST", "/v1/memory/search", {"query": QUESTIONS[1][0]})
    assert FACTS[1] in " ".join(texts(body))
    assert index_jobs(rt) == 1
    stored = decode(rt.store.text(ALICE, vector_path(model.name)) or "", model.name)
    assert stored is not None and sorted(stored.keys) == sorted(line_key(f) for f in FACTS)


def test_an_edit_queues_an_index_job_and_a_failed_queue_does_not_fail_it() -> None:
    rt = runtime()
    rt.queue.fail = True  # the queue is down: the edit stands, the job is counted unsent
    body = {"content": f"# Memory\n\n- {FACTS[2]}\n"}
    status, _ = call(rt, "PUT", "/v1/memory", body, **{"If-None-Match": "*"})
    assert status == 201 and rt.queue.index == []
    rt.queue.fail = False
    _, body = call(rt, "POST", "/v1/memory/search", {"query": QUESTIONS[2][0]})
    assert FACTS[2] in " ".join(texts(body))  # caught up by the search itself
    _, doc = call(rt, "GET", "/v1/memory")
    body = {"content": "# Memory\n\n- Tea.\n"}
    status, _ = call(rt, "PUT", "/v1/memory", body, **{"If-Match": doc["etag"]})
    assert status == 200 and len(rt.queue.index) == 1


def test_a_retracted_fact_loses_its_vector_at_once_without_an_embedding_call() -> None:
    model = ConceptModel()
    rt = runtime(model)
    save(rt, *FACTS)
    _, body = call(rt, "POST", "/v1/memory/search", {"query": "Lyon", "match_mode": "phrase"})
    fact_id = next(h["fact_id"] for h in body["hits"] if "fact_id" in h)
    calls = len(model.calls)
    status, _ = call(rt, "POST", f"/v1/memory/facts/{fact_id}/supersede", {"reason": "wrong"})
    assert status == 200
    assert len(model.calls) == calls  # dropping embeds nothing on the request path
    stored = decode(rt.store.text(ALICE, vector_path(model.name)) or "", model.name)
    assert stored is not None and line_key(FACTS[2]) not in stored.keys
    _, body = call(
        rt, "POST", "/v1/memory/search", {"query": QUESTIONS[2][0], "match_mode": "ranked"}
    )
    assert FACTS[2] not in " ".join(texts(body))


def test_another_embedding_model_writes_its_own_vectors() -> None:
    first, second = ConceptModel(), ConceptModel()
    second.name = "openai:other"
    rt = runtime(first)
    save(rt, *FACTS)
    rt.embedder = Embedder(second)
    refresh_vectors(rt, ALICE)
    assert rt.store.text(ALICE, vector_path("openai:other"))
    assert vector_path("openai:other") != vector_path(first.name)
    assert decode(rt.store.text(ALICE, vector_path(first.name)) or "", "openai:other") is None


def test_deleting_memory_deletes_its_vectors() -> None:
    model = ConceptModel()
    rt = runtime(model)
    save(rt, *FACTS)
    assert rt.store.text(ALICE, vector_path(model.name))
    status, _ = call(rt, "DELETE", "/v1/memory")
    assert status in (200, 202, 204)
    assert rt.store.text(ALICE, vector_path(model.name)) is None


def test_a_failing_embedding_provider_leaves_search_lexical_and_is_paused() -> None:
    model = ConceptModel()
    rt = runtime(model)
    save(rt, *FACTS)
    model.failing = True
    status, body = call(rt, "POST", "/v1/memory/search", {"query": "Lyon", "match_mode": "ranked"})
    assert status == 200 and FACTS[2] in body["hits"][0]["text"]  # by its words
    calls = len(model.calls)
    status, body = call(rt, "POST", "/v1/memory/search", {"query": "Mia", "match_mode": "ranked"})
    assert status == 200 and FACTS[1] in body["hits"][0]["text"]
    assert len(model.calls) == calls  # paused: the down provider is not asked again at once


def test_a_save_whose_embedding_fails_is_still_saved_and_found_by_words() -> None:
    rt = runtime(ConceptModel(failing=True))
    save(rt, *FACTS)
    _, body = call(rt, "POST", "/v1/memory/search", {"query": "peanuts"})
    assert FACTS[1] in body["hits"][0]["text"]


# -- thread search ---------------------------------------------------------------------
def drain(rt) -> None:
    from agent_harness.memory.jobs.flush import run_post_turn_job

    while rt.queue.post_turn:
        run_post_turn_job(rt, rt.queue.post_turn.pop(0))


def said(rt, *messages: str) -> None:
    from agent_harness.agent.turn import run_turn

    for n, message in enumerate(messages):
        run_turn(rt, ALICE, f"s{n}", message)
    drain(rt)


def test_the_post_turn_job_writes_the_vectors_of_each_months_messages() -> None:
    from agent_harness.memory.engine.vectors import thread_vector_path

    model = ConceptModel()
    rt = runtime(model)
    said(rt, FACTS[1])
    month = rt.store.list(ALICE, "index/threads/")[0].path
    stored = decode(rt.store.text(ALICE, thread_vector_path(model.name, month)) or "", model.name)
    assert stored is not None and line_key(FACTS[1]) in stored.keys


def test_thread_search_finds_a_message_worded_unlike_the_question() -> None:
    rt = runtime()
    said(rt, *FACTS)
    for mode in ("ranked", None):
        status, body = call(
            rt, "POST", "/v1/sessions/search", {"query": QUESTIONS[1][0], "match_mode": mode}
        )
        assert status == 200, body
        assert body["hits"][0]["text"] == FACTS[1], mode
        assert body["hits"][0]["matched"] in ("meaning", "both")
        if mode is None:
            assert body["match_mode"] == "ranked"
            assert all(h["match_mode"] == "ranked" for h in body["hits"])
    _, body = call(
        rt, "POST", "/v1/sessions/search", {"query": "What is my blood type?", "match_mode": None}
    )
    assert body["hits"] == []


def test_the_same_words_said_twice_are_two_thread_hits_with_one_vector() -> None:
    model = ConceptModel()
    rt = runtime(model)
    said(rt, FACTS[1], FACTS[1])
    _, body = call(
        rt, "POST", "/v1/sessions/search", {"query": QUESTIONS[1][0], "match_mode": "ranked"}
    )
    assert [h["session_id"] for h in body["hits"] if h["text"] == FACTS[1]] == ["s0", "s1"]
    passages = [t for kind, batch in model.calls if kind == "passage" for t in batch]
    assert passages.count(FACTS[1]) == 1


# -- counted ---------------------------------------------------------------------------
def embedding_usage(rt, user: User = ALICE) -> tuple[int, int]:
    """(calls, input tokens) of the ``embedding`` role in ``user``'s day."""
    from agent_harness.usage import usage_report

    days = usage_report(rt, user, 7).days
    return (
        sum(d.model_calls.get("embedding", 0) for d in days),
        sum(d.tokens["embedding"][0] for d in days),
    )


def test_a_turns_query_embedding_is_counted_with_the_turn_once_per_text() -> None:
    from agent_harness.agent.turn import run_turn

    model = ConceptModel()
    rt = runtime(model)
    save(rt, *FACTS)
    before = embedding_usage(rt)
    queries = len([k for k, _ in model.calls if k == "query"])
    run_turn(rt, ALICE, "s1", QUESTIONS[0][0])
    asked = [t for k, batch in model.calls if k == "query" for t in batch][queries:]
    assert asked == [QUESTIONS[0][0]]  # recall embedded the message once
    calls, tokens = embedding_usage(rt)
    assert calls == before[0] + 1 and tokens > before[1]


def test_a_search_of_a_shared_scope_counts_the_query_in_the_callers_day() -> None:
    from agent_harness.memory.search import search_memory
    from agent_harness.memory.vectors import query_vectors

    rt = runtime()
    scope = User.for_scope("project:apollo")
    queries = query_vectors(rt, ALICE)
    search_memory(rt, scope, QUESTIONS[0][0], "ranked", 5, rt.search_cache, queries=queries)
    search_memory(rt, ALICE, QUESTIONS[0][0], "ranked", 5, rt.search_cache, queries=queries)
    calls, tokens = embedding_usage(rt)
    assert calls == 1 and tokens > 0  # one text, embedded once, counted to the caller
    assert embedding_usage(rt, scope) == (0, 0)


def test_recall_by_meaning_reads_the_vectors_only_when_the_listing_shows_a_new_version() -> None:
    from agent_harness.agent.turn import run_turn

    rt = runtime(recall_listing_seconds=0)  # every turn lists, as after the window
    save(rt, *FACTS)
    got: list[str] = []
    original = rt.store.get
    rt.store.get = lambda user, path: got.append(path) or original(user, path)
    path = vector_path(ConceptModel.name)

    run_turn(rt, ALICE, "s1", QUESTIONS[0][0])  # a cold read: the object is fetched once
    run_turn(rt, ALICE, "s2", QUESTIONS[1][0])  # listed with the same ETag: no GET
    assert got.count(path) == 1
    save(rt, "We adopted a grey cat called Pixel.")  # a new version of the vectors
    got.clear()
    run_turn(rt, ALICE, "s3", QUESTIONS[2][0])
    assert got.count(path) <= 1  # read again at most once (this container wrote it)
