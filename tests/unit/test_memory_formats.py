"""The memory answers' formats (memory.jobs.formats): a real provider is asked for JSON
against a schema whose marks may name only the ids the call was shown; the answer is
read back into the text format and checked as any answer is; a model that ignores the
schema is read as text; the offline stand-in keeps the text format."""

from __future__ import annotations

import json

import pytest

from agent_harness.errors import ModelOutputError
from agent_harness.ids import User
from agent_harness.jobs import ConsolidationJob
from agent_harness.memory.facts.lifecycle import ledger_fact_id, lifecycle_of
from agent_harness.memory.jobs.consolidate import consolidate
from agent_harness.memory.jobs.formats import (
    consolidation_format,
    flush_format,
    flush_text,
    memory_text,
    structured,
)
from agent_harness.settings import Settings
from tests.fakes import ScriptedModel, make_runtime
from tests.unit.test_flush_lifecycle import DAY, EARLIER, add_turn, flush, ledgers, seed

ALICE = User.from_id("alice")
LISBON = "The user lives in Lisbon."
LISBON_ID = ledger_fact_id(EARLIER, LISBON)
REAL = Settings(memory_model="openai:qwen2.5-coder", openai_api_key="k")


def test_a_real_provider_is_asked_for_json_and_the_offline_stand_in_for_text() -> None:
    assert structured(make_runtime(settings=REAL))
    assert not structured(make_runtime())
    text = Settings(memory_model="openai:x", openai_api_key="k", memory_answer_format="text")
    assert not structured(make_runtime(settings=text))
    assert structured(make_runtime(settings=Settings(memory_answer_format="json_schema")))


def test_the_flush_schema_allows_only_the_shown_ids_as_marks() -> None:
    schema = flush_format(["2026-11-02.aaaaaaaa"]).json_schema or {}
    fact = schema["properties"]["facts"]["items"]["properties"]
    assert fact["supersedes"]["items"]["enum"] == ["2026-11-02.aaaaaaaa"]
    assert schema["properties"]["retracts"]["items"]["properties"]["id"]["enum"]
    unmarked = flush_format([]).json_schema or {}
    assert "supersedes" not in unmarked["properties"]["facts"]["items"]["properties"]
    assert "retracts" not in unmarked["properties"]


def test_a_json_flush_answer_reads_as_bullets_with_their_marks() -> None:
    answer = {
        "facts": [
            {"text": "The user moved to Berlin.", "supersedes": [LISBON_ID]},
            {"text": "The user is in Tokyo.", "until": "2026-12-05"},
        ],
        "retracts": [{"id": LISBON_ID, "why": "moved"}],
    }
    assert flush_text(json.dumps(answer)) == (
        f"- The user moved to Berlin. (supersedes {LISBON_ID})\n"
        "- The user is in Tokyo. (until 2026-12-05)\n"
        f"- (retracts {LISBON_ID}) moved"
    )
    assert flush_text('{"facts": []}') == "NO_REPLY"
    assert flush_text("- a bullet, the schema ignored") == "- a bullet, the schema ignored"


@pytest.mark.parametrize("bad", ['{"facts": [', '{"facts": "x"}', '{"facts": [{"t": 1}]}'])
def test_json_of_the_wrong_shape_is_refused(bad: str) -> None:
    with pytest.raises(ModelOutputError):
        flush_text(bad)


def test_a_json_consolidation_answer_reads_as_markdown() -> None:
    answer = {
        "title": "Memory",
        "sections": [
            {"heading": "Home", "facts": ["[user] The user lives in Berlin."]},
            {"heading": "Food", "facts": ["- [user] The user likes jazz."]},
        ],
    }
    assert memory_text(json.dumps(answer)) == (
        "# Memory\n\n## Home\n- [user] The user lives in Berlin.\n\n"
        "## Food\n- [user] The user likes jazz.\n"
    )
    assert consolidation_format().json_schema is not None
    with pytest.raises(ModelOutputError):
        memory_text('{"memory": "x"}')


def test_a_flush_on_a_real_provider_sends_the_schema_and_applies_its_marks() -> None:
    answer = {"facts": [{"text": "The user moved to Berlin.", "supersedes": [LISBON_ID]}]}
    memory = ScriptedModel(json.dumps(answer))
    rt = make_runtime(settings=REAL, memory=memory)
    seed(rt, f"- [user] {LISBON}")
    add_turn(rt, 1, "I moved to Berlin.")
    flush(rt, 1)

    request = memory.requests[0]
    assert request.response_format is not None
    enum = request.response_format.json_schema["properties"]["facts"]["items"]["properties"]
    assert enum["supersedes"]["items"]["enum"] == [LISBON_ID]
    assert '{"facts"' in request.messages[0].content  # the prompt says so too
    assert lifecycle_of(ledgers(rt)).status[LISBON_ID].state == "superseded"
    assert f"- [user] The user moved to Berlin. (supersedes {LISBON_ID})" in ledgers(rt)[DAY]


def test_a_consolidation_on_a_real_provider_sends_the_schema() -> None:
    answer = {"sections": [{"heading": "", "facts": ["[user] The user likes jazz."]}]}
    memory = ScriptedModel(json.dumps(answer))
    rt = make_runtime(settings=REAL, memory=memory)
    rt.store.put(ALICE, f"memory/{DAY}.md", "\n## Flush — t\n- [user] The user likes jazz.\n")
    job = ConsolidationJob(user_id="alice", force=True, requested_at=f"{DAY}T10:00:00Z")
    assert consolidate(rt, job).status == "consolidated"
    assert memory.requests[0].response_format is not None
    assert rt.store.text(ALICE, "MEMORY.md") == "# Memory\n- [user] The user likes jazz.\n"
