"""The caller's turn options in the loop (agent/options) and how a request body spells
them (api/openai_options)."""

from __future__ import annotations

import json

import pytest

from agent_harness.agent.loop import LoopState, run_loop
from agent_harness.agent.options import TurnOptions
from agent_harness.api.openai_options import check_content_parts, turn_options
from agent_harness.errors import (
    InvalidRequestError,
    ModelOutputError,
    PayloadTooLargeError,
    ValidationFailedError,
)
from agent_harness.models.base import Message, ResponseFormat, ToolCall, ToolSpec
from agent_harness.records import PendingTurn
from agent_harness.settings import Settings
from tests.fakes import ORDER_TOOL, ScriptedModel, make_runtime, tool_call
from tests.unit.test_client_tools import rt_user
from tests.unit.test_routes import call

START = [Message(role="user", content="go")]
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city", "days"],
    "additionalProperties": False,
}
STRICT = ResponseFormat(type="json_schema", name="Trip", json_schema=SCHEMA, strict=True)


class Box:
    """A memory tool run here and a caller's tool (deferred: the turn pauses)."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def seen(self, messages: list[Message]) -> None:
        pass

    def specs(self) -> list[ToolSpec]:
        return [
            ToolSpec(name="memory_search", description="search", parameters={"type": "object"}),
            ToolSpec(name="lookup_order", description="order", parameters={"type": "object"}),
        ]

    def call(self, call: ToolCall) -> str | None:
        self.ran.append(call.name)
        return None if call.name == "lookup_order" else "hits"


CALLER = frozenset({"lookup_order"})


def offered(model: ScriptedModel) -> list[list[str]]:
    return [[t.name for t in r.tools] for r in model.requests]


def test_sampling_options_reach_every_agent_call() -> None:
    model = ScriptedModel(tool_call("memory_search"), "done")
    options = TurnOptions(temperature=0.2, top_p=0.9, max_output_tokens=99, stop=["END"], seed=7)
    run_loop(model, START, tools=Box(), max_calls=4, options=options, caller=CALLER)
    for request in model.requests:
        assert (request.temperature, request.top_p, request.max_output_tokens) == (0.2, 0.9, 99)
        assert (request.stop, request.seed) == (["END"], 7)


def test_tool_choice_none_hides_the_callers_tools_but_not_memory() -> None:
    model = ScriptedModel(tool_call("lookup_order"), "done")
    box = Box()
    result = run_loop(
        model, START, tools=box, max_calls=4, options=TurnOptions(tool_choice="none"), caller=CALLER
    )
    assert offered(model)[0] == ["memory_search"]
    assert result.reply == "done" and not result.paused and box.ran == []
    assert result.messages[1].content == "Error: lookup_order is not offered in this call"


def test_tool_choice_required_lets_memory_run_then_ends_in_a_callers_call() -> None:
    model = ScriptedModel(tool_call("memory_search"), tool_call("lookup_order", call_id="c2"))
    options = TurnOptions(tool_choice="required")
    result = run_loop(model, START, tools=Box(), max_calls=3, options=options, caller=CALLER)
    assert offered(model) == [["memory_search", "lookup_order"]] * 2
    assert [r.tool_choice for r in model.requests] == ["required", "required"]
    assert result.paused and [c.name for c in result.pending] == ["lookup_order"]


def test_tool_choice_required_answered_with_text_is_asked_again_then_refused() -> None:
    model = ScriptedModel("chatty", tool_call("lookup_order"))
    options = TurnOptions(tool_choice="required")
    result = run_loop(model, START, tools=Box(), max_calls=3, options=options, caller=CALLER)
    assert offered(model)[1] == ["lookup_order"] and result.paused
    assert all(m.content != "chatty" for m in result.messages)  # the text is not the answer

    stubborn = ScriptedModel("no", "still no")
    with pytest.raises(ModelOutputError, match="tool_choice"):
        run_loop(stubborn, START, tools=Box(), max_calls=3, options=options, caller=CALLER)


@pytest.mark.parametrize("choice", ["required", {"name": "lookup_order"}])
def test_the_cap_holds_over_a_forced_choice_its_last_call_offers_no_tool(choice: object) -> None:
    model = ScriptedModel(tool_call("lookup_order"), "Done: here is what I found.")
    options = TurnOptions(tool_choice=choice)  # type: ignore[arg-type]
    done = LoopState(messages=[], model_calls=1)
    result = run_loop(
        model, START, tools=Box(), max_calls=2, done=done, options=options, caller=CALLER
    )
    assert offered(model) == [[]] and model.requests[0].tool_choice is None
    assert not result.paused and result.model_calls == 2


def test_a_turn_resumed_with_no_call_left_answers_with_its_latest_words() -> None:
    model = ScriptedModel("never asked")
    said = Message(role="assistant", content="Looking it up.", tool_calls=[])
    done = LoopState(messages=[said], model_calls=2)
    result = run_loop(model, START, tools=Box(), max_calls=2, done=done, caller=CALLER)
    assert result.reply == "Looking it up." and not model.requests and not result.paused


def test_a_named_tool_choice_offers_and_forces_only_that_tool() -> None:
    model = ScriptedModel(tool_call("lookup_order"))
    options = TurnOptions(tool_choice={"name": "lookup_order"})
    result = run_loop(model, START, tools=Box(), max_calls=4, options=options, caller=CALLER)
    assert offered(model) == [["lookup_order"]]
    assert model.requests[0].tool_choice == {"name": "lookup_order"} and result.paused


def test_a_closed_turn_ignores_the_choice_it_cannot_honour() -> None:
    model = ScriptedModel("closing words")
    done = LoopState(messages=[], model_calls=1)
    options = TurnOptions(tool_choice="required")
    result = run_loop(model, START, tools=None, max_calls=2, done=done, options=options)
    assert result.reply == "closing words" and model.requests[0].tool_choice is None


def test_a_formatted_answer_is_kept_when_valid_after_memory_tools_ran() -> None:
    answer = '```json\n{"city": "Oslo", "days": 3}\n```'
    model = ScriptedModel(tool_call("memory_search"), answer)
    options = TurnOptions(response_format=STRICT)
    result = run_loop(model, START, tools=Box(), max_calls=4, options=options, caller=CALLER)
    assert json.loads(result.reply) == {"city": "Oslo", "days": 3}
    assert all(r.response_format == STRICT for r in model.requests)
    assert result.model_calls == 2


def test_an_invalid_formatted_answer_gets_one_corrective_retry_not_kept() -> None:
    model = ScriptedModel('{"city": "Oslo"}', '{"city": "Oslo", "days": 2}')
    options = TurnOptions(response_format=STRICT)
    result = run_loop(model, START, tools=Box(), max_calls=4, options=options)
    retry = model.requests[1]
    assert retry.tools == [] and "days" in retry.messages[-1].content
    assert [m.content for m in result.messages] == ['{"city": "Oslo", "days": 2}']
    assert result.model_calls == 2 and result.usage.input_tokens == 20


def test_an_invalid_answer_at_the_turns_last_call_gets_no_retry_past_the_cap() -> None:
    model = ScriptedModel(tool_call("memory_search"), '{"city": "Oslo"}', '{"unused": 1}')
    options = TurnOptions(response_format=STRICT)
    with pytest.raises(ModelOutputError) as caught:
        run_loop(model, START, tools=Box(), max_calls=2, options=options, caller=CALLER)
    assert len(model.requests) == 2  # HARNESS_MAX_MODEL_CALLS holds: no third, corrective call
    assert caught.value.code == "model_output_invalid" and "no model call left" in str(caught.value)


def test_a_second_invalid_answer_is_model_output_invalid() -> None:
    model = ScriptedModel("not json", "[1, 2]")
    options = TurnOptions(response_format=ResponseFormat(type="json_object"))
    with pytest.raises(ModelOutputError) as caught:
        run_loop(model, START, tools=None, max_calls=4, options=options)
    assert caught.value.status == 502 and caught.value.code == "model_output_invalid"
    assert "not a JSON object" in caught.value.message


def test_a_paused_turn_keeps_its_options_and_old_pauses_still_parse() -> None:
    options = TurnOptions(response_format=STRICT, tool_choice="required", temperature=0.5)
    base = {
        "pause_id": "p1",
        "turn": 1,
        "started_at": "2026-01-01T00:00:00Z",
        "paused_at": "2026-01-01T00:00:00Z",
        "messages": [],
        "calls": [],
    }
    stored = PendingTurn(**base, options=options).model_dump_json()
    assert PendingTurn.model_validate_json(stored).options == options
    assert PendingTurn.model_validate(base).options is None


# -- the request body ----------------------------------------------------------------------


def test_the_openai_fields_become_turn_options() -> None:
    body = {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "Trip", "schema": SCHEMA, "strict": True},
        },
        "tool_choice": {"type": "function", "function": {"name": "lookup_order"}},
        "temperature": 0,
        "top_p": 1,
        "max_completion_tokens": 300,
        "stop": "END",
        "seed": 3,
        "parallel_tool_calls": False,
    }
    options = turn_options(body, ["lookup_order"])
    assert options == TurnOptions(
        response_format=STRICT,
        tool_choice={"name": "lookup_order"},
        temperature=0,
        top_p=1,
        max_output_tokens=300,
        stop=["END"],
        seed=3,
    )
    assert turn_options({"response_format": {"type": "text"}, "tool_choice": None}, None) is None


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"temperature": 3}, "temperature"),
        ({"temperature": "hot"}, "temperature"),
        ({"top_p": -0.1}, "top_p"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": 10, "max_completion_tokens": 20}, "disagree"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "at most 4"),
        ({"stop": [1]}, "stop"),
        ({"seed": 1.5}, "seed"),
        ({"response_format": {"type": "xml"}}, "response_format.type"),
        ({"response_format": {"type": "json_schema"}}, "json_schema"),
        ({"tool_choice": "sometimes"}, "tool_choice"),
        ({"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "nope"),
        ({"tool_choice": "required"}, "required needs tools"),
        ({"parallel_tool_calls": "yes"}, "parallel_tool_calls"),
    ],
)
def test_bad_option_values_are_refused_with_what_is_wrong(body: dict, says: str) -> None:
    with pytest.raises(ValidationFailedError, match=says):
        turn_options(body, [])


def test_a_schema_over_the_tools_cap_is_413() -> None:
    big = {"type": "object", "description": "x" * 70_000}
    fmt = {"type": "json_schema", "json_schema": {"name": "Big", "schema": big}}
    with pytest.raises(PayloadTooLargeError):
        turn_options({"response_format": fmt}, None)


def test_image_parts_are_refused_naming_the_model_never_dropped() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    messages = [{"role": "user", "content": [{"type": "text", "text": "what is it?"}, image]}]
    with pytest.raises(InvalidRequestError) as caught:
        check_content_parts(messages, "openai:gpt-test")
    assert caught.value.status == 400
    assert "image_url" in caught.value.message and "openai:gpt-test" in caught.value.message
    check_content_parts([{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "m")


def test_a_resume_keeps_the_turns_options_and_the_record_names_the_format() -> None:
    model = ScriptedModel(tool_call("lookup_order", '{"order_id": 4}'), '{"city": "Oslo"}')
    rt = make_runtime(settings=Settings(auth_mode="dev"), agent=model)
    url = "/v1/sessions/s1/messages"
    fmt = {"type": "json_object"}
    body = {"message": "order 4?", "tools": [ORDER_TOOL], "response_format": fmt, "seed": 5}

    status, paused, _ = call(rt, "POST", url, body)
    assert status == 200 and paused["status"] == "requires_action", paused
    result = {"tool_call_id": "call_1", "content": "shipped"}
    status, done, _ = call(rt, "POST", url, {"tool_results": [result]})

    assert status == 200 and json.loads(done["reply"]) == {"city": "Oslo"}, done
    assert [r.seed for r in model.requests] == [5, 5]
    assert model.requests[1].response_format == ResponseFormat(type="json_object")
    record = json.loads(rt.store.text(rt_user(), "sessions/s1/turns/00000001.json"))
    assert record["response_format"] == "json_object"


def test_a_cancelled_turn_closes_in_words_whatever_format_it_was_asked() -> None:
    model = ScriptedModel(tool_call("lookup_order", '{"order_id": 4}'), "Stopped, as asked.")
    rt = make_runtime(settings=Settings(auth_mode="dev"), agent=model)
    url = "/v1/sessions/s1/messages"
    fmt = {"type": "json_object"}
    call(rt, "POST", url, {"message": "order 4?", "tools": [ORDER_TOOL], "response_format": fmt})

    status, closed, _ = call(rt, "POST", url, {"cancel": True})

    assert status == 200 and closed["reply"] == "Stopped, as asked.", closed
    assert model.requests[-1].response_format is None
