"""The caller's options for one turn's model calls, and the rules they put on the loop.

    tool_choice       applies to the caller's tools; the memory tools stay:
      auto / unset      the loop as always
      none              the caller's tools are not offered
      required          every call must call a tool (memory tools may run first); a
                        text answer is dropped and the next call offers only the
                        caller's tools (a second text answer: 502), so the turn ends
                        in a call of one of them
      {"name": f}       only f is offered, and forced
                      The cap holds over any choice: the turn's last allowed call
                      (``HARNESS_MAX_MODEL_CALLS``, pauses included) offers no tool, and
                      its text is the answer. A choice is the request's own: the
                      request that resumes a paused turn brings its own (none sent:
                      auto), as OpenAI reads every request on its own (``resumed``)
    response_format   the answer (a call without tool calls) must be a JSON object, valid
                      against the schema when ``strict``; one corrective retry, then 502
                      ``model_output_invalid``. Memory tools keep working in the turn
    sampling          temperature, top_p, max_output_tokens, stop, seed: passed to the
                      provider where it takes them (docs/models.md)

``TurnOptions`` is persisted with a paused turn: a resume through the session API sent
without options keeps its format and sampling (not its tool choice); on the OpenAI
routes every request's options are its own.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from agent_harness.errors import ModelOutputError, ValidationFailedError
from agent_harness.json_schema import argument_errors
from agent_harness.models.base import (
    ChatRequest,
    Message,
    ResponseFormat,
    ToolChoice,
    ToolSpec,
    Usage,
    forced_tool,
)

if TYPE_CHECKING:
    from agent_harness.models.base import ChatModel

__all__ = ["MAX_STOP", "TurnOptions", "check_tool_choice", "formatted_answer", "resumed"]

MAX_STOP = 4  # stop sequences, as OpenAI allows
_FENCE = re.compile(r"^```(?:json)?\s*\n?(.*?)\n?```$", re.DOTALL | re.IGNORECASE)


class TurnOptions(BaseModel):
    """What the caller asked of this turn's agent model calls (all optional)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    response_format: ResponseFormat | None = None
    tool_choice: ToolChoice | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    max_output_tokens: int | None = Field(default=None, ge=1)
    stop: list[str] = Field(default_factory=list, max_length=MAX_STOP)
    seed: int | None = None

    @property
    def needs_call(self) -> bool:
        """The turn must end in a call of one of the caller's tools."""
        return self.tool_choice == "required" or forced_tool(self.tool_choice) is not None

    def format_label(self) -> str | None:
        """What format was asked, as the turn record keeps it."""
        fmt = self.response_format
        if fmt is None:
            return None
        return fmt.type if fmt.type == "json_object" else f"json_schema:{fmt.name}"

    def request(
        self,
        messages: list[Message],
        specs: list[ToolSpec],
        caller: frozenset[str],
        *,
        last: bool,
        insist: bool = False,
    ) -> ChatRequest:
        """The agent request of one loop call: the tools offered and the choice by the
        rules above (``insist``: a required call was answered with text), the sampling
        options as asked."""
        offered, choice = self._offer(specs, caller, last=last, insist=insist)
        return ChatRequest(
            messages=messages,
            tools=offered,
            purpose="agent",
            tool_choice=choice,
            response_format=self.response_format,
            temperature=self.temperature,
            top_p=self.top_p,
            max_output_tokens=self.max_output_tokens,
            stop=self.stop,
            seed=self.seed,
        )

    def _offer(
        self, specs: list[ToolSpec], caller: frozenset[str], *, last: bool, insist: bool
    ) -> tuple[list[ToolSpec], ToolChoice | None]:
        choice = self.tool_choice
        # nothing to call (a turn closed on a cancel), or the cap: the choice is moot
        if not specs or last:
            return [], None
        name = forced_tool(choice)
        if name is not None:
            return [s for s in specs if s.name == name], choice
        if choice == "required":
            return ([s for s in specs if s.name in caller] if insist else specs), "required"
        if choice == "none":
            specs, choice = [s for s in specs if s.name not in caller], None
        return specs, (choice if specs else None)


def resumed(
    paused: TurnOptions | None, asked: TurnOptions | None, *, per_request: bool
) -> TurnOptions | None:
    """The options of a paused turn's calls once a request resumes it (``asked``: that
    request's). Its tool choice is always the request's (none sent: auto), whatever an
    earlier request forced: OpenAI reads a missing ``tool_choice`` as auto, and every
    framework sends the tool results without one. ``per_request`` (the OpenAI routes):
    every option is the request's. Otherwise a resume sent without options keeps the
    turn's format and sampling."""
    if asked is not None or per_request:
        return asked
    if paused is None or paused.tool_choice is None:
        return paused
    return paused.model_copy(update={"tool_choice": None})


def check_tool_choice(options: TurnOptions | None, tools: list[ToolSpec] | None) -> None:
    """A choice that names or requires the caller's tools needs them declared (a 422
    before anything is written, as OpenAI refuses it)."""
    if options is None or tools is None:
        return
    names = {t.name for t in tools}
    name = forced_tool(options.tool_choice)
    if name is not None and name not in names:
        raise ValidationFailedError(f"tool_choice: {name} is not one of the declared tools")
    if options.tool_choice == "required" and not names:
        raise ValidationFailedError("tool_choice: required needs tools to be declared")


def _problems(text: str, fmt: ResponseFormat) -> tuple[str, list[str]]:
    """The answer as clean JSON text (a code fence around it removed), and what is
    wrong with it against ``fmt``."""
    clean = text.strip()
    fenced = _FENCE.match(clean)
    if fenced:
        clean = fenced.group(1).strip()
    try:
        value: Any = json.loads(clean)
    except (ValueError, RecursionError):
        return clean, ["the answer is not valid JSON"]
    if fmt.strict and fmt.json_schema is not None:
        return clean, argument_errors(value, fmt.json_schema)
    if not isinstance(value, dict):
        return clean, ["the answer is not a JSON object"]
    return clean, []


def formatted_answer(
    model: ChatModel,
    request: ChatRequest,
    answer: Message,
    fmt: ResponseFormat,
    *,
    may_retry: bool = True,
) -> tuple[Message, Usage, int]:
    """The final answer as ``fmt`` asks: as it is when valid, else after one corrective
    call (not kept in the turn: only the valid answer is), if ``may_retry`` (the turn's
    HARNESS_MAX_MODEL_CALLS not reached). Returns the answer, the retry's usage and the
    calls made (0 or 1); an invalid answer that may not be retried, or a second one, is
    a 502."""
    clean, problems = _problems(answer.content, fmt)
    if not problems:
        return answer.model_copy(update={"content": clean}), Usage(), 0
    if not may_retry:
        raise ModelOutputError(
            f"the answer does not match response_format ({'; '.join(problems)}) and the "
            "turn has no model call left for a corrective retry (HARNESS_MAX_MODEL_CALLS)"
        )
    wanted = "a JSON object" if fmt.type == "json_object" else f"JSON valid against {fmt.name}"
    if fmt.json_schema is not None:
        wanted += " (schema: " + json.dumps(fmt.json_schema, ensure_ascii=False)[:4000] + ")"
    correction = Message(
        role="user",
        content=(
            f"Your answer must be {wanted}, and nothing else: {'; '.join(problems)}. "
            "Answer again with only the JSON."
        ),
    )
    retry = request.model_copy(
        update={
            "messages": [*request.messages, answer, correction],
            "tools": [],
            "tool_choice": None,
        }
    )
    response = model.complete(retry)
    clean, problems = _problems(response.message.content, fmt)
    if problems:
        raise ModelOutputError(
            f"{response.model}'s answer does not match response_format after a corrective "
            f"retry: {'; '.join(problems)}"
        )
    return Message(role="assistant", content=clean), response.usage, 1
