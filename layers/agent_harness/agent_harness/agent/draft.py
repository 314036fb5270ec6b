"""A turn in the making: what its next model call needs, and what it did so far (a
new message starts one; a paused turn's resume rebuilds it from its ``PendingTurn``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent_harness.agent.loop import LoopResult, LoopState
from agent_harness.agent.spend import pending_spend
from agent_harness.meter import Spend
from agent_harness.models.base import Message, ToolSpec, Usage
from agent_harness.records import TurnRecord

if TYPE_CHECKING:
    from agent_harness.agent.options import TurnOptions
    from agent_harness.records import MemoryInjection, PendingTurn

__all__ = ["Draft"]


@dataclass
class Draft:
    """A turn in the making: what its next model call needs, and what it did so far."""

    number: int
    started: str
    user_message: Message
    reference: Message | None
    memory: MemoryInjection
    recall: Message | None = None
    loop: LoopState = field(default_factory=LoopState)
    client_tools: list[ToolSpec] = field(default_factory=list)
    compaction_usage: Usage = field(default_factory=Usage)
    compacted: bool = False
    pauses: list[str] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)
    #: the request's own instructions (None: the session's persona)
    instructions: str | None = None
    #: spend of earlier requests of this turn no write has counted (a pause written
    #: before pauses counted their spend)
    uncounted: Spend = field(default_factory=Spend)
    #: the caller's options for the agent model calls (agent/options)
    options: TurnOptions | None = None

    def record(self, session_id: str, result: LoopResult) -> TurnRecord:
        """The completed turn as the thread log keeps it."""
        return TurnRecord(
            session_id=session_id,
            turn=self.number,
            created_at=self.started,
            messages=[self.user_message, *result.messages],
            model=result.model,
            usage=result.usage,
            memory=self.memory,
            compaction_usage=self.compaction_usage,
            compacted=self.compacted,
            pauses=self.pauses,
            response_format=self.options.format_label() if self.options else None,
            instructions=self.instructions,
        )

    @classmethod
    def resumed(cls, pending: PendingTurn, messages: list[Message]) -> Draft:
        return cls(
            number=pending.turn,
            started=pending.started_at,
            user_message=messages[0],
            reference=pending.reference,
            memory=pending.memory,
            recall=pending.recall,
            loop=LoopState(messages[1:], pending.usage, pending.model_calls, pending.model),
            client_tools=list(pending.tools),
            compaction_usage=pending.compaction_usage,
            compacted=pending.compacted,
            pauses=pending.pauses,
            answered=[*pending.answered, *(call.id for call in pending.calls)],
            instructions=pending.instructions,
            uncounted=pending_spend(pending),
            options=pending.options,
        )
