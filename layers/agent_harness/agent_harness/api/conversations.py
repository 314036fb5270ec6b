"""OpenAI's Conversations API over sessions: a conversation is a session of ours, its
items the session's messages, so a conversation is remembered like any session.

    POST   /v1/conversations                  {"items"?, "metadata"?} -> conversation
    GET    /v1/conversations/{id}             conversation
    POST   /v1/conversations/{id}             {"metadata"} -> conversation
    DELETE /v1/conversations/{id}             {"id", "object": "conversation.deleted",
                                              "deleted": true}
    GET    /v1/conversations/{id}/items       ?limit (1-100, 20) &order (desc) &after
    POST   /v1/conversations/{id}/items       {"items": [...]} (at most 20) -> the list
    GET    /v1/conversations/{id}/items/{item_id}
    DELETE /v1/conversations/{id}/items/{item_id} -> conversation
    POST   /v1/responses {"conversation": id} a turn of that session (api/responses)

The conversation is ``sessions/<conv_...>/conversation.json`` (its time, metadata, the
items deleted from it, whether it was deleted), written conditionally. Items added are
imported as turns (a new turn at each user message; no model call; flushed and indexed
as an import, agent/importer): message items of the user and the assistant,
``function_call`` and ``function_call_output`` items (the Agents SDK's session adds
them after each run). Items are read back from the turns: a message item per user or
assistant text, a ``function_call`` per call of the caller's tools and a
``function_call_output`` per result (the stack's own memory and remote tools, run on
the server, are not the conversation's). An item's id names its turn and place
(``msg_<turn><n>``): stable, and the cursor of ``after``. Deleting an item hides it from
the items, not from the thread log or from what memory learned of it; deleting a
conversation hides it and its items (OpenAI keeps the items of a deleted conversation
too). ``DELETE /v1/memory`` removes them all.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent_harness.agent.importer import MAX_TOTAL_CHARS
from agent_harness.errors import (
    NotFoundError,
    PayloadTooLargeError,
    PreconditionFailedError,
    ValidationFailedError,
)
from agent_harness.paths import conversation_path

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_harness.api.openai_compat import Answer
    from agent_harness.ids import User
    from agent_harness.models.base import Message
    from agent_harness.records import TurnRecord
    from agent_harness.runtime import Runtime

__all__ = [
    "CONVERSATION_ID",
    "create_conversation",
    "create_items",
    "delete_conversation",
    "delete_item",
    "get_conversation",
    "get_item",
    "list_items",
    "require_conversation",
    "update_conversation",
]

CONVERSATION_ID = re.compile(r"conv_[A-Za-z0-9_-]{1,64}")
_ITEM_ID = re.compile(r"(msg|fc|fco)_(\d{8})(\d{4})")
#: items per POST .../items, and per conversation create (OpenAI's limit)
MAX_ITEMS = 20
MAX_METADATA = 16
#: turns read per GET while paging items
_TURN_BATCH = 20
_WRITE_ATTEMPTS = 4


class ConversationNotFoundError(NotFoundError):
    code = "conversation_not_found"


class ItemNotFoundError(NotFoundError):
    code = "item_not_found"


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    created_at: int
    metadata: dict[str, str] = Field(default_factory=dict)
    hidden: list[str] = Field(default_factory=list)
    deleted: bool = False


class _CreateBody(BaseModel):
    model_config = ConfigDict(extra="ignore")

    items: list[dict[str, Any]] | None = Field(default=None, max_length=MAX_ITEMS)
    metadata: dict[str, str] | None = None


class _ItemsBody(BaseModel):
    model_config = ConfigDict(extra="ignore")

    items: list[dict[str, Any]] = Field(min_length=1, max_length=MAX_ITEMS)


class _UpdateBody(BaseModel):
    model_config = ConfigDict(extra="ignore")

    metadata: dict[str, str]


def _parse(model: type[Any], raw: str) -> Any:
    from agent_harness.api.openai_options import openai_json, validated

    data = openai_json(raw, "items", "items")
    if not isinstance(data, dict):
        raise ValidationFailedError("a JSON object body is required")
    return validated(model, data)


def _metadata(value: dict[str, str] | None) -> dict[str, str]:
    value = value or {}
    if len(value) > MAX_METADATA or any(len(k) > 64 or len(v) > 512 for k, v in value.items()):
        raise ValidationFailedError(
            f"metadata: at most {MAX_METADATA} pairs, keys of 64 and values of 512 characters"
        )
    return value


def _json(status: int, body: Any) -> Answer:
    return status, json.dumps(body, ensure_ascii=False), {"Content-Type": "application/json"}


def _view(record: _Record) -> dict[str, Any]:
    return {
        "id": record.id,
        "object": "conversation",
        "created_at": record.created_at,
        "metadata": record.metadata,
    }


# -- the conversation record ---------------------------------------------------------------
def _read(rt: Runtime, user: User, conversation_id: str) -> tuple[_Record, str]:
    """The conversation and its ETag; 404 when there is none (or it was deleted)."""
    if not CONVERSATION_ID.fullmatch(conversation_id):
        raise ConversationNotFoundError(f"Conversation with id '{conversation_id}' not found.")
    stored = rt.store.get(user, conversation_path(conversation_id))
    record = None
    if stored is not None:
        try:
            record = _Record.model_validate_json(stored.content)
        except ValidationError:
            record = None
    if record is None or record.deleted or stored is None:
        raise ConversationNotFoundError(f"Conversation with id '{conversation_id}' not found.")
    return record, stored.etag


def require_conversation(rt: Runtime, user: User, conversation_id: str) -> None:
    """404 unless ``conversation_id`` is one of ``user``'s (responses' ``conversation``)."""
    _read(rt, user, conversation_id)


def _change(
    rt: Runtime, user: User, conversation_id: str, edit: Callable[[_Record], _Record]
) -> _Record:
    """The conversation as ``edit`` makes it, written if still the version read (a
    concurrent change is read again and ``edit`` applied to it)."""
    for attempt in range(_WRITE_ATTEMPTS):
        record, etag = _read(rt, user, conversation_id)
        changed = edit(record)
        try:
            path = conversation_path(conversation_id)
            rt.store.put(user, path, changed.model_dump_json(), if_match=etag)
            return changed
        except PreconditionFailedError:
            if attempt == _WRITE_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


# -- conversations -------------------------------------------------------------------------
def create_conversation(rt: Runtime, user: User, raw: str) -> Answer:
    body: _CreateBody = _parse(_CreateBody, raw)
    metadata = _metadata(body.metadata)
    groups = _groups(body.items or [], rt.settings.agent_model)
    conversation_id = f"conv_{rt.new_id()}"
    record = _Record(
        id=conversation_id, created_at=int(rt.clock.now().timestamp()), metadata=metadata
    )
    path = conversation_path(conversation_id)
    rt.store.put(user, path, record.model_dump_json(), create_only=True)
    if groups:
        from agent_harness.agent.importer import import_turns

        import_turns(rt, user, conversation_id, groups)
    return _json(200, _view(record))


def get_conversation(rt: Runtime, user: User, conversation_id: str) -> Answer:
    return _json(200, _view(_read(rt, user, conversation_id)[0]))


def update_conversation(rt: Runtime, user: User, conversation_id: str, raw: str) -> Answer:
    body: _UpdateBody = _parse(_UpdateBody, raw)
    metadata = _metadata(body.metadata)
    record = _change(
        rt, user, conversation_id, lambda r: r.model_copy(update={"metadata": metadata})
    )
    return _json(200, _view(record))


def delete_conversation(rt: Runtime, user: User, conversation_id: str) -> Answer:
    _change(rt, user, conversation_id, lambda r: r.model_copy(update={"deleted": True}))
    return _json(200, {"id": conversation_id, "object": "conversation.deleted", "deleted": True})


# -- items ---------------------------------------------------------------------------------
def _groups(items: list[dict[str, Any]], model: str) -> list[tuple[None, list[Message]]]:
    """Items as turns: a new turn at each user message (api/response_items reads them,
    as it reads a response's input)."""
    from agent_harness.api.response_items import messages_of
    from agent_harness.errors import InvalidRequestError
    from agent_harness.models.base import Message, ToolCall

    if not items:
        return []
    try:
        said = messages_of(items, model)
    except InvalidRequestError as exc:
        exc.message = exc.message.replace("input.", "items.", 1)
        raise
    groups: list[tuple[None, list[Message]]] = []
    for index, chat in enumerate(said):
        role = chat.role
        if role == "system" or role == "developer":
            raise ValidationFailedError(
                f"items.{index}.role: a conversation holds user and assistant messages, "
                "function calls and their outputs; instructions go with each response"
            )
        calls = [
            ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments)
            for c in chat.tool_calls or []
        ]
        message = Message(
            role=role, content=chat.text(), tool_calls=calls, tool_call_id=chat.tool_call_id
        )
        if role == "user" or not groups:
            groups.append((None, []))
        groups[-1][1].append(message)
    total = sum(len(m.content) for _, said in groups for m in said)
    if total > MAX_TOTAL_CHARS:
        raise PayloadTooLargeError(f"items are limited to {MAX_TOTAL_CHARS:,} characters")
    return groups


def _item_id(kind: str, turn: int, n: int) -> str:
    return f"{kind}_{turn:08d}{n:04d}"


def items_of(record: TurnRecord) -> list[dict[str, Any]]:
    """A turn's messages as conversation items (see the module)."""
    from agent_harness.api.conversation import OWN_TOOLS

    out: list[dict[str, Any]] = []
    server_side: set[str] = set()
    n = 0
    for message in record.messages:
        if message.role == "tool":
            if message.tool_call_id in server_side:
                continue
            out.append(
                {
                    "type": "function_call_output",
                    "id": _item_id("fco", record.turn, n),
                    "call_id": message.tool_call_id or "",
                    "output": message.content,
                    "status": "completed",
                }
            )
        elif message.role in ("user", "assistant"):
            if message.content.strip():
                kind = "input_text" if message.role == "user" else "output_text"
                part: dict[str, Any] = {"type": kind, "text": message.content}
                if kind == "output_text":
                    part["annotations"] = []
                out.append(
                    {
                        "type": "message",
                        "id": _item_id("msg", record.turn, n),
                        "status": "completed",
                        "role": message.role,
                        "content": [part],
                    }
                )
            for call in message.tool_calls:
                n += 1
                if call.name in OWN_TOOLS or "__" in call.name:  # the server ran it
                    server_side.add(call.id)
                    continue
                out.append(
                    {
                        "type": "function_call",
                        "id": _item_id("fc", record.turn, n),
                        "call_id": call.id,
                        "name": call.name,
                        "arguments": call.arguments,
                        "status": "completed",
                    }
                )
        n += 1
    return out


def _turn_of(item_id: str) -> int:
    matched = _ITEM_ID.fullmatch(item_id)
    if matched is None:
        raise ItemNotFoundError(f"Item with id '{item_id}' not found.")
    return int(matched.group(2))


def _items(
    rt: Runtime, user: User, conversation_id: str, hidden: set[str], *, newest_first: bool
) -> Any:
    """Every item of the conversation, in order, read a batch of turns at a time."""
    from agent_harness.agent.history import turn_numbers
    from agent_harness.paths import turn_path
    from agent_harness.records import TurnRecord

    numbers = sorted(turn_numbers(rt, user, conversation_id), reverse=newest_first)
    for start in range(0, len(numbers), _TURN_BATCH):
        batch = numbers[start : start + _TURN_BATCH]
        paths = [turn_path(conversation_id, n) for n in batch]
        stored = rt.store.get_many(user, paths)
        for path in paths:
            record = TurnRecord.parse_or_none(stored[path].content) if path in stored else None
            if record is None:
                continue
            found = [i for i in items_of(record) if i["id"] not in hidden]
            yield from (reversed(found) if newest_first else found)


def list_items(rt: Runtime, user: User, conversation_id: str, query: dict[str, str]) -> Answer:
    record, _ = _read(rt, user, conversation_id)
    limit = _limit(query.get("limit"))
    order = query.get("order") or "desc"
    if order not in ("asc", "desc"):
        raise ValidationFailedError("order: 'asc' or 'desc'")
    after = query.get("after")
    page: list[dict[str, Any]] = []
    passed = after is None
    for item in _items(rt, user, conversation_id, set(record.hidden), newest_first=order == "desc"):
        if not passed:
            passed = item["id"] == after
            continue
        page.append(item)
        if len(page) > limit:
            break
    more = len(page) > limit
    page = page[:limit]
    return _json(
        200,
        {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": more,
        },
    )


def _limit(raw: str | None) -> int:
    if raw is None:
        return 20
    if not raw.isdigit() or not 1 <= int(raw) <= 100:
        raise ValidationFailedError("limit: an integer from 1 to 100")
    return int(raw)


def create_items(rt: Runtime, user: User, conversation_id: str, raw: str) -> Answer:
    """The items, imported as turns of the conversation; the list of them as stored."""
    from agent_harness.agent.history import list_turns
    from agent_harness.agent.importer import import_turns

    _read(rt, user, conversation_id)
    body: _ItemsBody = _parse(_ItemsBody, raw)
    groups = _groups(body.items, rt.settings.agent_model)
    done = import_turns(rt, user, conversation_id, groups)
    records, _ = list_turns(rt, user, conversation_id, after=done.first_turn - 1, limit=len(groups))
    created = [item for record in records for item in items_of(record)]
    return _json(
        200,
        {
            "object": "list",
            "data": created,
            "first_id": created[0]["id"] if created else None,
            "last_id": created[-1]["id"] if created else None,
            "has_more": False,
        },
    )


def _find(rt: Runtime, user: User, conversation_id: str, item_id: str) -> dict[str, Any]:
    from agent_harness.paths import turn_path
    from agent_harness.records import TurnRecord

    record, _ = _read(rt, user, conversation_id)
    turn = _turn_of(item_id)
    stored = rt.store.get(user, turn_path(conversation_id, turn))
    parsed = TurnRecord.parse_or_none(stored.content) if stored else None
    for item in items_of(parsed) if parsed else []:
        if item["id"] == item_id and item_id not in record.hidden:
            return item
    raise ItemNotFoundError(f"Item with id '{item_id}' not found.")


def get_item(rt: Runtime, user: User, conversation_id: str, item_id: str) -> Answer:
    return _json(200, _find(rt, user, conversation_id, item_id))


def delete_item(rt: Runtime, user: User, conversation_id: str, item_id: str) -> Answer:
    """The item hidden from the conversation's items; the conversation."""
    _find(rt, user, conversation_id, item_id)
    record = _change(
        rt,
        user,
        conversation_id,
        lambda r: r.model_copy(update={"hidden": sorted({*r.hidden, item_id})}),
    )
    return _json(200, _view(record))
