"""The DynamoDB key formats of the state table: the one owner of how items are keyed.

    pk = U#<user key>  sk = S#<session>   a session (turn counter, cursors, lease, gate)
    pk = U#<user key>  sk = USER          a user (consolidation lease, watermark, due mark)
    pk = U#<user key>  sk = BUDGET        the user's budget override (an operator's)
    pk = U#<user key>  sk = D#<day>       the user's usage that day (YYYY-MM-DD in
                                          HARNESS_TIMEZONE): tokens and model calls per
                                          role, turns, and the running token total
    pk = U#<user key>  sk = EXPIRY        when a fact of the user's expires (sparse GSI
                                          shard expire#k): the tick marks the user due
    pk = U#<user key>  sk = P#<key>       a place: the session and turn a chat
                                          completion's reply or a stored response ended
                                          (api/chat_sessions), with an expires_at TTL

    pk = G#<scope>     sk = M#<user key>  a member of a shared memory scope: role, when
    pk = U#<user key>  sk = G#<scope>     the same membership from the user's side
                                          (forgetting the user finds it in their partition)
    pk = SCOPES        sk = G#<scope>     a scope that has had a member (the operators' list)

Idempotency records of post-turn jobs live in the same user partition. The sparse
``due-index`` GSI is keyed by a shard (``due#k`` for consolidation, ``flush#k`` for
sessions whose trailing turns wait behind the flush throttle) and a due time.
"""

from __future__ import annotations

import hashlib

__all__ = [
    "BUDGET_SK",
    "DUE_INDEX",
    "EXPIRY_SK",
    "SCOPES_PK",
    "USER_SK",
    "due_shard",
    "member_sk",
    "place_sk",
    "scope_of",
    "scope_pk",
    "session_id_of",
    "session_sk",
    "shard_name",
    "usage_day_of",
    "usage_sk",
    "user_key_of",
    "user_pk",
    "wrote_scope_of",
    "wrote_sk",
]

DUE_INDEX = "due-index"
USER_SK = "USER"
#: a user's budget override, set by an operator
BUDGET_SK = "BUDGET"
#: when a fact of the user's next expires (memory.jobs.consolidate)
EXPIRY_SK = "EXPIRY"
_USER = "U#"
_SESSION = "S#"
_USAGE = "D#"
_PLACE = "P#"
_SCOPE = "G#"
_MEMBER = "M#"
#: a scope the user wrote into (their key is in its provenance; forgetting them finds it)
_WROTE = "W#"
#: the partition listing the scopes that have had members
SCOPES_PK = "SCOPES"


def scope_pk(scope: str) -> str:
    """The partition of a shared scope's members (``scope``: ``project:apollo``)."""
    return f"{_SCOPE}{scope}"


def scope_of(key: str) -> str:
    return key.removeprefix(_SCOPE)


def member_sk(user_key: str) -> str:
    return f"{_MEMBER}{user_key}"


def wrote_sk(scope: str) -> str:
    """In the user's partition: a shared scope whose memory names them (``""``: all)."""
    return f"{_WROTE}{scope}"


def wrote_scope_of(sk: str) -> str:
    return sk.removeprefix(_WROTE)


def user_pk(user_key: str) -> str:
    """The partition of everything about one user (``User.key``, already key-safe)."""
    return f"{_USER}{user_key}"


def user_key_of(pk: str) -> str:
    return pk.removeprefix(_USER)


def session_sk(session_id: str) -> str:
    return f"{_SESSION}{session_id}"


def session_id_of(sk: str) -> str:
    return sk.removeprefix(_SESSION)


def usage_sk(day: str) -> str:
    """The item of one day's usage (``day``: YYYY-MM-DD); sorts by day in the partition."""
    return f"{_USAGE}{day}"


def place_sk(key: str) -> str:
    return f"{_PLACE}{key}"


def usage_day_of(sk: str) -> str:
    return sk.removeprefix(_USAGE)


def shard_name(kind: str, number: int) -> str:
    """``due#3``: one shard of the due index (``kind``: ``due`` or ``flush``)."""
    return f"{kind}#{number}"


def due_shard(user_key: str, shards: int, kind: str = "due") -> str:
    """The shard a user's marks land in: a stable hash of the key over ``shards``."""
    digest = int(hashlib.sha256(user_key.encode()).hexdigest()[:8], 16)
    return shard_name(kind, digest % shards)
