"""Which session a chat completion without ``X-Session-Id`` continues.

OpenAI's chat API is stateless: each request carries the whole conversation. The
session it continues is the one that gave the request's last assistant message, after
the same conversation, so a growing conversation keeps one session and nothing is
imported twice:

    after a turn        chats/<digest of (user, the conversation up to the reply)>.json
                        := {session, turn}; each message counts by its role and its
                        text (an assistant's tool calls by their ids, a tool result by
                        its call id); system and developer messages do not count
    the next request    its messages up to its last assistant one -> that object -> the
                        session, which must still be at that turn (ChatTerms.at_turn)
    no assistant yet    a new conversation: a new session ("hi" twice is two chats)
    no object, or the   another branch (an edited or regenerated message) or a
    session moved on    conversation begun elsewhere: a new session, its history imported

``X-Session-Id`` pins a session and skips all of this.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger
from pydantic import BaseModel, ConfigDict, ValidationError

from agent_harness.errors import HarnessError
from agent_harness.paths import chat_path

if TYPE_CHECKING:
    from agent_harness.agent.commit import TurnResult
    from agent_harness.ids import User
    from agent_harness.runtime import Runtime

__all__ = ["ChatPlace", "Shape", "conversation_digest", "find_place", "remember_place", "shape"]

#: a message as the digest sees it: its role and what identifies it
Shape = tuple[str, object]

logger = Logger(child=True)


class ChatPlace(BaseModel):
    """Where a reply was given: the session and the turn it ended (or paused)."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    session_id: str
    turn: int


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
    # could ever share a conversation's session even if paths were mixed up
    raw = json.dumps([user.key, conversation], ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def find_place(rt: Runtime, user: User, digest: str) -> ChatPlace | None:
    stored = rt.store.get(user, chat_path(digest))
    if stored is None:
        return None
    try:
        return ChatPlace.model_validate_json(stored.content)
    except ValidationError:
        return None  # edited by hand: the conversation starts a new session


def remember_place(rt: Runtime, user: User, asked: list[Shape], result: TurnResult) -> None:
    """After a turn: the conversation (``asked``, the request's) and its reply name the
    session. Best effort: a lost write costs the next request a new session (its history
    imported), never a wrong one."""
    ids = [call.id for call in result.tool_calls]
    conversation = [*asked, shape("assistant", result.reply, ids, None)]
    digest = conversation_digest(user, conversation)
    place = ChatPlace(session_id=result.session_id, turn=result.turn)
    try:
        rt.store.put(user, chat_path(digest), place.model_dump_json())
    except HarnessError:
        logger.warning("the chat's place was not saved", extra={"session_id": result.session_id})
