"""What the routes of the HTTP API answer (docs/api.md), as pydantic models: the response
schemas of the OpenAPI document (api.openapi) and the contract the typed client's models
(clients/python) are checked against. Here: sessions and turns, usage, budgets, scopes;
the memory routes' answers are in api.memory_answers, the OpenAI-shaped routes' in
api.openai_answers.

The routes build their answers as plain dicts; these models describe them. A field
without a default is always in the answer (perhaps null); one with a default is there
only when it applies (a shared scope's ``scope``, a ranked hit's ``score``). Imported
only by api.openapi, on ``GET /v1/openapi.json``: never on a turn's path.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from agent_harness.api.memory_answers import ConsolidationStatus  # noqa: TC001 (pydantic reads it)

__all__ = [
    "Health",
    "ImportAnswer",
    "MemberRemoved",
    "Members",
    "Membership",
    "ProtectedResource",
    "ScopeList",
    "ThreadLog",
    "ThreadSearch",
    "TurnAnswer",
    "TurnMemory",
    "UsageReport",
    "UserBudget",
]


class _Answer(BaseModel):
    model_config = ConfigDict(defer_build=True)


class Health(_Answer):
    status: str


# -- sessions ---------------------------------------------------------------------------------
class PendingToolCall(_Answer):
    """A call of one of the caller's tools that a paused turn awaits."""

    id: str
    name: str
    arguments: dict[str, Any]


class TokenCount(_Answer):
    input_tokens: int
    output_tokens: int


class TurnRoles(_Answer):
    agent: TokenCount
    compaction: TokenCount


class TurnUsage(_Answer):
    input_tokens: int
    output_tokens: int
    memory_tokens: int
    by_role: TurnRoles


class TurnAnswer(_Answer):
    """A turn: completed with its reply, or paused (``requires_action``) on tool calls."""

    session_id: str
    turn: int
    status: Literal["completed", "requires_action"]
    reply: str | None
    tool_calls: list[PendingToolCall]
    usage: TurnUsage
    compacted: bool
    flush: str | None
    model: str
    scopes: list[str]


class ToolCall(_Answer):
    id: str
    name: str
    arguments: str


class Message(_Answer):
    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: list[ToolCall]
    tool_call_id: str | None
    name: str | None


class RecalledLine(_Answer):
    source: str
    scope: str | None
    fact_id: str
    authority: str | None
    score: float
    day: str | None
    text: str
    session_id: str | None
    turn: int | None


class RecallCut(_Answer):
    budget: list[str]
    floor: int
    held: int


class ScopeInjection(_Answer):
    scope: str
    etag: str | None
    version_id: str | None
    tokens: int
    truncated: bool


class MemoryInjection(_Answer):
    etag: str | None
    version_id: str | None
    tokens: int
    original_tokens: int
    truncated: bool
    recall_tokens: int
    recalled: list[str]
    lines: list[RecalledLine]
    cut: RecallCut
    scopes: list[ScopeInjection]


class Turn(_Answer):
    """One turn of the thread log, as it was written."""

    v: int
    session_id: str
    turn: int
    created_at: str
    source: Literal["agent", "import"]
    messages: list[Message]
    model: str | None
    usage: TokenCount
    memory: MemoryInjection
    compaction_usage: TokenCount
    compacted: bool
    pauses: list[str]
    response_format: str | None
    instructions: str | None


class ThreadLog(_Answer):
    session_id: str
    turns: list[Turn]
    next_after: int | None


class MemoryMdRecord(_Answer):
    path: str
    etag: str | None
    version_id: str | None
    injected: bool
    tokens: int
    original_tokens: int
    truncated: bool


class RecallRecord(_Answer):
    tokens: int
    lines: list[RecalledLine]
    sources: list[str]
    cut: RecallCut


class MemoryToolRun(_Answer):
    name: str
    call_id: str
    arguments: str
    result: str | None


class TurnMemory(_Answer):
    """What memory reached one turn's model, and why."""

    session_id: str
    turn: int
    created_at: str
    model: str | None
    memory_md: MemoryMdRecord
    recall: RecallRecord
    scopes: list[ScopeInjection]
    tools: list[MemoryToolRun]
    total_tokens: int


class ImportAnswer(_Answer):
    session_id: str
    first_turn: int
    last_turn: int
    messages: int
    flush: str


class ThreadHit(_Answer):
    session_id: str
    turn: int
    role: str
    at: str
    text: str
    score: float | None = None
    matched: str | None = None
    match_mode: str | None = None


class ThreadSearch(_Answer):
    """Hits, and the mode that answered (absent with ``message`` for a blank query)."""

    hits: list[ThreadHit]
    match_mode: str | None = None
    message: str | None = None


# -- usage, budgets and scopes ----------------------------------------------------------------
class RoleUsage(_Answer):
    input_tokens: int
    output_tokens: int
    model_calls: int


class UsageRoles(_Answer):
    agent: RoleUsage
    compaction: RoleUsage
    memory: RoleUsage
    embedding: RoleUsage


class UsageDay(_Answer):
    day: str
    tokens: int
    by_role: UsageRoles
    turns: int
    imported_turns: int
    model_calls: int


class UsageTotals(_Answer):
    tokens: int
    by_role: UsageRoles
    turns: int
    imported_turns: int
    model_calls: int


class UsageReport(_Answer):
    first_day: str
    last_day: str
    days: list[UsageDay]
    totals: UsageTotals
    consolidation: ConsolidationStatus
    scope: str | None = None


class BudgetLimits(_Answer):
    """Daily limits (0: unlimited; in an override, null keeps the stack's)."""

    tokens: int | None
    turns: int | None
    memory_tokens: int | None


class UserBudget(_Answer):
    user_id: str
    stack: BudgetLimits
    override: BudgetLimits | None
    effective: BudgetLimits
    budgets_on: bool


class ScopeRoles(_Answer):
    member: int
    maintainer: int


class ScopeSummary(_Answer):
    scope: str
    members: int
    roles: ScopeRoles


class ScopeList(_Answer):
    scopes: list[ScopeSummary]


class Member(_Answer):
    user_id: str
    role: Literal["member", "maintainer"]
    added_at: str


class Members(_Answer):
    scope: str
    members: list[Member]


class Membership(_Answer):
    scope: str
    user_id: str
    role: Literal["member", "maintainer"]
    added_at: str


class MemberRemoved(_Answer):
    scope: str
    user_id: str
    removed: bool


class ProtectedResource(_Answer):
    """OAuth protected resource metadata (RFC 9728)."""

    resource: str
    authorization_servers: list[str]
    scopes_supported: list[str] | None = None
    bearer_methods_supported: list[str] | None = None
    resource_name: str | None = None
