"""A request's options for the agent model, in OpenAI's words, as ``TurnOptions``:
the chat completions route and POST /v1/sessions/{id}/messages read the same fields.

    response_format         {"type": "text"} | {"type": "json_object"} |
                            {"type": "json_schema", "json_schema": {"name", "schema",
                            "strict", "description"}}
    tool_choice             "auto" | "none" | "required" |
                            {"type": "function", "function": {"name"}} (or {"name"})
    temperature 0-2, top_p 0-1, max_tokens / max_completion_tokens >= 1,
    stop                    a string or at most 4, seed an integer
    parallel_tool_calls     accepted (the loop runs every call of a response)

A bad value is a 422 before anything is read or written (a schema over the tools' 64 KB
cap, a 413). Content parts other than text
(``image_url``, ``input_audio``, ``file``) are refused with a 400: the thread log and
the memory are text, so an image would be dropped silently.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from agent_harness.agent.client_tools import MAX_TOOLS_BYTES
from agent_harness.agent.importer import MAX_MESSAGES
from agent_harness.agent.options import MAX_STOP, TurnOptions
from agent_harness.errors import InvalidRequestError, PayloadTooLargeError, ValidationFailedError
from agent_harness.json_schema import SchemaError, check_tool_schema
from agent_harness.models.base import ResponseFormat, ToolChoice
from agent_harness.utf8 import require_encodable

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["check_content_parts", "openai_json", "turn_options", "validated"]

_CHOICES = ("auto", "none", "required")
_TEXT_PARTS = ("text", "input_text", "output_text", "refusal")


M = TypeVar("M", bound=BaseModel)


def openai_json(raw: str, items: str, noun: str) -> Any:
    """An OpenAI route's body as JSON: valid, encodable, and its list ``items`` (the
    messages, the input items) at most MAX_MESSAGES long, counted before it is parsed."""
    try:
        data = json.loads(raw) if raw else None
    except (ValueError, RecursionError) as exc:
        raise InvalidRequestError("the body is not valid JSON") from exc
    if data is None:
        raise InvalidRequestError("a JSON body is required")
    require_encodable(data, raw)
    listed = data.get(items) if isinstance(data, dict) else None
    if isinstance(listed, list) and len(listed) > MAX_MESSAGES:
        raise ValidationFailedError(
            f"{items}: {len(listed):,} {noun}; a request may carry at most {MAX_MESSAGES:,}"
        )
    return data


def validated(model: type[M], data: object, prefix: str = "") -> M:
    """``data`` as ``model``; the first error as ``<where>: <what>`` (OpenAI's style)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise ValidationFailedError(f"{prefix}{where}: {first['msg']}") from exc


def turn_options(data: dict[str, Any], tool_names: Iterable[str] | None) -> TurnOptions | None:
    """The options ``data`` (a request body) asks, or None when it asks none.
    ``tool_names``: the tools the request declares (None: it declares none, e.g. a
    resume that keeps the turn's)."""
    fields: dict[str, Any] = {}
    fmt = _response_format(data.get("response_format"))
    if fmt is not None:
        fields["response_format"] = fmt
    choice = _tool_choice(data.get("tool_choice"), tool_names)
    if choice is not None:
        fields["tool_choice"] = choice
    for key in ("temperature", "top_p", "seed"):
        if data.get(key) is not None:
            fields[key] = _number(key, data[key], integer=key == "seed")
    limit = _max_tokens(data.get("max_tokens"), data.get("max_completion_tokens"))
    if limit is not None:
        fields["max_output_tokens"] = limit
    stop = _stop(data.get("stop"))
    if stop:
        fields["stop"] = stop
    if data.get("parallel_tool_calls") not in (None, True, False):
        raise ValidationFailedError("parallel_tool_calls: must be a boolean")
    if not fields:
        return None
    return validated(TurnOptions, fields)


def check_content_parts(messages: object, model: str, *, where: str | None = None) -> None:
    """Refuse content parts that are not text (a 400 naming the agent model); ``where``
    names the message in the error (default ``messages.<index>``)."""
    if not isinstance(messages, list):
        return
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind is not None and kind not in _TEXT_PARTS:
                label = where or f"messages.{index}"
                raise InvalidRequestError(
                    f"{label}: {kind} content parts are not supported: only text "
                    f"reaches the agent model ({model}); send the text, or describe the "
                    "image in words"
                )


def _response_format(raw: object) -> ResponseFormat | None:
    if raw is None:
        return None
    kind = raw.get("type") if isinstance(raw, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return ResponseFormat(type="json_object")
    if kind != "json_schema" or not isinstance(raw, dict):
        raise ValidationFailedError(
            "response_format.type: must be one of 'text', 'json_object', 'json_schema'"
        )
    spec = raw.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise ValidationFailedError("response_format.json_schema: an object with a name")
    schema = spec.get("schema")
    size = len(json.dumps(schema, ensure_ascii=False).encode())
    if size > MAX_TOOLS_BYTES:  # sent with every call of the turn, like the tools
        raise PayloadTooLargeError(
            f"response_format.json_schema is {size:,} bytes; the limit is {MAX_TOOLS_BYTES:,}"
        )
    if schema is not None:
        try:
            schema = check_tool_schema(schema)
        except SchemaError as exc:
            raise ValidationFailedError(f"response_format.json_schema.schema: {exc}") from exc
    description = spec.get("description")
    return ResponseFormat(
        type="json_schema",
        name=spec["name"][:64] or "response",
        json_schema=schema,
        strict=spec.get("strict") is True,
        description=description if isinstance(description, str) else None,
    )


def _tool_choice(raw: object, tool_names: Iterable[str] | None) -> ToolChoice | None:
    if raw is None:
        return None
    declared = None if tool_names is None else set(tool_names)
    if isinstance(raw, str) and raw in _CHOICES:
        if raw == "required" and declared is not None and not declared:
            raise ValidationFailedError("tool_choice: required needs tools to be declared")
        return raw  # type: ignore[return-value]  # one of _CHOICES
    spec: object = raw.get("function", raw) if isinstance(raw, dict) else None
    name = spec.get("name") if isinstance(spec, dict) else None
    if not isinstance(name, str) or not name:
        raise ValidationFailedError(
            "tool_choice: 'auto', 'none', 'required' or "
            '{"type": "function", "function": {"name": ...}}'
        )
    if declared is not None and name not in declared:
        raise ValidationFailedError(f"tool_choice: {name} is not one of the declared tools")
    return {"name": name}


def _number(key: str, value: object, *, integer: bool) -> int | float:
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok:
        raise ValidationFailedError(f"{key}: must be {'an integer' if integer else 'a number'}")
    return value  # type: ignore[return-value]  # checked above


def _max_tokens(max_tokens: object, max_completion: object) -> int | None:
    values = [v for v in (max_completion, max_tokens) if v is not None]
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValidationFailedError("max_tokens: must be a positive integer")
    if len(values) == 2 and values[0] != values[1]:
        raise ValidationFailedError("max_tokens and max_completion_tokens disagree: send one")
    return values[0] if values else None  # type: ignore[return-value]  # checked above


def _stop(raw: object) -> list[str]:
    if raw is None:
        return []
    stop = [raw] if isinstance(raw, str) else raw
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise ValidationFailedError("stop: a string or a list of non-empty strings")
    if len(stop) > MAX_STOP:
        raise ValidationFailedError(f"stop: at most {MAX_STOP} sequences")
    return stop
