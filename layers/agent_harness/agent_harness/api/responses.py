"""The agent with memory behind OpenAI's Responses API: POST /v1/responses, GET
/v1/responses/{id}. The same turn as a chat completion (api/conversation), so memory
injection, recall, the memory tools and the flush work alike:

    input, instructions   the conversation (api/response_items reads its items); the
                          instructions are this turn's, as a chat's system messages
    previous_response_id  the response's session, at that response's turn: ``input``
                          holds only what follows it (function_call_output items, a new
                          message). A session moved past it (a retry whose answer was
                          lost, a branch) is forked: a new session whose history is the
                          old one's up to that response (its last FORK_TURNS turns)
    conversation          a conversation of the Conversations API (api/conversations):
                          a session of ours, whose turns are its items; ``input`` holds
                          only the new items
    X-Session-Id          pins the session, as on chat completions; else a conversation
                          sent whole continues its session (api/chat_sessions)
    tools                 function tools only: a call of one is a function_call item
                          (the response completes; send its function_call_output next)
    tool_choice, text.format, temperature, top_p, max_output_tokens
                          reach the agent model as ``TurnOptions`` (api/openai_options)
    store (default true)  the response is kept PLACE_DAYS days, in the transaction that
                          ends the turn: GET answers it, previous_response_id finds it,
                          DELETE forgets it; with false, none of them (the turn is still
                          the session's memory)
    stream: true          OpenAI's events in one buffered answer (API Gateway does not
                          stream)
    errors                OpenAI's error object, with our status codes (openai_error)
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from agent_harness.agent.history import list_turns
from agent_harness.agent.importer import MAX_MESSAGES, ImportedMessage
from agent_harness.api.chat_sessions import find_place, place_expiry
from agent_harness.api.conversation import Conversation, Pin, caller_tools, run_conversation
from agent_harness.api.openai_compat import MODEL_ID, Answer
from agent_harness.api.openai_options import openai_json, turn_options, validated
from agent_harness.api.response_items import Echo, events, messages_of, response_object
from agent_harness.api.schemas import ToolDeclaration
from agent_harness.errors import (
    ConversationDivergedError,
    InvalidRequestError,
    NotFoundError,
    ValidationFailedError,
)
from agent_harness.ports import Place

if TYPE_CHECKING:
    from agent_harness.agent.commit import TurnResult
    from agent_harness.agent.options import TurnOptions
    from agent_harness.agent.scoped import Binding
    from agent_harness.ids import User
    from agent_harness.runtime import Runtime

__all__ = ["FORK_TURNS", "create_response", "delete_response", "get_response"]

#: the turns of a session a fork from one of its earlier responses carries over
FORK_TURNS = 200
_RESPONSE_ID = re.compile(r"resp_[A-Za-z0-9_-]{1,64}")
_METADATA = (16, 64, 512)  # OpenAI's limits: pairs, key and value characters


class PreviousResponseNotFoundError(InvalidRequestError):
    code = "previous_response_not_found"


class ResponseNotFoundError(NotFoundError):
    code = "response_not_found"


class ResponsesBody(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    model: str = Field(default=MODEL_ID, max_length=256)  # echoed in the answer
    input: str | list[Any]
    instructions: str | None = None
    tools: list[Any] | None = None
    tool_choice: Any = None
    text: dict[str, Any] | None = None
    previous_response_id: str | None = Field(default=None, max_length=256)
    store: StrictBool = True
    stream: StrictBool = False
    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    parallel_tool_calls: StrictBool | None = None
    metadata: dict[str, str] | None = None
    truncation: str | None = None
    user: str | None = Field(default=None, max_length=256)
    conversation: Any = None
    background: StrictBool | None = None


def _body(raw: str) -> tuple[ResponsesBody, dict[str, Any]]:
    data = openai_json(raw, "input", "items")
    if not isinstance(data, dict):
        raise InvalidRequestError("a JSON object body is required")
    body = validated(ResponsesBody, data)
    if body.conversation is not None and body.previous_response_id is not None:
        raise InvalidRequestError(
            "conversation and previous_response_id are mutually exclusive: send one"
        )
    if body.background:
        raise InvalidRequestError("background: responses run in the request, not in background")
    if body.truncation not in (None, "disabled", "auto"):
        raise ValidationFailedError("truncation: 'disabled' or 'auto'")
    metadata = body.metadata or {}
    pairs, key_chars, value_chars = _METADATA
    if len(metadata) > pairs or any(
        len(k) > key_chars or len(v) > value_chars for k, v in metadata.items()
    ):
        raise ValidationFailedError(
            f"metadata: at most {pairs} pairs, keys of {key_chars} characters, values of "
            f"{value_chars}"
        )
    return body, data


def _conversation_id(raw: object) -> str | None:
    """``conversation``: a conversation's id, or ``{"id": ...}`` (api/conversations)."""
    if raw is None:
        return None
    found = raw.get("id") if isinstance(raw, dict) else raw
    if not isinstance(found, str) or not found:
        raise ValidationFailedError('conversation: a conversation id, or {"id": ...}')
    return found


def _tools(raw: list[Any] | None) -> list[ToolDeclaration] | None:
    """Function tools as the chat route declares them; hosted tools are refused."""
    if raw is None:
        return None
    tools = []
    for index, tool in enumerate(raw):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind != "function" or not isinstance(tool, dict):
            raise InvalidRequestError(
                f"tools.{index}: only function tools are served (got {kind!r}); the "
                "stack's own tools (memory) are always there"
            )
        declared = {k: tool.get(k) for k in ("name", "description", "parameters")}
        tools.append(validated(ToolDeclaration, declared, f"tools.{index}."))
    return tools


def _options(body: ResponsesBody, data: dict[str, Any], names: list[str]) -> TurnOptions | None:
    """The options in chat completions' words (turn_options reads them), errors in the
    Responses API's."""
    fmt = (body.text or {}).get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        keys = ("name", "schema", "strict", "description")
        fmt = {"type": "json_schema", "json_schema": {k: fmt[k] for k in keys if k in fmt}}
    asked = {
        "response_format": fmt,
        "tool_choice": data.get("tool_choice"),
        "temperature": data.get("temperature"),
        "top_p": data.get("top_p"),
        "max_tokens": data.get("max_output_tokens"),
        "parallel_tool_calls": data.get("parallel_tool_calls"),
    }
    try:
        return turn_options(asked, names)
    except ValidationFailedError as exc:
        message = exc.message.replace("response_format.json_schema", "text.format")
        message = message.replace("response_format", "text.format")
        raise ValidationFailedError(message.replace("max_tokens", "max_output_tokens")) from exc


def _echo(body: ResponsesBody) -> Echo:
    """What the response says it was asked (OpenAI's defaults for what was not)."""
    fmt = (body.text or {}).get("format") or {"type": "text"}
    return {
        "instructions": body.instructions,
        "max_output_tokens": body.max_output_tokens,
        "metadata": body.metadata or {},
        "model": body.model,
        "conversation": (
            {"id": _conversation_id(body.conversation)} if body.conversation else None
        ),
        "parallel_tool_calls": body.parallel_tool_calls is not False,
        "previous_response_id": body.previous_response_id,
        "reasoning": {"effort": None, "summary": None},
        "store": body.store,
        "temperature": 1.0 if body.temperature is None else body.temperature,
        "text": {"format": fmt},
        "tool_choice": "auto" if body.tool_choice is None else body.tool_choice,
        "tools": body.tools or [],
        "top_p": 1.0 if body.top_p is None else body.top_p,
        "truncation": body.truncation or "disabled",
        "user": body.user,
    }


def create_response(
    rt: Runtime, user: User, session_id: str | None, raw: str, binding: Binding | None = None
) -> Answer:
    """One response: the request's new input as a turn of the session it follows."""
    body, data = _body(raw)
    declared = _tools(body.tools)
    options = _options(body, data, [t.name for t in declared or []])
    said = messages_of(body.input, rt.settings.agent_model)
    conversation = Conversation.of(said, body.instructions)
    tools = caller_tools(declared, body.tool_choice)
    response_id = f"resp_{rt.new_id()}"
    created = int(rt.clock.now().timestamp())
    echo = _echo(body)

    def stored(result: TurnResult) -> list[Place]:
        if not body.store:
            return []
        text = json.dumps(response_object(result, echo, response_id, created), ensure_ascii=False)
        key = f"resp:{response_id}"
        return [Place(key, result.session_id, result.turn, place_expiry(rt), text)]

    conversation_id = _conversation_id(body.conversation)
    if conversation_id is not None:  # a session of ours: its turns are the conversation's
        from agent_harness.api.conversations import require_conversation

        if session_id is not None and session_id != conversation_id:
            raise ValidationFailedError(
                f"X-Session-Id {session_id} is not the conversation {conversation_id}: "
                "send one of them"
            )
        require_conversation(rt, user, conversation_id)
        result = run_conversation(
            rt,
            user,
            Pin(conversation_id),
            conversation,
            tools,
            options,
            stored,
            whole=False,
            binding=binding,
        )
    elif body.previous_response_id is None:
        pin = Pin(session_id) if session_id is not None else None
        result = run_conversation(
            rt, user, pin, conversation, tools, options, stored, binding=binding
        )
    else:
        previous = _previous(rt, user, body.previous_response_id, session_id)
        try:
            pin = Pin(previous.session_id, previous.turn)
            result = run_conversation(
                rt, user, pin, conversation, tools, options, stored, whole=False, binding=binding
            )
        except ConversationDivergedError:
            history = [*_fork(rt, user, previous), *conversation.history][-MAX_MESSAGES:]
            forked = replace(conversation, history=history)
            pin = Pin(f"chat-{rt.new_id()}")
            result = run_conversation(
                rt, user, pin, forked, tools, options, stored, whole=False, binding=binding
            )
    done = response_object(result, echo, response_id, created)
    headers = {"X-Session-Id": result.session_id}
    if body.stream:
        headers |= {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        return 200, events(response_object(None, echo, response_id, created), done), headers
    headers["Content-Type"] = "application/json"
    return 200, json.dumps(done, ensure_ascii=False), headers


def _stored(rt: Runtime, user: User, response_id: str) -> Place | None:
    if not _RESPONSE_ID.fullmatch(response_id):
        return None  # no id of ours: nothing to read
    return find_place(rt, user, f"resp:{response_id}")


def _previous(rt: Runtime, user: User, response_id: str, session_id: str | None) -> Place:
    place = _stored(rt, user, response_id)
    if place is None:
        raise PreviousResponseNotFoundError(
            f"previous_response_id: no response {response_id!r} is stored (one created with "
            "store: false, expired, or another user's): send the conversation as input"
        )
    if session_id is not None and session_id != place.session_id:
        raise ValidationFailedError(
            f"X-Session-Id {session_id} is not the session of {response_id} "
            f"({place.session_id}): send one of them"
        )
    return place


def _fork(rt: Runtime, user: User, previous: Place) -> list[ImportedMessage]:
    """The user and assistant messages of the previous response's session up to its turn
    (of its last FORK_TURNS turns): a new session's history. One LIST and concurrent
    GETs, only when a client goes back to an earlier response."""
    after = max(0, previous.turn - FORK_TURNS)
    records, _ = list_turns(rt, user, previous.session_id, after=after, limit=FORK_TURNS)
    said = [
        ImportedMessage(role=m.role, content=m.content)
        for record in records
        if record.turn <= previous.turn
        for m in record.messages
        if m.role in ("user", "assistant") and m.content.strip()
    ]
    return said


def get_response(rt: Runtime, user: User, response_id: str) -> Answer:
    """A stored response, as it was answered."""
    place = _stored(rt, user, response_id)
    if place is None or place.body is None:
        raise ResponseNotFoundError(f"No response found with id '{response_id}'.")
    headers = {"Content-Type": "application/json", "X-Session-Id": place.session_id}
    return 200, place.body, headers


def delete_response(rt: Runtime, user: User, response_id: str) -> Answer:
    """Forget a stored response: GET and previous_response_id no longer find it (the
    turn stays the session's; DELETE /v1/sessions/... and forgetting the user remove
    that)."""
    place = _stored(rt, user, response_id)
    if place is None or not rt.table.delete_place(user, f"resp:{response_id}"):
        raise ResponseNotFoundError(f"No response found with id '{response_id}'.")
    answer = {"id": response_id, "object": "response", "deleted": True}
    return 200, json.dumps(answer), {"Content-Type": "application/json"}
