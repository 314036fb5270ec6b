"""What the agent writes to the workspace: the thread log and the working context.

    sessions/<s>/turns/<n>.json   TurnRecord, create-only: the source of truth of a turn
    sessions/<s>/context.json     WorkingContext, CAS: what the next call sends the model,
                                  and the turn in progress while it awaits client tool
                                  results (PendingTurn)

Both are plain JSON a person can read. The context may be compacted or trimmed; the
turn objects never are, so no message is ever lost.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent_harness.agent.options import TurnOptions  # noqa: TC001 (pydantic reads it)
from agent_harness.models.base import Message, ToolCall, ToolSpec, Usage

__all__ = [
    "MemoryInjection",
    "PendingTurn",
    "RecallCut",
    "RecalledLine",
    "ScopeInjection",
    "TurnRecord",
    "WorkingContext",
]


class RecalledLine(BaseModel):
    """One line automatic recall showed the model, and why."""

    model_config = ConfigDict(defer_build=True)

    source: str  # "memory/2026-11-30.md#4", or a past message's segment line
    #: the bound shared scope the line is from (None: the user's own memory)
    scope: str | None = None
    #: the fact's id (its words, hashed: memory.facts.authority.fact_id), the same
    #: wherever the fact is found
    fact_id: str
    authority: str | None = None
    score: float = 0.0
    day: str | None = None
    text: str = ""
    #: a past message's session and turn
    session_id: str | None = None
    turn: int | None = None


class RecallCut(BaseModel):
    """What automatic recall found and did not show."""

    model_config = ConfigDict(defer_build=True)

    #: lines over the floor that the token budget left out (their sources)
    budget: list[str] = Field(default_factory=list)
    #: ranked candidates under the floor (``recall_min_score``)
    floor: int = 0
    #: past messages the gate's checks kept out (an instruction, a claim, another role)
    held: int = 0


class ScopeInjection(BaseModel):
    """A bound shared scope's MEMORY.md as a turn injected it (agent.scoped)."""

    model_config = ConfigDict(defer_build=True)

    scope: str
    etag: str | None = None
    version_id: str | None = None
    tokens: int = 0
    truncated: bool = False


class MemoryInjection(BaseModel):
    """How memory entered this turn: MEMORY.md and the recalled lines (provenance of
    what the model was shown, and of what recall left out)."""

    model_config = ConfigDict(defer_build=True)

    etag: str | None = None
    #: the MEMORY.md version injected (the bucket's version id, when it has one)
    version_id: str | None = None
    tokens: int = 0
    original_tokens: int = 0
    truncated: bool = False
    #: automatic recall: the tokens of its reference message, and the lines it showed
    recall_tokens: int = 0
    recalled: list[str] = Field(default_factory=list)  # "memory/2026-11-30.md#4", ...
    lines: list[RecalledLine] = Field(default_factory=list)
    cut: RecallCut = Field(default_factory=RecallCut)
    #: the bound shared scopes' MEMORY.md, each as injected
    scopes: list[ScopeInjection] = Field(default_factory=list)

    @property
    def total_tokens(self) -> int:
        """Every memory token the model was shown: MEMORY.md, the bound scopes' and the
        recalled lines."""
        return self.tokens + self.recall_tokens + sum(s.tokens for s in self.scopes)


class TurnRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    v: Literal[1] = 1
    session_id: str
    turn: int = Field(ge=1)
    created_at: str
    source: Literal["agent", "import"] = "agent"
    messages: list[Message]
    model: str | None = None
    usage: Usage = Field(default_factory=Usage)
    memory: MemoryInjection = Field(default_factory=MemoryInjection)
    #: the compaction role's tokens of this turn, and whether it compacted
    compaction_usage: Usage = Field(default_factory=Usage)
    compacted: bool = False
    #: the pauses for client tool results this turn went through, in order
    pauses: list[str] = Field(default_factory=list)
    #: the answer's format the caller asked (``json_object``, ``json_schema:<name>``)
    response_format: str | None = None
    #: the instructions the turn ran under when its request sent its own (a chat
    #: completion's system and developer messages); None: the session's persona
    instructions: str | None = None

    def created(self) -> datetime:
        return datetime.fromisoformat(self.created_at.replace("Z", "+00:00"))

    @classmethod
    def parse_or_none(cls, text: str) -> TurnRecord | None:
        """A stored turn, or None when the object is not one (e.g. edited by hand): the
        raw object stays in S3, and one bad object must not block a user's jobs."""
        try:
            return cls.model_validate_json(text)
        except ValidationError:
            return None


class PendingTurn(BaseModel):
    """A turn paused until the caller sends the results of its own tools. Nothing of it
    is in the thread log yet: the turn object is written when the turn completes."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    #: this pause; the session item's pause mark names it (the pause's commit point)
    pause_id: str
    #: the pauses of this turn before this one (a resumed turn may pause again)
    earlier: list[str] = Field(default_factory=list)
    turn: int = Field(ge=1)
    started_at: str
    paused_at: str
    #: the turn so far: its user message, then the assistant and tool messages
    messages: list[Message]
    #: the client tool calls awaiting results, in the order the model made them
    calls: list[ToolCall]
    #: ids of the client calls this turn answered at its earlier pauses
    answered: list[str] = Field(default_factory=list)
    #: the client tools offered (a resume that sends none offers these again)
    tools: list[ToolSpec] = Field(default_factory=list)
    #: the request's own instructions (a resume that sends none keeps these)
    instructions: str | None = None
    #: MEMORY.md as the turn's first model call saw it (the prompt stays the same)
    reference: Message | None = None
    #: the lines automatic recall injected for this turn (the same on every resume)
    recall: Message | None = None
    memory: MemoryInjection = Field(default_factory=MemoryInjection)
    usage: Usage = Field(default_factory=Usage)
    compaction_usage: Usage = Field(default_factory=Usage)
    model_calls: int = 0
    model: str = ""
    compacted: bool = False
    #: the spend so far was counted by the pause's own write (a pause written before
    #: pauses counted is counted when its turn completes)
    spend_counted: bool = False
    #: the caller's options for the turn's model calls (a resume keeps them)
    options: TurnOptions | None = None

    @property
    def pauses(self) -> list[str]:
        return [*self.earlier, self.pause_id]


class WorkingContext(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    v: Literal[1] = 1
    session_id: str
    #: AGENTS.md as read when the session started (the session's persona), if any
    agents_md: str | None = None
    summary: str | None = None
    messages: list[Message] = Field(default_factory=list)
    last_turn: int = 0
    #: the turn awaiting client tool results, if any
    pending: PendingTurn | None = None
    #: ids of the client tool calls answered in turn ``last_turn`` (a repeated submission
    #: of the same results gets that turn's answer again instead of a second model run)
    answered: list[str] = Field(default_factory=list)
    #: the shared scopes the session bound on its first message (agent.scoped)
    scopes: list[str] = Field(default_factory=list)
    #: what the session's context has held below the user, authority -> where (an
    #: imported assistant message, a tool result), kept after compaction summarised it:
    #: what every later turn's memory writes may claim (agent.exposure)
    untrusted: dict[str, str] = Field(default_factory=dict)

    @classmethod
    def parse_or_none(cls, text: str) -> WorkingContext | None:
        try:
            return cls.model_validate_json(text)
        except ValidationError:
            return None
