"""The parsed forms of setting values: model strings (chat and embedding), durations,
flush triggers.

``settings`` validates the environment with these and re-exports them; they are kept
apart so the configuration module stays one page of settings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "EMBEDDING_PROVIDERS",
    "LOCAL_MODELS",
    "PROVIDERS",
    "EmbeddingSpec",
    "FlushTrigger",
    "ModelSpec",
    "parse_duration",
    "parse_embedding_spec",
    "parse_flush_trigger",
    "parse_model_spec",
]

#: Providers a model string may name (``provider:model``); ``offline`` stands alone.
PROVIDERS = ("offline", "openai", "ollama", "anthropic", "bedrock")


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model string: ``openai:gpt-4.1-mini`` -> ("openai", "gpt-4.1-mini")."""

    provider: str
    name: str

    def __str__(self) -> str:
        return self.provider if self.provider == "offline" else f"{self.provider}:{self.name}"


def parse_model_spec(value: str) -> ModelSpec:
    """Parse ``provider:model`` (or ``offline``) and check the provider is known."""
    text = value.strip()
    if text == "offline":
        return ModelSpec("offline", "offline")
    provider, sep, name = text.partition(":")
    if not sep or not name.strip():
        raise ValueError(f"model string {value!r} must look like 'provider:model' or 'offline'")
    if provider not in PROVIDERS:
        raise ValueError(f"unknown model provider {provider!r}; known: {', '.join(PROVIDERS)}")
    return ModelSpec(provider, name.strip())


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: str) -> float:
    """``300`` (seconds), ``90s``, ``5m``, ``1h30m``, ``250ms``, ``1d`` -> seconds."""
    text = value.strip().lower().replace(" ", "")
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        return float(text)
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if not text or pos != len(text):
        raise ValueError(f"{value!r} is not a duration like 300, 90s, 5m, 1h30m or 250ms")
    return total


@dataclass(frozen=True)
class FlushTrigger:
    """When a post-turn job runs the memory model (docs/architecture.md#never-and-on-compact).

    ``always``: every job. ``throttled``: the first eligible job at once, then at most one
    per ``gap_seconds`` per session (a skipped job's turns wait for the next flush, which a
    tail sweep guarantees). ``on_compact``: only when the session is compacted (the
    reference's NEVER). ``never``: no automatic extraction at all (memory_save only).
    """

    mode: Literal["always", "never", "throttled", "on_compact"]
    gap_seconds: float = 0.0

    def __str__(self) -> str:
        if self.mode == "throttled":
            return f"throttled:{self.gap_seconds:g}s"
        return self.mode


_PLAIN_TRIGGERS = {
    "always": FlushTrigger("always"),
    "never": FlushTrigger("never"),
    "on_compact": FlushTrigger("on_compact"),
}


def parse_flush_trigger(value: str) -> FlushTrigger:
    """``always`` | ``never`` | ``on_compact`` | ``throttled:<duration>``; a zero gap is
    ``always`` (as in the reference); a negative or missing one is an error."""
    text = value.strip().lower()
    if text in _PLAIN_TRIGGERS:
        return _PLAIN_TRIGGERS[text]
    mode, sep, gap = text.partition(":")
    if mode != "throttled" or not sep:
        raise ValueError(
            f"unknown flush trigger {value!r}; use always, never, on_compact or "
            "throttled:<duration> (e.g. throttled:10m)"
        )
    seconds = parse_duration(gap)
    return FlushTrigger("always") if seconds == 0 else FlushTrigger("throttled", seconds)


#: embedding providers (``HARNESS_EMBEDDING_MODEL``, agent_harness.embeddings)
EMBEDDING_PROVIDERS = ("off", "local", "openai", "ollama", "bedrock", "stand-in")
#: the models the in-process provider knows (each ships inside a package)
LOCAL_MODELS = ("multilingual-e5-small",)


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
