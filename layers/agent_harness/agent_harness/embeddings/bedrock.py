"""Amazon Bedrock embeddings through InvokeModel (``bedrock:<model id>``).

    amazon.titan-embed-text-v2:0     one call per text: {"inputText", "dimensions",
                                     "normalize": true} -> {"embedding"}; dimensions
                                     256, 512 or 1024 (HARNESS_EMBEDDING_DIMENSIONS,
                                     default 1024)
    cohere.embed-english-v3          one call per 96 texts: {"texts", "input_type":
    cohere.embed-multilingual-v3     "search_query" | "search_document", "truncate":
                                     "END"} -> {"embeddings"}; 1024 dimensions

Uses the function's own AWS credentials; the role may invoke only the model named
(template.yaml, docs/deploy.md#permissions). The boto3 ``bedrock-runtime`` client is
built on first use (injectable: tests use botocore's Stubber), and errors are typed by
``models.bedrock.typed_error``, as for the chat models (an input over the model's limit
is a plain ``ModelBadRequestError``: there is nothing to compact). Titan's calls run a few
at a time. A batch's calls together (a query's one) are bounded by
HARNESS_EMBEDDING_TIMEOUT_SECONDS; calls still in flight then are abandoned with
``ModelTimeoutError``.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError, ConnectTimeoutError, ReadTimeoutError

from agent_harness.errors import (
    ConfigError,
    ContextOverflowError,
    ModelBadRequestError,
    ModelError,
    ModelOutputError,
    ModelTimeoutError,
    ModelUnavailableError,
)
from agent_harness.models.bedrock import typed_error

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agent_harness.embeddings.base import EmbeddingSpec, Kind
    from agent_harness.settings import Settings

__all__ = ["COHERE_BATCH", "TITAN_DIMENSIONS", "BedrockEmbeddingModel", "family"]

TITAN_DIMENSIONS = (256, 512, 1024)
COHERE_DIMENSIONS = 1024
#: the most texts one Cohere Embed call takes
COHERE_BATCH = 96
#: Titan calls (one per text) in flight at once
WORKERS = 8
_COHERE_KIND = {"query": "search_query", "passage": "search_document"}
_FAMILIES = {
    "amazon.titan-embed-text-v2": "titan",
    "cohere.embed-english-v3": "cohere",
    "cohere.embed-multilingual-v3": "cohere",
}


def family(model: str) -> str:
    """``titan`` or ``cohere``; ``ConfigError`` for a model this provider cannot call."""
    for prefix, name in _FAMILIES.items():
        if model.startswith(prefix):
            return name
    known = ", ".join(f"{p}..." for p in _FAMILIES)
    raise ConfigError(
        f"HARNESS_EMBEDDING_MODEL=bedrock:{model}: unknown Bedrock embedding model; known: {known}"
    )


def _bedrock_client(timeout: float) -> Any:
    import boto3
    from botocore.config import Config

    # botocore retries a throttled call (a batch is many calls); the caller's deadline
    # still bounds the whole
    config = Config(
        read_timeout=timeout,
        connect_timeout=min(5.0, timeout),
        retries={"mode": "standard", "total_max_attempts": 3},
        max_pool_connections=WORKERS + 2,
    )
    return boto3.client("bedrock-runtime", config=config)


class BedrockEmbeddingModel:
    def __init__(
        self,
        model: str,
        *,
        client: Any = None,
        dimensions: int | None = None,
        timeout: float = 3.0,
        workers: int = WORKERS,
    ) -> None:
        self._model = model
        self._family = family(model)
        if self._family == "titan":
            self._dimensions = dimensions or 1024
            if self._dimensions not in TITAN_DIMENSIONS:
                raise ConfigError(
                    f"HARNESS_EMBEDDING_DIMENSIONS={dimensions}: {model} makes vectors of "
                    f"{', '.join(map(str, TITAN_DIMENSIONS))} dimensions"
                )
        else:
            self._dimensions = dimensions or COHERE_DIMENSIONS
            if self._dimensions != COHERE_DIMENSIONS:
                raise ConfigError(
                    f"HARNESS_EMBEDDING_DIMENSIONS={dimensions}: {model} makes vectors of "
                    f"{COHERE_DIMENSIONS} dimensions only"
                )
        self._client = client
        self._timeout = timeout
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="embed")
        self.name = f"bedrock:{model}"
        self.asymmetric = model.startswith("cohere.")  # search_query / search_document

    @classmethod
    def from_settings(
        cls, spec: EmbeddingSpec, settings: Settings, client: Any = None
    ) -> BedrockEmbeddingModel:
        return cls(
            spec.model,
            client=client,
            dimensions=settings.embedding_dimensions,
            timeout=settings.embedding_timeout_seconds,
        )

    def _bedrock(self) -> Any:
        if self._client is None:
            self._client = _bedrock_client(self._timeout)
        return self._client

    def bodies(self, texts: Sequence[str], kind: Kind) -> list[dict[str, Any]]:
        """The InvokeModel bodies for ``texts`` embedded as ``kind``, in order."""
        if self._family == "titan":  # Titan takes no kind: the same vector either way
            return [
                {"inputText": text, "dimensions": self._dimensions, "normalize": True}
                for text in texts
            ]
        return [
            {
                "texts": list(texts[i : i + COHERE_BATCH]),
                "input_type": _COHERE_KIND[kind],
                "truncate": "END",  # a long text is cut, not the whole batch refused
            }
            for i in range(0, len(texts), COHERE_BATCH)
        ]

    def embed(self, texts: Sequence[str], kind: Kind) -> list[list[float]]:
        if not texts:
            return []
        deadline = time.monotonic() + self._timeout
        try:
            client = self._bedrock()
        except BotoCoreError as exc:  # no region, no credentials
            raise ModelUnavailableError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
        bodies = self.bodies(texts, kind)
        futures = [self._pool.submit(self._invoke, client, body) for body in bodies]
        answers: list[dict[str, Any]] = []
        try:
            for future in futures:
                answers.append(future.result(timeout=max(0.1, deadline - time.monotonic())))
        except FutureTimeout as exc:
            raise ModelTimeoutError(f"{self.name} did not answer in time") from exc
        finally:
            _cancel(futures)
        vectors: list[list[float]] = []
        for body, answer in zip(bodies, answers, strict=True):
            vectors += self._vectors(body, answer)
        return vectors

    def _invoke(self, client: Any, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = client.invoke_model(
                modelId=self._model,
                body=json.dumps(body),
                contentType="application/json",
                accept="application/json",
            )
            raw = response["body"].read()
        except (ReadTimeoutError, ConnectTimeoutError) as exc:
            raise ModelTimeoutError(f"{self.name} did not answer in time") from exc
        except ClientError as exc:
            raise _typed(self.name, exc) from exc
        except BotoCoreError as exc:
            raise ModelUnavailableError(
                f"{self.name} is unreachable: {type(exc).__name__}"
            ) from exc
        try:
            answer = json.loads(raw)
        except ValueError as exc:
            raise ModelOutputError(f"{self.name} returned a non-JSON body") from exc
        if not isinstance(answer, dict):
            raise ModelOutputError(f"{self.name} returned an unexpected body")
        return answer

    def _vectors(self, body: dict[str, Any], answer: dict[str, Any]) -> list[list[float]]:
        want = len(body["texts"]) if "texts" in body else 1
        try:
            rows = [answer["embedding"]] if self._family == "titan" else answer["embeddings"]
            vectors = [[float(v) for v in row] for row in rows]
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelOutputError(f"{self.name} returned malformed embeddings") from exc
        if len(vectors) != want:
            raise ModelOutputError(f"{self.name} returned {len(vectors)} embeddings for {want}")
        if any(len(v) != self._dimensions for v in vectors):
            raise ModelOutputError(
                f"{self.name} returned an embedding that is not of {self._dimensions} dimensions"
            )
        return vectors


def _typed(name: str, exc: ClientError) -> ModelError:
    error = typed_error(name, exc)
    if isinstance(error, ContextOverflowError):  # nothing to compact: the text is too long
        return ModelBadRequestError(str(error))
    return error


def _cancel(futures: list[Future[dict[str, Any]]]) -> None:
    """Calls not started are dropped; a call in flight runs out on its read timeout."""
    for future in futures:
        future.cancel()
