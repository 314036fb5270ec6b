"""Chat models: the interface, the providers, and the per-role registry.

``ModelRegistry.for_role("memory")`` returns the model configured for that role
(docs/design.md#models), building each distinct model once per container and only when first
used, so importing a handler never imports httpx or reads a secret. Every built model
is wrapped for its role in ``ResilientModel`` (deadline, retries, usage, metrics).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Literal

from agent_harness.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Callable

    from pydantic import SecretStr

    from agent_harness.models.base import (
        ChatModel,
        ChatRequest,
        ChatResponse,
        Message,
        ToolCall,
        ToolSpec,
        Usage,
    )
    from agent_harness.models.resilience import Deadline
    from agent_harness.settings import ModelSpec, Settings
    from agent_harness.tokens import TokenCounter

__all__ = [
    "ChatModel",
    "ChatRequest",
    "ChatResponse",
    "Message",
    "ModelRegistry",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "build_chat_model",
]

Role = Literal["agent", "memory", "compaction"]


def _secret_from_parameter(name: str) -> Callable[[], str | None]:
    """Read an API key from SSM Parameter Store (SecureString) through the Powertools
    Parameters cache: fetched on first use, refreshed every five minutes."""

    def read() -> str | None:
        from aws_lambda_powertools.utilities import parameters

        value = parameters.get_parameter(name, decrypt=True, max_age=300)
        return str(value) if value else None

    return read


def _secret_from_secrets_manager(name: str) -> Callable[[], str | None]:
    """Read an API key from Secrets Manager through the Powertools Parameters cache. The
    secret is the key itself, or JSON with an ``api_key`` field (or a single field)."""

    def read() -> str | None:
        import json

        from aws_lambda_powertools.utilities import parameters

        value = str(parameters.get_secret(name, max_age=300) or "")
        if value.startswith("{"):
            try:
                fields = json.loads(value)
            except ValueError:
                return value
            if isinstance(fields, dict):
                key = fields.get("api_key") or (
                    next(iter(fields.values())) if len(fields) == 1 else None
                )
                return str(key) if key else None
        return value or None

    return read


def _api_key(
    secret: SecretStr | None, parameter: str | None, secret_name: str | None = None
) -> Callable[[], str | None] | str | None:
    """A key given directly wins; otherwise read lazily (and cached) from the named SSM
    parameter or Secrets Manager secret. The key is never logged."""
    if secret is not None:
        return secret.get_secret_value()
    if parameter:
        return _secret_from_parameter(parameter)
    return _secret_from_secrets_manager(secret_name) if secret_name else None


def build_chat_model(
    spec: ModelSpec, settings: Settings, *, counter: TokenCounter | None = None, **deps: Any
) -> ChatModel:
    """Construct the provider of ``spec``; ``deps`` may inject ``http_client``."""
    if spec.provider == "offline":
        from agent_harness.models.offline import OfflineChatModel

        return OfflineChatModel(counter=counter)
    if spec.provider in ("openai", "ollama"):
        from agent_harness.models.openai import OpenAIChatModel

        if spec.provider == "ollama":
            return OpenAIChatModel(
                spec.name,
                base_url=settings.ollama_base_url,
                timeout=settings.model_timeout_seconds,
                client=deps.get("http_client"),
                label="ollama",
                max_output_tokens=settings.model_max_output_tokens,
            )
        return OpenAIChatModel(
            spec.name,
            base_url=settings.openai_base_url,
            api_key=_api_key(
                settings.openai_api_key,
                settings.openai_api_key_parameter,
                settings.openai_api_key_secret,
            ),
            timeout=settings.model_timeout_seconds,
            client=deps.get("http_client"),
            max_output_tokens=settings.model_max_output_tokens,
            auth_header=settings.openai_auth_header,
        )
    if spec.provider == "anthropic":
        from agent_harness.models.anthropic import AnthropicChatModel

        return AnthropicChatModel(
            spec.name,
            api_key=_api_key(
                settings.anthropic_api_key,
                settings.anthropic_api_key_parameter,
                settings.anthropic_api_key_secret,
            ),
            base_url=settings.anthropic_base_url,
            timeout=settings.model_timeout_seconds,
            max_output_tokens=settings.model_max_output_tokens,
            client=deps.get("http_client"),
        )
    if spec.provider == "bedrock":
        from agent_harness.models.bedrock import BedrockChatModel

        client = deps.get("bedrock_client") or _bedrock_client(settings.model_timeout_seconds)
        return BedrockChatModel(
            spec.name,
            client=client,
            max_output_tokens=settings.model_max_output_tokens,
            timeout=settings.model_timeout_seconds,
        )
    raise ConfigError(f"unknown model provider {spec.provider!r}")  # pragma: no cover


def _bedrock_client(timeout: float) -> Any:
    import boto3
    from botocore.config import Config

    # one attempt per call: models.resilience retries with the deadline in view
    config = Config(read_timeout=timeout, connect_timeout=5, retries={"total_max_attempts": 1})
    return boto3.client("bedrock-runtime", config=config)


class ModelRegistry:
    """Builds each configured model once, lazily, and wraps it per role. Tests pass
    ``overrides`` per role (used as they are: no retries, no deadline)."""

    def __init__(
        self,
        settings: Settings,
        *,
        counter: TokenCounter | None = None,
        overrides: dict[str, ChatModel] | None = None,
        deadline: Deadline | None = None,
        sleep: Callable[[float], None] | None = None,
        **deps: Any,
    ) -> None:
        self._settings = settings
        self._counter = counter
        self._overrides = dict(overrides or {})
        self._deadline = deadline
        self._sleep = sleep
        self._deps = deps
        self._built: dict[str, ChatModel] = {}
        self._wrapped: dict[str, ChatModel] = {}
        self._lock = threading.Lock()

    def for_role(self, role: Role) -> ChatModel:
        if role in self._overrides:
            return self._overrides[role]
        with self._lock:
            wrapped = self._wrapped.get(role)
            if wrapped is None:
                from agent_harness.models.resilience import ResilientModel, RetryPolicy

                spec = self._settings.model_for(role)
                model = self._built.get(str(spec))
                if model is None:
                    model = build_chat_model(
                        spec, self._settings, counter=self._counter, **self._deps
                    )
                    self._built[str(spec)] = model
                wrapped = ResilientModel(
                    model,
                    role=role,
                    timeout=self._settings.model_timeout_seconds,
                    deadline=self._deadline,
                    policy=RetryPolicy(max_attempts=self._settings.model_max_attempts),
                    counter=self._counter,
                    sleep=self._sleep or time.sleep,
                )
                self._wrapped[role] = wrapped
            return wrapped


_BASE = frozenset(
    ("ChatModel", "ChatRequest", "ChatResponse", "Message", "ToolCall", "ToolSpec", "Usage")
)


def __getattr__(name: str) -> Any:
    """The message types, re-exported from ``models.base`` on first use: a handler's
    init builds the registry without building them (docs/design.md#budgets)."""
    if name in _BASE:
        from agent_harness.models import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
