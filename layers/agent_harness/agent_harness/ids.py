"""Identifiers: validated once at the boundary, safe everywhere after (paths: ``paths``).

A user id comes from the JWT ``sub`` claim (any string an identity provider emits,
e.g. ``auth0|5f7c...``) and is *encoded*, not rejected: every byte outside
``[A-Za-z0-9_-]`` becomes ``%XX``. The encoding is injective and contains no ``/``,
so ``users/<key>/`` can never reach another user's prefix; the key is capped so that
``users/<key>/<any valid path>`` fits in S3's 1,024-byte key. Session ids, ledger days
and workspace-relative paths are *validated*: bad ones are a 400/422.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from datetime import date
from urllib.parse import unquote

from agent_harness.errors import InvalidRequestError, ValidationFailedError
from agent_harness.paths import USER_ROOT

__all__ = [
    "MAX_PATH_CHARS",
    "MAX_USER_KEY_CHARS",
    "S3_MAX_KEY_BYTES",
    "SCOPE_NAME",
    "SESSION_ID_PATTERN",
    "User",
    "validate_day",
    "validate_relative_path",
    "validate_session_id",
]

_SAFE = frozenset(string.ascii_letters + string.digits + "_-")
#: the characters of a session id; every one is a path segment character too, so any
#: valid session id names valid paths (a turn, the context, evicted tool results)
_SESSION_CHARS = "A-Za-z0-9._:-"
_SESSION_RE = re.compile(rf"[A-Za-z0-9][{_SESSION_CHARS}]{{0,127}}")
#: the session id rule as a JSON Schema pattern (the OpenAPI document, MCP's tool schema)
SESSION_ID_PATTERN = f"^{_SESSION_RE.pattern}$"
_DAY_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
#: a shared scope's name (``project:<name>``): the one rule, for ``scopes`` and the owner key
SCOPE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_PATH_SEGMENT_RE = re.compile(rf"[{_SESSION_CHARS}][@+=,{_SESSION_CHARS}]*")  # "-" stays last
MAX_USER_ID_CHARS = 256
#: S3's limit on a key, in UTF-8 bytes (moto does not enforce it; S3 refuses the write)
S3_MAX_KEY_BYTES = 1024
#: a workspace-relative path (ASCII only, so characters are bytes)
MAX_PATH_CHARS = 512
#: the encoded user id, so ``users/<key>/<any valid path>`` fits in an S3 key
MAX_USER_KEY_CHARS = S3_MAX_KEY_BYTES - len(USER_ROOT) - 1 - MAX_PATH_CHARS


@dataclass(frozen=True)
class User:
    """An authenticated user: the raw id and its key-safe encoding."""

    id: str
    key: str

    @classmethod
    def from_id(cls, user_id: str) -> User:
        if not isinstance(user_id, str) or not user_id:
            raise InvalidRequestError("user id is empty")
        if len(user_id) > MAX_USER_ID_CHARS:
            raise InvalidRequestError(f"user id longer than {MAX_USER_ID_CHARS} characters")
        if any(ord(ch) < 32 or ord(ch) == 127 for ch in user_id):
            raise InvalidRequestError("user id contains control characters")
        try:
            raw = user_id.encode()
        except UnicodeEncodeError as exc:  # a lone surrogate from a JSON escape
            raise InvalidRequestError("user id is not valid Unicode text") from exc
        key = "".join(chr(byte) if chr(byte) in _SAFE else f"%{byte:02X}" for byte in raw)
        if len(key) > MAX_USER_KEY_CHARS:
            raise InvalidRequestError(
                f"user id is {len(key)} characters once encoded for storage keys; "
                f"the limit is {MAX_USER_KEY_CHARS}"
            )
        return cls(id=user_id, key=key)

    @classmethod
    def for_scope(cls, scope: str) -> User:
        """The owner of a shared scope's memory (``project:apollo``, ``org``), checked by
        ``scopes``: its key holds a ``.``, which a user's key never does (``from_id``
        encodes it), so no user's partition or prefix is a scope's."""
        kind, _, name = scope.partition(":")
        named = kind in ("project", "agent") and SCOPE_NAME.fullmatch(name) is not None
        if not named and scope != "org":
            raise InvalidRequestError(f"not a shared scope: {scope!r}")
        return cls(id=scope, key=f"{kind}.{name}")

    @property
    def is_scope(self) -> bool:
        """Is this the owner of a shared scope's memory (not a person)?"""
        return "." in self.key

    @classmethod
    def from_key(cls, key: str) -> User:
        """Rebuild a user (or a scope's owner) from its key (fan-out reads keys from the
        table)."""
        if "." in key:
            kind, _, name = key.partition(".")
            owner = cls.for_scope(f"{kind}:{name}" if name else kind)
            if owner.key != key:
                raise InvalidRequestError("not a canonical scope key")
            return owner
        user = cls.from_id(unquote(key, errors="strict"))
        if user.key != key:
            raise InvalidRequestError("not a canonical user key")
        return user


def validate_session_id(session_id: str, max_chars: int = 128) -> str:
    """1–128 chars of ``[A-Za-z0-9._:-]``, starting alphanumeric; at most ``max_chars``
    (the configured cap, ``HARNESS_MAX_SESSION_ID_CHARS``, can only lower it)."""
    if not isinstance(session_id, str) or not _SESSION_RE.fullmatch(session_id):
        raise ValidationFailedError(
            "session_id must be 1-128 characters of letters, digits, '.', '_', ':' or '-', "
            "starting with a letter or digit"
        )
    if len(session_id) > max_chars:
        raise ValidationFailedError(f"session_id is limited to {max_chars} characters")
    return session_id


def validate_day(day: str) -> str:
    """``YYYY-MM-DD`` naming a real calendar day."""
    if not isinstance(day, str) or not _DAY_RE.fullmatch(day):
        raise ValidationFailedError("day must look like YYYY-MM-DD")
    try:
        date.fromisoformat(day)
    except ValueError as exc:
        raise ValidationFailedError(f"{day} is not a calendar day") from exc
    return day


def validate_relative_path(path: str) -> str:
    """A workspace-relative path: no absolute paths, no traversal, plain segments only."""
    if not isinstance(path, str) or not path or len(path) > MAX_PATH_CHARS:
        raise InvalidRequestError(f"path must be 1-{MAX_PATH_CHARS} characters")
    if path.startswith("/") or "\\" in path:
        raise InvalidRequestError(f"path {path!r} must be relative to the workspace")
    for segment in path.split("/"):
        if segment in ("", ".", "..") or not _PATH_SEGMENT_RE.fullmatch(segment):
            raise InvalidRequestError(f"path {path!r} has an invalid segment {segment!r}")
    return path
