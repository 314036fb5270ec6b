"""Context windows per model, for dynamic compaction
(docs/architecture.md#compaction-at-turn-start).

``HARNESS_MODEL_CONTEXT_WINDOW`` wins when set; otherwise the agent model's name is
looked up here by prefix (the first, most specific match wins). Bedrock inference
profiles (``us.``, ``eu.``, ``apac.``, ``global.``) match their model id. Ollama is
never looked up: its server runs a model with its own ``num_ctx`` (2,048 to 4,096 by
default), not the model's nominal window, so set the override to what the server uses.
An unknown model gives 0, and compaction falls back to its fixed thresholds.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_harness.settings import Settings

__all__ = ["CONTEXT_WINDOWS", "context_window", "window_of"]

#: (model name prefix, tokens). Providers' published windows.
CONTEXT_WINDOWS: tuple[tuple[str, int], ...] = (
    # OpenAI
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("o4-mini", 200_000),
    ("o3", 200_000),
    ("o1", 200_000),
    # Anthropic (API names and Bedrock ids)
    ("claude-", 200_000),
    ("anthropic.claude-", 200_000),
    # Amazon, Meta, Mistral on Bedrock
    ("amazon.nova-premier", 1_000_000),
    ("amazon.nova-pro", 300_000),
    ("amazon.nova-lite", 300_000),
    ("amazon.nova-micro", 128_000),
    ("meta.llama4", 1_000_000),
    ("meta.llama3-3", 128_000),
    ("meta.llama3-2", 128_000),
    ("meta.llama3-1", 128_000),
    ("mistral.mistral-large-2407", 128_000),
    ("mistral.mistral-large", 32_000),
    # open models as OpenAI-compatible servers usually name them
    ("deepseek-chat", 64_000),
    ("deepseek-reasoner", 64_000),
    ("qwen3", 32_768),
    ("qwen2.5", 32_768),
    ("llama-3.3", 128_000),
    ("llama-3.1", 128_000),
    ("llama3.3", 128_000),
    ("llama3.1", 128_000),
)
_PROFILE = re.compile(r"^(?:us|eu|apac|us-gov|global)\.")


def window_of(provider: str, name: str) -> int:
    """The published window of ``provider:name``, or 0 when unknown (or Ollama)."""
    if provider in ("offline", "ollama"):
        return 0
    model = _PROFILE.sub("", name.lower())
    model = model.rsplit("/", 1)[-1]  # "meta-llama/llama-3.1-8b" style names of gateways
    for prefix, tokens in CONTEXT_WINDOWS:
        if model.startswith(prefix):
            return tokens
    return 0


def context_window(settings: Settings) -> int:
    """The agent model's window: the override, else the table, else 0 (unknown)."""
    if settings.model_context_window > 0:
        return settings.model_context_window
    spec = settings.model_for("agent")
    return window_of(spec.provider, spec.name)
