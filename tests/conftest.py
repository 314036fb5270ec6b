"""Shared fixtures: a clean environment for every test, events from events/, a context."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parent.parent
EVENTS = ROOT / "events"

_CLEAN_PREFIXES = ("HARNESS_", "OPENAI_", "ANTHROPIC_", "OLLAMA_", "AWS_", "POWERTOOLS_")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test starts from the same environment: fake AWS credentials, no endpoint
    overrides, no model keys, Powertools quiet and without X-Ray. Metrics that library
    code added outside a handler are dropped afterwards, as a Lambda invocation's
    ``log_metrics`` flushes them (Powertools shares one metric set per process)."""
    import os

    from aws_lambda_powertools import Metrics

    for name in list(os.environ):
        if name.startswith(_CLEAN_PREFIXES) or name == "TIKTOKEN_CACHE_DIR":
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "agent-harness-test")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "AgentHarnessTest")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "WARNING")
    yield
    Metrics().clear_metrics()


def load_event(name: str, **changes: Any) -> dict[str, Any]:
    """An event from events/, with top-level keys replaced by ``changes``."""
    event = json.loads((EVENTS / name).read_text())
    event.update(changes)
    return event


@dataclass
class FakeLambdaContext:
    function_name: str = "test-function"
    function_version: str = "$LATEST"
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:test-function"
    memory_limit_in_mb: int = 512
    aws_request_id: str = "00000000-0000-0000-0000-000000000000"
    log_group_name: str = "/aws/lambda/test-function"
    log_stream_name: str = "2026/11/30/[$LATEST]0"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


@pytest.fixture
def lambda_context() -> FakeLambdaContext:
    return FakeLambdaContext()
