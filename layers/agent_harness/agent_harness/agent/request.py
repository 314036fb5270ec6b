"""What a turn request may ask: exactly one of a new message, the results of the
caller's tools, or a cancel, each within the configured limits; a chat completion
(``ChatTerms``) may send results and a message together."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent_harness.errors import PayloadTooLargeError, ValidationFailedError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from agent_harness.agent.client_tools import ToolResult
    from agent_harness.agent.commit import TurnResult
    from agent_harness.ports import Place
    from agent_harness.runtime import Runtime

__all__ = [
    "MAX_TOOL_CALL_ID_CHARS",
    "MAX_TOOL_RESULTS",
    "ChatTerms",
    "check_persona",
    "check_request",
]

#: tool results one request may carry (a turn pauses on at most this many calls)
MAX_TOOL_RESULTS = 128
MAX_TOOL_CALL_ID_CHARS = 256


@dataclass(frozen=True)
class ChatTerms:
    """How a chat completion meets its session: the client's conversation is the truth
    (OpenAI's API is stateless), where our own route keeps its 409s."""

    #: the request's system and developer messages, the instructions of this turn
    #: (None: the session's persona)
    instructions: str | None = None
    #: a message closes a paused turn (its calls answered by the request's results or as
    #: not run, no model call) instead of a 409; results and a message may come together
    settle: bool = False
    #: the session turn the client's history ends with (a derived session): a session
    #: past it is another branch (ConversationDivergedError, nothing written)
    at_turn: int | None = None
    #: where the conversation reached, from the turn's answer: put by the write that
    #: ends the turn (commit or pause), so a lost place never names an unwritten turn
    places: Callable[[TurnResult], Sequence[Place]] | None = None


def check_request(
    rt: Runtime,
    message: str | None,
    results: list[ToolResult] | None,
    cancel: bool,
    *,
    settle: bool = False,
) -> None:
    """Exactly one of a message, tool results or a cancel (with ``settle``, results may
    come before a message), each within its limits: every refusal of a turn request
    comes before anything is read or written."""
    together = settle and message is not None and results is not None and not cancel
    if not together and sum((message is not None, results is not None, cancel)) != 1:
        raise ValidationFailedError("send exactly one of message, tool_results or cancel")
    if message is not None:
        if not message.strip():
            raise ValidationFailedError("message must not be blank")
        if len(message) > rt.settings.max_message_chars:
            raise PayloadTooLargeError(
                f"message is {len(message)} characters; the limit is "
                f"{rt.settings.max_message_chars}"
            )
    if results is not None:
        if not results:
            raise ValidationFailedError("tool_results must not be empty")
        if len(results) > MAX_TOOL_RESULTS:
            raise ValidationFailedError(
                f"{len(results):,} tool results; a request may carry at most {MAX_TOOL_RESULTS}"
            )
        seen: set[str] = set()  # a set: the check stays linear in the request
        for result in results:
            if len(result.tool_call_id) > MAX_TOOL_CALL_ID_CHARS:
                raise ValidationFailedError(
                    f"a tool_call_id is limited to {MAX_TOOL_CALL_ID_CHARS} characters"
                )
            if result.tool_call_id in seen:
                raise ValidationFailedError(
                    f"tool_results: {result.tool_call_id} is answered twice"
                )
            seen.add(result.tool_call_id)
        limit = rt.settings.max_tool_result_chars
        for result in results:
            if len(result.content) > limit:
                raise PayloadTooLargeError(
                    f"the result of {result.tool_call_id} is {len(result.content):,} "
                    f"characters; the limit is {limit:,}"
                )


def check_persona(rt: Runtime, persona: str | None) -> None:
    """A caller's persona (the system messages of a chat completion) is capped like a
    message: it is sent with every model call of the session."""
    limit = rt.settings.max_message_chars
    if persona is not None and len(persona) > limit:
        raise PayloadTooLargeError(
            f"the persona (system and developer messages) is {len(persona):,} characters; "
            f"the limit is {limit:,}"
        )
