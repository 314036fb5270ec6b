"""The bounded ReAct loop, resumable across a pause for the caller's own tools.

    messages --> model --> tool calls? --no--> reply
                  ^            | yes
                  |            v
                  +---- tool results (errors are results, never raised)
                               | a call the caller runs (a client tool)
                               v
                             pause: the calls go back to the caller; the loop resumes
                             later from ``LoopState`` with their results appended

At most ``max_calls`` model calls per turn, pauses included; the last allowed call is made
without tools whatever the tool choice, so the loop always ends with an answer (a turn
resumed with no call left answers with its latest words, never a further call). The
caller's ``TurnOptions`` (agent/options) shape each call: which tools are offered and
forced, the answer's format (checked here, one corrective call), the sampling options.
Calls the server runs (memory and remote tools) in a response that also calls a client
tool run first, then the turn pauses.
Key insight: the loop never changes; new behaviour arrives as tools.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from agent_harness.agent.options import TurnOptions, formatted_answer
from agent_harness.errors import ModelOutputError
from agent_harness.models.base import Message, ToolCall, ToolSpec, Usage

if TYPE_CHECKING:
    from agent_harness.models.base import ChatModel

__all__ = ["LoopResult", "LoopState", "ToolBox", "run_loop"]


class ToolBox(Protocol):
    def specs(self) -> list[ToolSpec]: ...

    def call(self, call: ToolCall) -> str | None:
        """Run one tool call; failures come back as ``Error: ...`` text. ``None``: the
        caller of the API runs this one (the turn pauses for its result)."""
        ...

    def seen(self, messages: list[Message]) -> None:
        """The request whose answer's tool calls run next (agent.exposure)."""
        ...


@dataclass
class LoopState:
    """What a turn has done so far: its messages after the user's, usage, calls made."""

    messages: list[Message] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    model_calls: int = 0
    model: str = ""


@dataclass
class LoopResult:
    messages: list[Message]  # what the turn added: assistant and tool messages
    reply: str
    usage: Usage
    model_calls: int
    model: str
    #: client tool calls awaiting the caller's results (the turn is paused; reply is "")
    pending: list[ToolCall] = field(default_factory=list)

    @property
    def paused(self) -> bool:
        return bool(self.pending)


def run_loop(
    model: ChatModel,
    messages: list[Message],
    *,
    tools: ToolBox | None,
    max_calls: int,
    done: LoopState | None = None,
    options: TurnOptions | None = None,
    caller: frozenset[str] = frozenset(),
) -> LoopResult:
    """Run (or continue, from ``done``) the loop over ``messages`` (the prompt up to and
    including the turn's user message); ``caller`` names the caller's own tools."""
    state = done or LoopState()
    opts = options or TurnOptions()
    added = list(state.messages)
    usage = state.usage
    name = state.model
    specs = tools.specs() if tools else []
    known = {s.name for s in specs}
    must_call = opts.needs_call and bool(specs)
    force = False  # a required call answered with text: the next one offers only the caller's
    if state.model_calls >= max_calls:  # a turn paused at its cap (an older stack's pause)
        return LoopResult(added, _last_words(added), usage, state.model_calls, name)
    for call_no in range(state.model_calls + 1, max_calls + 1):
        last = call_no == max_calls
        request = opts.request([*messages, *added], specs, caller, last=last, insist=force)
        response = model.complete(request)
        usage += response.usage
        name = response.model
        message = response.message
        offered = {t.name for t in request.tools}
        if (last or not offered) and any(c.name not in offered for c in message.tool_calls):
            # a call that offered no tool, or the last, runs no tool it did not offer: the
            # text is the answer
            kept = [c for c in message.tool_calls if c.name in offered]
            message = Message(role="assistant", content=message.content, tool_calls=kept)
        if must_call and not message.tool_calls and not last:  # the cap's text is the answer
            if force:
                raise ModelOutputError(f"{name} answered without the tool call tool_choice asks")
            force = True  # the text is dropped: it is not the answer the caller asked for
            continue
        if not message.tool_calls and opts.response_format is not None:
            message, spent, retries = formatted_answer(
                model, request, message, opts.response_format, may_retry=not last
            )
            usage += spent
            added.append(message)
            return LoopResult(added, message.content, usage, call_no + retries, name)
        message = _unique_call_ids(message, added, call_no)
        added.append(message)
        if not message.tool_calls:
            return LoopResult(added, message.content, usage, call_no, name)
        pending: list[ToolCall] = []
        if tools is not None:
            tools.seen(request.messages)  # what the calls' author was shown
        for tool_call in message.tool_calls:
            if tools is None:
                result: str | None = f"Error: unknown tool {tool_call.name}"
            elif tool_call.name in known and tool_call.name not in offered:  # hidden by choice
                result = f"Error: {tool_call.name} is not offered in this call"
            else:
                result = tools.call(tool_call)
            if result is None:
                pending.append(tool_call)
                continue
            added.append(
                Message(role="tool", content=result, tool_call_id=tool_call.id, name=tool_call.name)
            )
        if pending:
            return LoopResult(added, "", usage, call_no, name, pending=pending)
    raise AssertionError("unreachable: the last call offers no tools")  # pragma: no cover


def _last_words(added: list[Message]) -> str:
    """The turn's latest assistant text: its answer when no call is left to make one."""
    return next((m.content for m in reversed(added) if m.role == "assistant" and m.content), "")


def _unique_call_ids(message: Message, earlier: list[Message], call_no: int) -> Message:
    """Call ids name results, and a caller answers its tools by id: some servers send
    none, or the same ``call_0`` in every response, so a missing or repeated id within
    the turn is replaced by one that is unique in it."""
    if not message.tool_calls:
        return message
    used = {c.id for m in earlier for c in m.tool_calls}
    calls = []
    for index, call in enumerate(message.tool_calls):
        call_id = call.id
        if not call_id or call_id in used:
            call_id = f"{call_id or 'call'}-{call_no}-{index + 1}"
        used.add(call_id)
        calls.append(call if call_id == call.id else call.model_copy(update={"id": call_id}))
    return message.model_copy(update={"tool_calls": calls})
