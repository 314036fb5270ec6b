"""A typed client of agent-harness, long-term memory for LLM agents (docs/client.md).

    from agent_harness_client import AgentHarness

    client = AgentHarness("http://127.0.0.1:3000", user_id="me")
    client.sessions.send("s1", "Remember that I prefer green tea.")
    client.memory.search("tea", match_mode="ranked").hits

``AsyncAgentHarness`` is the same, async. The answers are pydantic models
(``agent_harness_client.models``, ``agent_harness_client.openai_types``); errors are
exceptions (``agent_harness_client.errors``). With the extras: ``HarnessSession``
(``agent_harness_client.agents``, the OpenAI Agents SDK's Session) and ``HarnessStore``
(``agent_harness_client.langgraph``, LangGraph's BaseStore).
"""

from __future__ import annotations

from agent_harness_client._async import AsyncAgentHarness
from agent_harness_client._sync import AgentHarness
from agent_harness_client._version import VERSION
from agent_harness_client.errors import (
    AgentHarnessError,
    APIConnectionError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InternalServerError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    PreconditionFailedError,
    PreconditionRequiredError,
    RateLimitError,
    UnprocessableEntityError,
)

__version__ = VERSION

__all__ = [
    "APIConnectionError",
    "AgentHarness",
    "AgentHarnessError",
    "AsyncAgentHarness",
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "InternalServerError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "PreconditionFailedError",
    "PreconditionRequiredError",
    "RateLimitError",
    "UnprocessableEntityError",
    "__version__",
]
