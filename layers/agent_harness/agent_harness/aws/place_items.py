"""The place items of the state table (``keys.place_sk``): where a stateless client's
conversation reached, put by the transaction that ends the turn (aws/sessions) and read
with one GetItem. A stored response's object rides along, compressed: an item is at most
400 KB, and one too large to keep is stored without it (GET then answers 404)."""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from agent_harness.aws.dynamo import n_, s_
from agent_harness.keys import place_sk, user_pk
from agent_harness.ports import Place

if TYPE_CHECKING:
    from agent_harness.ids import User

__all__ = ["MAX_BODY_BYTES", "place_item", "place_key", "place_of"]

logger = Logger(child=True)

#: a compressed body over this is not kept: the item, keys and all, stays under 400 KB
MAX_BODY_BYTES = 350_000


def place_key(user: User, key: str) -> dict[str, Any]:
    return {"pk": s_(user_pk(user.key)), "sk": s_(place_sk(key))}


def place_item(user: User, place: Place) -> dict[str, Any]:
    item: dict[str, Any] = {
        **place_key(user, place.key),
        "session_id": s_(place.session_id),
        "turn": n_(place.turn),
        "expires_at": n_(place.expires_at),
    }
    if place.body is not None:
        packed = zlib.compress(place.body.encode("utf-8"), 6)
        if len(packed) <= MAX_BODY_BYTES:
            item["body"] = {"B": packed}
        else:
            logger.warning("a response too large to keep", extra={"bytes": len(packed)})
    return item


def place_of(key: str, item: dict[str, Any]) -> Place:
    """A place from its raw (typed) item."""
    body = item.get("body", {}).get("B")
    return Place(
        key=key,
        session_id=item["session_id"]["S"],
        turn=int(item["turn"]["N"]),
        expires_at=int(item["expires_at"]["N"]),
        body=zlib.decompress(body).decode("utf-8") if body is not None else None,
    )
