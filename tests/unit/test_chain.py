"""The write -> retrieve -> inject -> act chain (memory.chain): each turn's record says
what memory reached its model and why, and a fact leads from where it was written to
every turn it reached."""

from __future__ import annotations

import json

from agent_harness.agent.turn import run_turn
from agent_harness.ids import User
from agent_harness.memory.chain import fact_reach, turn_memory
from agent_harness.memory.facts.authority import fact_id
from agent_harness.settings import Settings
from tests.fakes import ScriptedModel, make_runtime, tool_call
from tests.unit.test_routes import call

ALICE = User.from_id("alice")
LEDGER = (
    "\n## Flush — 2026-03-02T10:00:00Z\n> source: session=old turns=4 model=offline\n"
    "- [user] Alice's sister Maria lives in Porto and visits every August\n"
    "- [tool:weather] A tool result (weather) said: Porto is rainy in November\n"
    "- [user] Alice is allergic to shellfish\n"
)


def runtime(*replies: object, **settings: object):
    model = ScriptedModel(*(replies or ["ok"] * 4))
    rt = make_runtime(agent=model, settings=Settings(auth_mode="dev", **settings))
    rt.store.put(ALICE, "memory/2026-03-02.md", LEDGER, create_only=True)
    rt.store.put(ALICE, "MEMORY.md", "# Memory\n- [operator] Alice's manager is Dana.\n")
    return rt, model


def test_a_turns_record_names_each_recalled_line_with_its_id_authority_score_and_day() -> None:
    rt, _ = runtime()
    run_turn(rt, ALICE, "s1", "Where does my sister Maria live, and is Porto rainy?")

    record = turn_memory(rt, ALICE, "s1", 1)
    memory_md = record["memory_md"]
    assert memory_md["injected"] and memory_md["etag"] == rt.store.get(ALICE, "MEMORY.md").etag
    lines = {line["source"]: line for line in record["recall"]["lines"]}
    maria = lines["memory/2026-03-02.md#4"]
    assert maria["authority"] == "user" and maria["day"] == "2026-03-02"
    assert maria["fact_id"] == fact_id(
        "Alice's sister Maria lives in Porto and visits every August"
    )
    assert maria["score"] > 0
    assert lines["memory/2026-03-02.md#5"]["authority"] == "tool:weather"
    assert record["recall"]["cut"]["floor"] >= 1  # the shellfish line is under the floor
    assert record["total_tokens"] == memory_md["tokens"] + record["recall"]["tokens"]


def test_what_the_budget_cut_is_recorded() -> None:
    rt, _ = runtime(recall_max_tokens=150)
    run_turn(rt, ALICE, "s1", "Where does my sister Maria live, and is Porto rainy?")
    record = turn_memory(rt, ALICE, "s1", 1)
    assert len(record["recall"]["lines"]) == 1
    assert len(record["recall"]["cut"]["budget"]) == 1


def test_the_memory_tools_a_turn_ran_are_in_its_record_with_their_results() -> None:
    search = tool_call("memory_search", json.dumps({"query": "shellfish"}))
    rt, _ = runtime(search, "You are allergic to shellfish.", recall_max_tokens=0)
    run_turn(rt, ALICE, "s1", "Any allergies?")
    [tool] = turn_memory(rt, ALICE, "s1", 1)["tools"]
    assert tool["name"] == "memory_search" and json.loads(tool["arguments"]) == {
        "query": "shellfish"
    }
    assert "[user] Alice is allergic to shellfish" in tool["result"]


def test_the_record_route_answers_the_turn_and_404s_a_missing_one() -> None:
    rt, _ = runtime()
    run_turn(rt, ALICE, "s1", "Where does my sister Maria live?")
    status, body, _ = call(rt, "GET", "/v1/sessions/s1/turns/1/memory")
    assert status == 200 and body["recall"]["lines"][0]["authority"] == "user"
    assert call(rt, "GET", "/v1/sessions/s1/turns/2/memory")[0] == 404
    assert call(rt, "GET", "/v1/sessions/s1/turns/0/memory")[0] == 422
    assert call(rt, "GET", "/v1/sessions/s1/turns/1/memory", user="bob")[0] == 404


def test_a_fact_leads_from_where_it_was_written_to_every_turn_it_reached() -> None:
    search = tool_call("memory_search", json.dumps({"query": "shellfish"}))
    rt, _ = runtime("ok", search, "noted", "ok")
    run_turn(rt, ALICE, "s1", "Where does my sister Maria live?")  # recalled
    run_turn(rt, ALICE, "s2", "Any allergies?")  # found by memory_search

    maria = fact_reach(rt, ALICE, "Alice's sister Maria lives in Porto and visits every August")
    assert [w["path"] for w in maria.written] == ["memory/2026-03-02.md"]
    assert maria.written[0]["source"] == "session=old turns=4 model=offline"
    assert {"session_id": "s1", "turn": 1, "how": "recalled"} in maria.reached

    shellfish = fact_reach(rt, ALICE, fact_id("Alice is allergic to shellfish"))
    assert {"session_id": "s2", "turn": 1, "how": "memory_search"} in shellfish.reached

    dana = fact_reach(rt, ALICE, "Alice's manager is Dana.")
    assert [w["path"] for w in dana.written] == ["MEMORY.md"]
    assert {r["session_id"] for r in dana.reached if r["how"] == "memory_md"} == {"s1", "s2"}
