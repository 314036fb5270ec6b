"""agent_harness.utf8: where a decoded JSON value holds text no write can store."""

from __future__ import annotations

import json

import pytest

from agent_harness.errors import ValidationFailedError
from agent_harness.utf8 import require_encodable, unencodable_at


def test_the_place_of_a_lone_surrogate_is_named_in_values_and_keys() -> None:
    assert unencodable_at({"a": [1, "x", {"b": "tea \ud800"}]}) == "a.2.b"
    assert unencodable_at({"\udc00": 1}) == "\\udc00"
    assert unencodable_at("\udbff") == ""


def test_text_utf8_can_encode_passes() -> None:
    assert unencodable_at({"é": ["🙂", "部署", "\ud7ff", 1, None, 2.5]}) is None


def test_the_raw_json_text_screens_out_bodies_without_a_surrogate_escape() -> None:
    raw = '{"content": "tea \\udfff"}'
    assert unencodable_at(json.loads(raw), raw) == "content"
    # a value that did not come from this text is not walked: the text has no escape
    assert unencodable_at({"content": "\udfff"}, '{"content": "tea"}') is None
    assert unencodable_at({"content": "\udfff"}, "\udfff") == "content"


def test_a_deep_value_is_walked_without_recursion() -> None:
    deep: object = "\ud800"
    for _ in range(100_000):
        deep = [deep]
    assert unencodable_at(deep) == ".".join(["0"] * 100_000)


def test_unencodable_text_is_a_422() -> None:
    with pytest.raises(ValidationFailedError, match="message: not valid Unicode text"):
        require_encodable({"message": "\ud800"})


def test_text_a_service_sent_is_scrubbed_not_refused() -> None:
    from agent_harness.utf8 import scrubbed

    assert scrubbed("tea \ud800 and \udfff") == "tea \ufffd and \ufffd"
    assert scrubbed("部署 🙂") == "部署 🙂"


def test_a_models_answer_with_a_lone_surrogate_still_completes_the_turn() -> None:
    from agent_harness.agent.turn import run_turn
    from agent_harness.ids import User
    from agent_harness.models.resilience import ResilientModel
    from tests.fakes import ScriptedModel, make_runtime, tool_call

    steps = ScriptedModel(tool_call("memory_search", '{"query": "t\ud800"}'), "Tea \udfff.")
    rt = make_runtime(agent=ResilientModel(steps, role="agent", timeout=30))
    done = run_turn(rt, User.from_id("ann"), "s1", "what tea?")
    assert done.status == "completed" and done.reply == "Tea \ufffd."
    stored = next(v for k, v in rt.store.objects.items() if "/turns/" in k)
    assert stored  # the thread log holds it: every write could encode it
