"""The Responses API's items and objects, in OpenAI's shapes: the one owner of them.

input items  -> chat messages (api/conversation reads both routes' requests alike):
  "hi" or {"role", "content"} (type "message"; content a string or input_text /
               output_text / refusal parts)       -> that role's message
  {"type": "function_call", "call_id", "name", "arguments"}
                                                  -> the assistant's tool call,
                                                     with the message before it
  {"type": "function_call_output", "call_id", "output"}   -> a tool message
  {"type": "reasoning"}                           -> skipped (no reasoning kept)
  anything else (item_reference, hosted tools' calls, images, files): a 400
a turn's answer -> the response object: a "message" item with the reply's
               output_text, a "function_call" item per call of the caller's tools
streaming    -> OpenAI's event sequence for that object (response.created, ...,
               response.output_text.delta, response.function_call_arguments.delta,
               ..., response.completed), as server-sent events
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agent_harness.api.conversation import ChatMessage
from agent_harness.api.openai_options import check_content_parts
from agent_harness.errors import InvalidRequestError, ValidationFailedError

if TYPE_CHECKING:
    from agent_harness.agent.commit import TurnResult

__all__ = ["STREAM_PIECE", "Echo", "events", "messages_of", "response_object"]

STREAM_PIECE = 200  # characters of the reply (or of a call's arguments) per delta
_SKIPPED = ("reasoning",)
#: what a request set that its response echoes (OpenAI's defaults where it set nothing)
Echo = dict[str, Any]


def messages_of(raw: object, model: str) -> list[ChatMessage]:
    """The request's ``input`` (a string, or a list of items) as chat messages."""
    if isinstance(raw, str):
        if not raw.strip():
            raise ValidationFailedError("input: must not be blank")
        return [ChatMessage(role="user", content=raw)]
    if not isinstance(raw, list) or not raw:
        raise ValidationFailedError("input: a string or a non-empty list of items")
    out: list[ChatMessage] = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            raise ValidationFailedError(f"input.{index}: an item is an object")
        kind = item.get("type", "message" if "role" in item else None)
        if kind in _SKIPPED:
            continue
        if kind == "message":
            out.append(_message(index, item, model))
        elif kind == "function_call":
            _call(out, index, item)
        elif kind == "function_call_output":
            out.append(_output(index, item, model))
        else:
            raise InvalidRequestError(
                f"input.{index}: items of type {kind!r} are not supported: send messages, "
                "function_call and function_call_output items"
            )
    return out


def _message(index: int, item: dict[str, Any], model: str) -> ChatMessage:
    role, content = item.get("role"), item.get("content")
    if role not in ("user", "system", "developer", "assistant"):
        raise ValidationFailedError(
            f"input.{index}.role: one of 'user', 'system', 'developer', 'assistant'"
        )
    if not isinstance(content, (str, list)):
        raise ValidationFailedError(f"input.{index}.content: a string or a list of parts")
    check_content_parts([item], model, where=f"input.{index}")
    if isinstance(content, list) and not all(isinstance(p, dict) for p in content):
        raise ValidationFailedError(f"input.{index}.content: each part is an object")
    return ChatMessage(role=role, content=content)


def _string(item: dict[str, Any], index: int, key: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise ValidationFailedError(f"input.{index}.{key}: a non-empty string")
    return value


def _call(out: list[ChatMessage], index: int, item: dict[str, Any]) -> None:
    """A function call joins the assistant message it follows (OpenAI's output lists a
    response's message and its calls as separate items; a turn's answer is one)."""
    arguments = item.get("arguments", "{}")
    if not isinstance(arguments, str):
        raise ValidationFailedError(f"input.{index}.arguments: a string (JSON)")
    call = {
        "id": _string(item, index, "call_id"),
        "function": {"name": _string(item, index, "name"), "arguments": arguments},
    }
    last = out[-1] if out else None
    if last is not None and last.role == "assistant":
        merged = [*(c.model_dump() for c in last.tool_calls or []), call]
        out[-1] = ChatMessage.model_validate(
            {"role": "assistant", "content": last.content, "tool_calls": merged}
        )
    else:
        out.append(ChatMessage.model_validate({"role": "assistant", "tool_calls": [call]}))


def _output(index: int, item: dict[str, Any], model: str) -> ChatMessage:
    output = item.get("output")
    if isinstance(output, list):
        check_content_parts([{"content": output}], model, where=f"input.{index}.output")
        output = "\n".join(str(p.get("text", "")) for p in output if isinstance(p, dict))
    if not isinstance(output, str):
        raise ValidationFailedError(f"input.{index}.output: a string or a list of text parts")
    call_id = _string(item, index, "call_id")
    return ChatMessage(role="tool", content=output, tool_call_id=call_id)


# -- the response object ------------------------------------------------------------------


def response_object(
    result: TurnResult | None, echo: Echo, response_id: str, created: int
) -> dict[str, Any]:
    """The response of a turn (None: the response as created, nothing output yet)."""
    output: list[dict[str, Any]] = []
    usage = None
    if result is not None:
        suffix = response_id.removeprefix("resp_")
        if result.reply:
            output.append(_text_item(f"msg_{suffix}", result.reply))
        for n, call in enumerate(result.tool_calls):
            output.append(
                {
                    "type": "function_call",
                    "id": f"fc_{suffix}_{n}",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": call.arguments,
                    "status": "completed",
                }
            )
        total = result.usage + result.compaction_usage
        usage = {
            "input_tokens": total.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": total.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": total.input_tokens + total.output_tokens,
        }
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "status": "completed" if result is not None else "in_progress",
        "background": False,
        "error": None,
        "incomplete_details": None,
        **echo,
        "output": output,
        "usage": usage,
    }


def _text_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id,
        "status": status,
        "role": "assistant",
        "content": [_text_part(text)] if status == "completed" else [],
    }


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def events(created: dict[str, Any], done: dict[str, Any]) -> str:
    """The response as OpenAI streams it: ``created`` (in progress, no output) then each
    output item, its text or arguments in deltas, then ``done`` (completed)."""
    out: list[dict[str, Any]] = [
        {"type": "response.created", "response": created},
        {"type": "response.in_progress", "response": created},
    ]
    for index, item in enumerate(done["output"]):
        at = {"output_index": index}
        if item["type"] == "message":
            text = item["content"][0]["text"]
            part = {"item_id": item["id"], **at, "content_index": 0}
            opened = _text_item(item["id"], "", "in_progress")
            out += [
                {"type": "response.output_item.added", **at, "item": opened},
                {"type": "response.content_part.added", **part, "part": _text_part("")},
                *(
                    {"type": "response.output_text.delta", **part, "delta": piece, "logprobs": []}
                    for piece in _pieces(text)
                ),
                {"type": "response.output_text.done", **part, "text": text, "logprobs": []},
                {"type": "response.content_part.done", **part, "part": _text_part(text)},
            ]
        else:
            started = {**item, "arguments": "", "status": "in_progress"}
            call = {"item_id": item["id"], **at}
            out += [
                {"type": "response.output_item.added", **at, "item": started},
                *(
                    {"type": "response.function_call_arguments.delta", **call, "delta": piece}
                    for piece in _pieces(item["arguments"])
                ),
                {
                    "type": "response.function_call_arguments.done",
                    **call,
                    "name": item["name"],
                    "arguments": item["arguments"],
                },
            ]
        out.append({"type": "response.output_item.done", **at, "item": item})
    out.append({"type": "response.completed", "response": done})
    lines = []
    for number, event in enumerate(out):
        event = {"type": event["type"], "sequence_number": number, **event}
        body = json.dumps(event, ensure_ascii=False)
        lines.append(f"event: {event['type']}\ndata: {body}\n\n")
    return "".join(lines)


def _pieces(text: str) -> list[str]:
    return [text[i : i + STREAM_PIECE] for i in range(0, len(text), STREAM_PIECE)]
