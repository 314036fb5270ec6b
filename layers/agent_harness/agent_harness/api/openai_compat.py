"""The agent with memory behind OpenAI's chat API: POST /v1/chat/completions, GET /v1/models.

    messages              the conversation, read as api/conversation reads every
                          stateless client's: the client's conversation is the truth
    X-Session-Id          pins the session; without it, the session the conversation
                          continues (api/chat_sessions), else a new one; the answer's
                          X-Session-Id header names it
    tools                 the app's own tools: a call of one ends the answer with
                          finish_reason "tool_calls"
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
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from agent_harness.api.conversation import (
    ChatMessage,
    Conversation,
    Pin,
    caller_tools,
    run_conversation,
)
from agent_harness.api.openai_options import (
    check_content_parts,
    openai_json,
    turn_options,
    validated,
)
from agent_harness.api.schemas import ToolDeclaration  # noqa: TC001 (pydantic reads it)
from agent_harness.errors import (
    HarnessError,
    ValidationFailedError,
)

if TYPE_CHECKING:
    from agent_harness.agent.commit import TurnResult
    from agent_harness.agent.options import TurnOptions
    from agent_harness.agent.scoped import Binding
    from agent_harness.ids import User
    from agent_harness.runtime import Runtime

__all__ = ["MODEL_ID", "chat_completion", "list_models", "openai_error"]

MODEL_ID = "agent-harness"
STREAM_PIECE = 200  # characters of the reply per streamed chunk
Answer = tuple[int, str, dict[str, str]]  # status, body, headers (with the content type)


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
    data = openai_json(raw, "messages", "messages")
    body = validated(ChatBody, data)
    if body.n not in (None, 1):
        raise ValidationFailedError("n: only one choice is generated (n=1)")
    check_content_parts(data.get("messages"), model)
    # OpenAI's rule: a tool_choice names or requires tools of the same request
    return body, turn_options(data, [t.name for t in body.tools or []])


def chat_completion(
    rt: Runtime, user: User, session_id: str | None, raw: str, binding: Binding | None = None
) -> Answer:
    """One chat completion: the request's new messages as a turn of ``session_id``, or,
    without one, of the session the conversation continues (api/chat_sessions)."""
    body, options = _parse(raw, rt.settings.agent_model)
    conversation = Conversation.of(body.messages)
    pin = Pin(session_id) if session_id is not None else None
    tools = caller_tools(body.tools, body.tool_choice)
    result = run_conversation(rt, user, pin, conversation, tools, options, binding=binding)
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
