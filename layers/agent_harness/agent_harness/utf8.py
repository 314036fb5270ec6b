"""What text a request may carry: strings UTF-8 can encode, so every write can store them.

JSON's ``\\ud800`` escape decodes to a lone UTF-16 surrogate, which S3, DynamoDB and a
hash would each fail on after the work is done: the doors refuse it first (422, or a
JSON-RPC error on MCP). Kept apart from ``text`` so that a handler's import stays cheap.
"""

from __future__ import annotations

import re
from typing import TypeAlias

from agent_harness.errors import ValidationFailedError

__all__ = ["require_encodable", "scrubbed", "unencodable_at"]

#: a Python string holds a surrogate code point only when it was lone in the JSON
_SURROGATE = re.compile("[\ud800-\udfff]")

#: a node's place in the value: its key or index, and its parent's place
_Link: TypeAlias = "tuple[object, _Link] | None"


def unencodable_at(value: object, raw: str | None = None) -> str | None:
    """Where in a decoded JSON value (``messages.3.content``; ``""`` for the value itself)
    a string that UTF-8 cannot encode is, a key or a value; None when there is none.
    With ``raw``, the JSON text the value was decoded from, a text that encodes and has
    no ``\\uD...`` escape (the only other way in) is passed at once. One pass, no
    recursion: each node links to its parent, and only the path found is spelled out."""
    if raw is not None and "\\ud" not in raw and "\\uD" not in raw and _encodes(raw):
        return None
    stack: list[tuple[object, _Link]] = [(value, None)]
    while stack:
        item, link = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and not _encodes(item):
                return _spell(link)
        elif isinstance(item, dict):
            for key, sub in item.items():
                stack.append((sub, (key, link)))
                stack.append((key, (key, link)))
        elif isinstance(item, list):
            stack.extend((sub, (n, link)) for n, sub in enumerate(item))
    return None


def require_encodable(value: object, raw: str | None = None) -> None:
    """422 for a request whose text cannot be stored (see ``unencodable_at``)."""
    where = unencodable_at(value, raw)
    if where is not None:
        raise ValidationFailedError(
            f"{where or 'the body'}: not valid Unicode text (a lone UTF-16 surrogate such "
            "as \\ud800); send UTF-8 text"
        )


def scrubbed(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD: for text a service sent (a
    model's answer, a remote tool's result), which the turn stores rather than refuses."""
    if text.isascii() or _encodes(text):
        return text
    return _SURROGATE.sub("\ufffd", text)


def _encodes(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _spell(link: _Link) -> str:
    parts: list[str] = []
    while link is not None:
        key, link = link
        parts.append(str(key).encode(errors="backslashreplace").decode())
    return ".".join(reversed(parts))
