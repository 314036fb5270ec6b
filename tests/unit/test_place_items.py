"""A place item as DynamoDB stores it: the response object compressed, and left out when
even compressed it would not fit an item (GET then answers 404, the place still works)."""

from __future__ import annotations

import random
import string

from agent_harness.aws.place_items import MAX_BODY_BYTES, place_item, place_of
from agent_harness.ids import User
from agent_harness.ports import Place

ALICE = User.from_id("alice")


def test_a_response_body_round_trips_compressed() -> None:
    body = '{"output_text": "' + "tea " * 20_000 + '", "ünïcode": true}'
    place = Place("resp:resp_1", "s1", 3, 2_000_000_000, body=body)

    item = place_item(ALICE, place)

    assert len(item["body"]["B"]) < len(body) // 10
    assert place_of("resp:resp_1", item) == place


def test_a_body_too_large_to_keep_is_left_out_and_the_place_kept() -> None:
    noise = "".join(random.Random(7).choices(string.printable, k=MAX_BODY_BYTES * 2))
    place = Place("resp:resp_2", "s1", 3, 2_000_000_000, body=noise)

    item = place_item(ALICE, place)

    assert "body" not in item
    assert place_of("resp:resp_2", item) == Place("resp:resp_2", "s1", 3, 2_000_000_000)
