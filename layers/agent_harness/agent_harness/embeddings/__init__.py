"""Embedding models: the seam (``embeddings.base``), the providers, and the bounded
wrapper every caller uses (``embeddings.embedder``). ``embedder_for`` builds the one
of the settings on first use, so importing a handler imports no provider, no numpy
and no model (docs/design.md#recall-by-meaning)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_harness.embeddings.base import EmbeddingModel, EmbeddingSpec, parse_embedding_spec

if TYPE_CHECKING:
    from agent_harness.embeddings.embedder import Embedder
    from agent_harness.settings import Settings
    from agent_harness.tokens import TokenCounter

__all__ = [
    "EmbeddingModel",
    "EmbeddingSpec",
    "build_embedding_model",
    "embedder_for",
    "parse_embedding_spec",
]


def build_embedding_model(spec: EmbeddingSpec, settings: Settings, **deps: Any) -> EmbeddingModel:
    """The provider of ``spec`` (not ``off``); ``deps`` may inject ``http_client`` or a
    ``bedrock_client``."""
    if spec.provider == "stand-in":
        from agent_harness.embeddings.stand_in import StandInEmbeddingModel

        return StandInEmbeddingModel()
    if spec.provider == "local":
        from agent_harness.embeddings.local import LocalEmbeddingModel

        return LocalEmbeddingModel(spec.model)
    if spec.provider in ("openai", "ollama"):
        from agent_harness.embeddings.openai import OpenAIEmbeddingModel

        return OpenAIEmbeddingModel.from_settings(spec, settings, client=deps.get("http_client"))
    if spec.provider == "bedrock":
        from agent_harness.embeddings.bedrock import BedrockEmbeddingModel

        return BedrockEmbeddingModel.from_settings(
            spec, settings, client=deps.get("bedrock_client")
        )
    raise ValueError(f"no embedding provider for {spec}")


def embedder_for(
    settings: Settings, counter: TokenCounter | None = None, **deps: Any
) -> Embedder | None:
    """The settings' embedder, or None when HARNESS_EMBEDDING_MODEL is ``off``."""
    spec = parse_embedding_spec(settings.embedding_model)
    if spec.off:
        return None
    from agent_harness.embeddings.embedder import Embedder

    return Embedder(
        build_embedding_model(spec, settings, **deps),
        batch=settings.embedding_batch,
        max_chars=settings.embedding_max_chars,
        timeout_seconds=settings.embedding_timeout_seconds,
        counter=counter,
    )
