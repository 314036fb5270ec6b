"""The answers of the HTTP API's own routes, as pydantic models (the OpenAI-shaped
routes' are in ``agent_harness_client.openai_types``), and the typed dicts some requests
take.

Field names are the API's own. A field without a default is in every answer (perhaps
null); one with a default only where it applies (a shared scope's ``scope``, a ranked
hit's ``score``). Fields the API adds later are kept, not refused: read them with
``model.model_extra``. A test checks these models against the API's OpenAPI document
(``GET /v1/openapi.json``), field by field.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from pydantic import BaseModel, ConfigDict

__all__ = [
    "BudgetLimits",
    "ConsolidationFailure",
    "ConsolidationQueued",
    "ConsolidationStatus",
    "Decision",
    "Fact",
    "FactBrief",
    "Health",
    "ImportAnswer",
    "ImportMessage",
    "Ledger",
    "LedgerDay",
    "LedgerDays",
    "MatchMode",
    "Member",
    "MemberRemoved",
    "Members",
    "Membership",
    "MemoryDocument",
    "MemoryHit",
    "MemoryInjection",
    "MemoryMdRecord",
    "MemorySearch",
    "MemoryToolRun",
    "MemoryVersion",
    "MemoryVersions",
    "MemoryWrite",
    "Message",
    "PendingToolCall",
    "Promotion",
    "ProtectedResource",
    "RecallCut",
    "RecallRecord",
    "RecalledLine",
    "ReviewItem",
    "ReviewQueue",
    "RoleUsage",
    "Rollback",
    "SaveAnswer",
    "SaveSource",
    "ScopeInjection",
    "ScopeList",
    "ScopeRoles",
    "ScopeSummary",
    "Supersession",
    "ThreadHit",
    "ThreadLog",
    "ThreadSearch",
    "TokenCount",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "Turn",
    "TurnAnswer",
    "TurnMemory",
    "TurnRoles",
    "TurnUsage",
    "UsageDay",
    "UsageReport",
    "UsageRoles",
    "UsageTotals",
    "UserBudget",
]

#: how a search matches: a literal phrase, every keyword, any keyword, or ranked (by
#: words, and by meaning when the stack has an embedding model); None: the phrase, else
#: ranked when no line holds it
MatchMode = Literal["phrase", "all", "any", "ranked"]


# -- what some requests take ------------------------------------------------------------------
class ToolSpec(TypedDict):
    """A tool of yours (OpenAI's ``{"type": "function", "function": {...}}`` is read too)."""

    name: str
    description: NotRequired[str]
    parameters: NotRequired[dict[str, Any]]


class ToolResult(TypedDict):
    """Your result of one call of a paused turn."""

    tool_call_id: str
    content: str
    is_error: NotRequired[bool]


class ImportMessage(TypedDict):
    """A message of existing history (``timestamp``: ISO 8601 with a UTC offset)."""

    role: Literal["user", "assistant"]
    content: str
    timestamp: NotRequired[str]


class SaveSource(TypedDict):
    """The turns of one of your sessions that saved facts came from."""

    session_id: str
    turns: list[int]


class _Answer(BaseModel):
    model_config = ConfigDict(extra="allow")


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


# -- memory -----------------------------------------------------------------------------------
class MemoryDocument(_Answer):
    content: str
    etag: str | None
    scope: str | None = None


class MemoryWrite(_Answer):
    etag: str | None
    content: str
    held: int


class MemoryVersion(_Answer):
    version_id: str
    last_modified: str | None
    etag: str | None
    size: int
    is_latest: bool


class MemoryVersions(_Answer):
    versions: list[MemoryVersion]
    next_cursor: str | None


class Rollback(_Answer):
    etag: str | None
    restored_version_id: str
    held: int


class LedgerDay(_Answer):
    day: str
    size: int
    last_modified: str | None


class LedgerDays(_Answer):
    days: list[LedgerDay]


class Ledger(_Answer):
    day: str
    content: str


class MemoryHit(_Answer):
    path: str
    line: int
    text: str
    authority: str | None
    score: float | None = None
    matched: str | None = None
    match_mode: str | None = None
    fact_id: str | None = None
    state: str | None = None
    by: str | None = None
    at: str | None = None
    recheck: list[str] | None = None


class MemorySearch(_Answer):
    hits: list[MemoryHit]
    match_mode: str | None = None
    message: str | None = None
    scope: str | None = None


class SaveAnswer(_Answer):
    saved: int
    held: int
    scope: str | None = None


class Promotion(_Answer):
    scope: str
    status: Literal["queued", "promoted"]
    promoted: int
    queued: int
    items: list[str]


class FactBrief(_Answer):
    id: str
    text: str
    authority: str | None
    day: str
    recorded: str
    state: str
    by: str | None
    at: str | None


class Fact(_Answer):
    """A ledger fact, where it stands, and its story."""

    id: str
    text: str
    authority: str | None
    day: str
    recorded: str
    state: str
    by: str | None
    at: str | None
    line: int
    valid_from: str | None
    until: str | None
    depends: list[str]
    recheck: list[str]
    history: list[FactBrief]


class Supersession(_Answer):
    """The record written (``id``), the fact it retired, and that fact now."""

    id: str
    retired: str
    state: Literal["superseded", "retracted"]
    fact: Fact


class ConsolidationFailure(_Answer):
    at: str | None
    error: str | None
    failures: int
    retry_at: str | None


class ConsolidationStatus(_Answer):
    due: bool
    last_consolidated_at: str | None
    last_failure: ConsolidationFailure | None


class ConsolidationQueued(_Answer):
    status: Literal["queued"]
    requested_at: str
    consolidation: ConsolidationStatus
    last_failure: ConsolidationFailure | None


class ReviewItem(_Answer):
    id: str
    text: str
    authority: str
    reason: str
    source: str
    writer: str
    day: str
    created_at: str


class ReviewQueue(_Answer):
    items: list[ReviewItem]
    scope: str | None = None


class Decision(_Answer):
    id: str
    action: Literal["approve", "reject"]
    written: list[str]


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
