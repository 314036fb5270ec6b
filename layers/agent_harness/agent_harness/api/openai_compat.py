"""The agent with memory behind OpenAI's chat API: POST /v1/chat/completions, GET /v1/models.

The client's conversation is the truth, as in OpenAI's stateless API:

    X-Session-Id          pins the session; without it, the session whose last reply the
                          request's last assistant message is (api/chat_sessions), else a
                          new one; the answer's X-Session-Id header names it
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
    tools                 the app's own tools (agent/client_tools), less the stack's own
                          (an agent given the stack's /mcp too): a call of one ends the
                          answer with finish_reason "tool_calls"
    stream: true          the same answer as chat.completion.chunk events and [DONE], in
                          one buffered response (API Gateway does not stream)
    errors                {"error": {"message", "type", "code"}}, our status codes, and
                          x-should-retry (false when retrying cannot help)

Everything else is ``run_turn``: MEMORY.md injection, memory tools, compaction, eviction,
the post-turn flush. ``response_format``, ``tool_choice`` and the sampling options reach
the agent model as ``TurnOptions`` (api/openai_options); ``n`` other than 1 is refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent_harness.agent.client_tools import BUILT_IN_TOOLS, ToolResult
from agent_harness.agent.importer import MAX_MESSAGES, ImportedMessage
from agent_harness.agent.request import ChatTerms, check_persona
from agent_harness.api.chat_sessions import (
    Shape,
    conversation_digest,
    find_place,
    remember_place,
    shape,
)
from agent_harness.api.openai_options import check_content_parts, turn_options
from agent_harness.api.schemas import ToolDeclaration  # noqa: TC001 (pydantic reads it)
from agent_harness.errors import (
    ConversationDivergedError,
    HarnessError,
    InvalidRequestError,
    ValidationFailedError,
)
from agent_harness.utf8 import require_encodable

if TYPE_CHECKING:
    from agent_harness.agent.commit import TurnResult
    from agent_harness.agent.options import TurnOptions
    from agent_harness.ids import User
    from agent_harness.runtime import Runtime

__all__ = ["MODEL_ID", "chat_completion", "list_models", "openai_error"]

MODEL_ID = "agent-harness"
STREAM_PIECE = 200  # characters of the reply per streamed chunk
#: the stack's own tools, its MCP server's included (``record_conversation``)
OWN_TOOLS = BUILT_IN_TOOLS | {"record_conversation"}
Answer = tuple[int, str, dict[str, str]]  # status, body, headers (with the content type)


class _Function(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    name: str
    arguments: str = "{}"


class _Call(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    id: str
    function: _Function


class ChatMessage(BaseModel):
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


class ChatBody(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    model: str = Field(default=MODEL_ID, max_length=256)  # echoed in the answer
    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[ToolDeclaration] | None = None
    tool_choice: Any = None
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    n: int | None = None


def list_models() -> dict[str, Any]:
    return {
        "object": "list",
        "data": [{"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "agent-harness"}],
    }


def _parse(raw: str, model: str) -> tuple[ChatBody, TurnOptions | None]:
    try:
        data = json.loads(raw) if raw else None
    except (ValueError, RecursionError) as exc:
        raise InvalidRequestError("the body is not valid JSON") from exc
    if data is None:
        raise InvalidRequestError("a JSON body is required")
    require_encodable(data, raw)
    messages = data.get("messages") if isinstance(data, dict) else None
    if isinstance(messages, list) and len(messages) > MAX_MESSAGES:  # before parsing them
        raise ValidationFailedError(
            f"messages: {len(messages):,} messages; a request may carry at most {MAX_MESSAGES:,}"
        )
    try:
        body = ChatBody.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise ValidationFailedError(f"{where}: {first['msg']}") from exc
    if body.n not in (None, 1):
        raise ValidationFailedError("n: only one choice is generated (n=1)")
    check_content_parts(messages, model)
    # OpenAI's rule: a tool_choice names or requires tools of the same request
    return body, turn_options(data, [t.name for t in body.tools or []])


@dataclass
class _Request:
    """A chat completion's messages as a turn sees them."""

    instructions: str | None  # the system and developer messages
    history: list[ImportedMessage]  # up to the last assistant message (a new session's)
    last: ChatMessage | None  # the last assistant message: where the conversation is
    asked: list[str]  # the user messages after it
    results: list[ToolResult]  # the tool messages after it
    at: int  # the last assistant message's index (-1: none yet)


def _split(body: ChatBody) -> _Request:
    at = max((i for i, m in enumerate(body.messages) if m.role == "assistant"), default=-1)
    earlier, new = body.messages[: at + 1], body.messages[at + 1 :]
    told = [m.text() for m in body.messages if m.role in ("system", "developer")]
    instructions = "\n\n".join(told) if any(t.strip() for t in told) else None
    history = [
        ImportedMessage(role=m.role, content=m.text())
        for m in earlier
        if m.role in ("user", "assistant") and m.text().strip()
    ]
    return _Request(
        instructions=instructions,
        history=history,
        last=earlier[-1] if earlier else None,
        asked=[m.text() for m in new if m.role == "user"],
        results=[ToolResult(m.tool_call_id or "", m.text()) for m in new if m.role == "tool"],
        at=at,
    )


def _shapes(messages: list[ChatMessage]) -> list[Shape]:
    """The conversation as api/chat_sessions keys it (instructions left out: a handoff
    changes them, not the conversation)."""
    return [
        shape(m.role, m.text(), [c.id for c in m.tool_calls or []], m.tool_call_id)
        for m in messages
        if m.role in ("user", "assistant", "tool")
    ]


def _caller_tools(body: ChatBody) -> list[ToolDeclaration] | None:
    """The app's tools, less those that are the stack's own: an agent given both the
    stack as its model and the stack's /mcp as a tool server declares memory_search
    and the rest again (bare, or as ``<server>__<tool>``); the server's own run."""
    if body.tool_choice == "none" or body.tools is None:
        return None
    return [t for t in body.tools if t.name.rsplit("__", 1)[-1] not in OWN_TOOLS]


def _turn(
    rt: Runtime,
    user: User,
    session_id: str,
    body: ChatBody,
    asked: _Request,
    at: int | None,
    options: TurnOptions | None,
) -> TurnResult:
    from agent_harness.agent.turn import run_turn

    terms = ChatTerms(instructions=asked.instructions, settle=True, at_turn=at)
    tools = _caller_tools(body)
    if not asked.asked:  # tool messages only: the paused turn's results
        results = asked.results
        return run_turn(
            rt, user, session_id, tools=tools, tool_results=results, chat=terms, options=options
        )
    return run_turn(
        rt,
        user,
        session_id,
        "\n\n".join(asked.asked),
        tools=tools,
        tool_results=asked.results or None,
        history=asked.history,
        persona=asked.instructions,
        chat=terms,
        options=options,
    )


def chat_completion(rt: Runtime, user: User, session_id: str | None, raw: str) -> Answer:
    """One chat completion: the request's new messages as a turn of ``session_id``, or,
    without one, of the session the conversation continues (api/chat_sessions)."""
    body, options = _parse(raw, rt.settings.agent_model)
    asked = _split(body)
    if not asked.asked and not asked.results:
        raise ValidationFailedError("no new user or tool message after the last assistant one")
    check_persona(rt, asked.instructions)
    if session_id is not None:  # pinned by the caller
        result = _turn(rt, user, session_id, body, asked, None, options)
    else:
        result = _continue(rt, user, body, asked, options)
        remember_place(rt, user, _shapes(body.messages), result)
    created = int(rt.clock.now().timestamp())
    answer = _completion(result, body.model, f"chatcmpl-{rt.new_id()}", created)
    headers = {"X-Session-Id": result.session_id}
    if body.stream:
        usage = bool((body.stream_options or {}).get("include_usage"))
        headers["Content-Type"] = "text/event-stream"
        headers["Cache-Control"] = "no-cache"
        return 200, _events(answer, usage), headers
    headers["Content-Type"] = "application/json"
    return 200, json.dumps(answer, ensure_ascii=False), headers


def _continue(
    rt: Runtime, user: User, body: ChatBody, asked: _Request, options: TurnOptions | None
) -> TurnResult:
    """The session whose reply the conversation's last assistant message is, still at
    that turn; else a new one (its history imported)."""
    place = None
    if asked.last is not None:
        earlier = body.messages[: asked.at + 1]
        place = find_place(rt, user, conversation_digest(user, _shapes(earlier)))
    if place is not None:
        try:
            return _turn(rt, user, place.session_id, body, asked, place.turn, options)
        except ConversationDivergedError:
            pass  # another branch of the conversation: a session of its own
    return _turn(rt, user, f"chat-{rt.new_id()}", body, asked, None, options)


def _completion(result: TurnResult, model: str, answer_id: str, created: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": result.reply}
    finish = "stop"
    if result.status == "requires_action":
        finish = "tool_calls"
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in result.tool_calls
        ]
    total = result.usage + result.compaction_usage
    return {
        "id": answer_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {
            "prompt_tokens": total.input_tokens,
            "completion_tokens": total.output_tokens,
            "total_tokens": total.input_tokens + total.output_tokens,
        },
        "system_fingerprint": None,
    }


def _events(answer: dict[str, Any], include_usage: bool) -> str:
    """The answer as OpenAI's streamed chunks (role, content pieces or tool calls, the
    finish reason, usage when asked), then [DONE]."""
    choice = answer["choices"][0]
    message = choice["message"]
    head = {k: answer[k] for k in ("id", "created", "model", "system_fingerprint")}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        one = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return {**head, "object": "chat.completion.chunk", "choices": [one]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    text = message["content"] or ""
    chunks += [
        chunk({"content": text[i : i + STREAM_PIECE]}) for i in range(0, len(text), STREAM_PIECE)
    ]
    for index, call in enumerate(message.get("tool_calls") or []):
        chunks.append(chunk({"tool_calls": [{"index": index, **call}]}))
    chunks.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        chunks.append(
            {**head, "object": "chat.completion.chunk", "choices": [], "usage": answer["usage"]}
        )
    lines = [f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunks]
    return "".join(lines) + "data: [DONE]\n\n"


_TYPES = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}


def openai_error(exc: HarnessError) -> Answer:
    """Our error in OpenAI's shape, with our status code and headers."""
    kind = "server_error" if exc.status >= 500 else _TYPES.get(exc.status, "invalid_request_error")
    error: dict[str, Any] = {"message": exc.message, "type": kind, "code": exc.code, "param": None}
    if exc.details is not None:
        error["details"] = exc.details
    headers = {"Content-Type": "application/json", **exc.response_headers()}
    return exc.status, json.dumps({"error": error}, ensure_ascii=False), headers
