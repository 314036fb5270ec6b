"""Which session a stateless client's request continues (chat completions without
``X-Session-Id``, and responses).

OpenAI's APIs are stateless: each request carries the whole conversation (or names the
response it follows). The session it continues is the one that gave the request's last
assistant message, after the same conversation, so a growing conversation keeps one
session and nothing is imported twice:

    after a turn        place chat:<digest of (user, the conversation up to the reply)>
                        := (session, turn), put by the turn's own last write (one
                        DynamoDB transaction, no request of its own); each message counts
                        by its role and its text (an assistant's tool calls by their ids,
                        a tool result by its call id); system and developer messages do
                        not count, so changed instructions keep the conversation
    the next request    its messages up to its last assistant one -> that place (one
                        GetItem) -> the session, which must still be at that turn
                        (ChatTerms.at_turn)
    no assistant yet    a new conversation: a new session ("hi" twice is two chats)
    no place, or the    another branch (an edited or regenerated message), a
    session moved on    conversation begun elsewhere, or one idle past PLACE_DAYS: a
                        new session, its history imported

``X-Session-Id`` pins a session and skips all of this.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

from agent_harness.ports import Place

if TYPE_CHECKING:
    from agent_harness.agent.commit import TurnResult
    from agent_harness.ids import User
    from agent_harness.runtime import Runtime

__all__ = [
    "PLACE_DAYS",
    "Shape",
    "chat_place",
    "conversation_digest",
    "find_place",
    "place_expiry",
    "shape",
]

#: a message as the digest sees it: its role and what identifies it
Shape = tuple[str, object]
#: how long a place (and a stored response) is kept, as OpenAI keeps responses
PLACE_DAYS = 30


def shape(role: str, content: str | None, call_ids: list[str], call_id: str | None) -> Shape:
    """A message as a client sends it back: an assistant's tool calls by their ids
    (clients re-serialise arguments, and the text may be empty or null), a tool result
    by the call it answers, anything else by its text, stripped."""
    if role == "assistant" and call_ids:
        return role, sorted(call_ids)
    if role == "tool":
        return role, call_id or ""
    return role, (content or "").strip()


def conversation_digest(user: User, conversation: list[Shape]) -> str:
    """The whole conversation up to a reply: two chats whose replies read alike ("Hello!
    How can I help?") still have their own sessions."""
    # the user is in the digest though the namespace is per user already: no two users
    # could ever share a conversation's session even if keys were mixed up
    raw = json.dumps([user.key, conversation], ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def find_place(rt: Runtime, user: User, key: str) -> Place | None:
    """The place under ``key`` (``chat:<digest>``, ``resp:<id>``) while it lasts."""
    place = rt.table.get_place(user, key)
    if place is None or place.expires_at <= rt.clock.now().timestamp():
        return None
    return place


def place_expiry(rt: Runtime) -> int:
    return int(rt.clock.now().timestamp()) + PLACE_DAYS * 86_400


def chat_place(rt: Runtime, user: User, asked: list[Shape], result: TurnResult) -> Place:
    """The place of the conversation ``asked`` (the request's) followed by its reply."""
    ids = [call.id for call in result.tool_calls]
    conversation = [*asked, shape("assistant", result.reply, ids, None)]
    digest = conversation_digest(user, conversation)
    return Place(f"chat:{digest}", result.session_id, result.turn, place_expiry(rt))
