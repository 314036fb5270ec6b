"""A stateless client's conversation as a turn of a session: what both OpenAI routes
(chat completions, responses) share. The client's conversation is the truth:

    messages              the session holds the history, so only what follows the last
                          assistant message is new:
      tool messages   ->  the tool_results of the turn paused on the app's tool calls
      user messages   ->  a new turn (their text). A turn still paused is closed first,
                          without a model call: its calls answered by the tool messages
                          before them, the rest as not run. A session with no turn yet
                          imports the earlier messages first (no model call)
      system/developer -> the instructions of this turn (the system prompt, memory
                          guidance kept, stored in the turn); a new session keeps them as
                          its persona, for requests that send none
    the session           pinned (X-Session-Id, a previous response), else the one whose
                          last reply the request's last assistant message is
                          (api/chat_sessions), else a new one
    tools                 the app's own tools (agent/client_tools), less the stack's own
                          (an agent given the stack's /mcp too)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from agent_harness.agent.client_tools import BUILT_IN_TOOLS, ToolResult
from agent_harness.agent.importer import ImportedMessage
from agent_harness.agent.request import ChatTerms, check_persona
from agent_harness.api.chat_sessions import (
    Shape,
    chat_place,
    conversation_digest,
    find_place,
    shape,
)
from agent_harness.errors import ConversationDivergedError, ValidationFailedError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from agent_harness.agent.commit import TurnResult
    from agent_harness.agent.options import TurnOptions
    from agent_harness.agent.scoped import Binding
    from agent_harness.api.schemas import ToolDeclaration
    from agent_harness.ids import User
    from agent_harness.ports import Place
    from agent_harness.runtime import Runtime

__all__ = ["OWN_TOOLS", "ChatMessage", "Conversation", "Pin", "caller_tools", "run_conversation"]

#: the stack's own tools, its MCP server's included (``record_conversation``)
OWN_TOOLS = BUILT_IN_TOOLS | {"record_conversation"}


class _Function(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    name: str
    arguments: str = "{}"


class _Call(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    id: str
    function: _Function


class ChatMessage(BaseModel):
    """A message in chat completions' words (the responses route reads its items as
    these)."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[_Call] | None = None
    tool_call_id: str | None = None

    def text(self) -> str:
        """The text of the content: a string, or the text parts of a list."""
        if isinstance(self.content, str):
            return self.content
        parts = self.content or []
        return "\n".join(str(p.get("text", "")) for p in parts if "text" in p)


@dataclass
class Conversation:
    """A request's messages as a turn sees them."""

    messages: list[ChatMessage]  # all of them, as sent
    instructions: str | None  # the system and developer messages
    history: list[ImportedMessage]  # up to the last assistant message (a new session's)
    asked: list[str]  # the user messages after it
    results: list[ToolResult]  # the tool messages after it
    at: int  # the last assistant message's index (-1: none yet)

    @classmethod
    def of(cls, messages: list[ChatMessage], instructions: str | None = None) -> Conversation:
        """``instructions``: given apart from the messages (responses), said first."""
        at = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
        earlier, new = messages[: at + 1], messages[at + 1 :]
        told = [instructions or ""] + [
            m.text() for m in messages if m.role in ("system", "developer")
        ]
        told = [t for t in told if t.strip()]
        return cls(
            messages=messages,
            instructions="\n\n".join(told) if told else None,
            history=[
                ImportedMessage(role=m.role, content=m.text())
                for m in earlier
                if m.role in ("user", "assistant") and m.text().strip()
            ],
            asked=[m.text() for m in new if m.role == "user"],
            results=[ToolResult(m.tool_call_id or "", m.text()) for m in new if m.role == "tool"],
            at=at,
        )

    def shapes(self, upto: int | None = None) -> list[Shape]:
        """The conversation (up to index ``upto``, inclusive) as api/chat_sessions keys it;
        instructions left out: a handoff changes them, not the conversation."""
        messages = self.messages if upto is None else self.messages[: upto + 1]
        return [
            shape(m.role, m.text(), [c.id for c in m.tool_calls or []], m.tool_call_id)
            for m in messages
            if m.role in ("user", "assistant", "tool")
        ]


def caller_tools(
    tools: list[ToolDeclaration] | None, tool_choice: object
) -> list[ToolDeclaration] | None:
    """The app's tools, less those that are the stack's own: an agent given both the
    stack as its model and the stack's /mcp as a tool server declares memory_search
    and the rest again (bare, or as ``<server>__<tool>``); the server's own run."""
    if tool_choice == "none" or tools is None:
        return None
    return [t for t in tools if t.name.rsplit("__", 1)[-1] not in OWN_TOOLS]


@dataclass(frozen=True)
class Pin:
    """Where a request goes: a session, and the turn its conversation is at (None: the
    session's own word, as X-Session-Id pins it)."""

    session_id: str
    turn: int | None = None


def run_conversation(
    rt: Runtime,
    user: User,
    pin: Pin | None,
    conversation: Conversation,
    tools: list[ToolDeclaration] | None,
    options: TurnOptions | None,
    more_places: Callable[[TurnResult], Sequence[Place]] | None = None,
    *,
    whole: bool = True,
    binding: Binding | None = None,
) -> TurnResult:
    """The conversation's new messages as a turn: of ``pin``'s session, or (None) of the
    session the conversation continues, else a new one; its place is put with the turn
    (unless not ``whole``: the messages follow a previous response, so they are not the
    conversation), and ``more_places`` (a stored response) with it."""
    if not conversation.asked and not conversation.results:
        raise ValidationFailedError("no new user or tool message after the last assistant one")
    check_persona(rt, conversation.instructions)
    if pin is not None:
        return _turn(rt, user, pin, conversation, tools, options, more_places, whole, binding)
    place = None
    if conversation.at >= 0:
        digest = conversation_digest(user, conversation.shapes(conversation.at))
        place = find_place(rt, user, f"chat:{digest}")
    if place is not None:
        try:
            pinned = Pin(place.session_id, place.turn)
            return _turn(
                rt, user, pinned, conversation, tools, options, more_places, whole, binding
            )
        except ConversationDivergedError:
            pass  # another branch of the conversation: a session of its own
    fresh = Pin(f"chat-{rt.new_id()}")
    return _turn(rt, user, fresh, conversation, tools, options, more_places, whole, binding)


def _turn(
    rt: Runtime,
    user: User,
    pin: Pin,
    conversation: Conversation,
    tools: list[ToolDeclaration] | None,
    options: TurnOptions | None,
    more_places: Callable[[TurnResult], Sequence[Place]] | None,
    whole: bool,
    binding: Binding | None,
) -> TurnResult:
    from agent_harness.agent.turn import run_turn

    asked = conversation.shapes()

    def places(result: TurnResult) -> list[Place]:
        extra = list(more_places(result)) if more_places is not None else []
        return [chat_place(rt, user, asked, result), *extra] if whole else extra

    terms = ChatTerms(
        instructions=conversation.instructions, settle=True, at_turn=pin.turn, places=places
    )
    if not conversation.asked:  # tool messages only: the paused turn's results
        return run_turn(
            rt,
            user,
            pin.session_id,
            tools=tools,
            tool_results=conversation.results,
            chat=terms,
            options=options,
            binding=binding,
        )
    return run_turn(
        rt,
        user,
        pin.session_id,
        "\n\n".join(conversation.asked),
        tools=tools,
        tool_results=conversation.results or None,
        history=conversation.history,
        persona=conversation.instructions,
        chat=terms,
        options=options,
        binding=binding,
    )
