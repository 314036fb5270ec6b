"""memory_search sees the current truth: a superseded, retracted or expired fact (and a
MEMORY.md line restating one) is left out; include_superseded shows it labelled;
as_of answers what was current on a day; every ledger hit carries its fact id."""

from __future__ import annotations

import json

from agent_harness.agent.tools import MemoryTools
from agent_harness.api.routes import build_app
from agent_harness.ids import User
from agent_harness.memory.facts.lifecycle import ledger_fact_id
from agent_harness.models.base import ToolCall
from agent_harness.settings import Settings
from local_stack.lambdas import context_for, http_event
from tests.fakes import make_runtime

ALICE = User.from_id("alice")
LISBON = "The user lives in Lisbon."
BERLIN = "The user moved to Berlin."
L = ledger_fact_id("2026-11-02", LISBON)
B = ledger_fact_id("2026-11-20", BERLIN)


def memory(*, memory_md: str = f"- [user] {LISBON}\n- [user] Likes green tea.\n"):
    rt = make_runtime(settings=Settings(auth_mode="dev"))
    rt.store.put(
        ALICE,
        "memory/2026-11-02.md",
        f"\n## Flush — 2026-11-02T09:00:00Z\n> source: session=s1 turns=1\n- [user] {LISBON}\n"
        "- [user] The user commutes by tram through Lisbon.\n"
        "- [user] The user is in Tokyo for a week. (until 2026-11-09)\n",
    )
    rt.store.put(
        ALICE,
        "memory/2026-11-20.md",
        "\n## Flush — 2026-11-20T10:00:00Z\n> source: session=s2 turns=4\n"
        f"- [user] {BERLIN} (supersedes {L})\n",
    )
    rt.store.put(ALICE, "MEMORY.md", memory_md)
    return rt


def search(rt, body: dict) -> tuple[int, dict]:
    event = http_event(
        "POST",
        "/v1/memory/search",
        headers={"x-user-id": "alice", "content-type": "application/json"},
        body=json.dumps(body).encode(),
    )
    response = build_app(rt).resolve(event, context_for("AgentCallFunction"))
    return response["statusCode"], json.loads(response["body"])


def texts(answer: dict) -> list[str]:
    return [h["text"] for h in answer["hits"]]


def test_a_superseded_fact_and_the_memory_line_restating_it_are_left_out() -> None:
    status, answer = search(memory(), {"query": "user lives moved", "match_mode": "any"})

    assert status == 200
    assert f"- [user] {LISBON}" not in texts(answer)
    assert f"- [user] {BERLIN} (supersedes {L})" in texts(answer)
    berlin = next(h for h in answer["hits"] if h["text"].startswith(f"- [user] {BERLIN}"))
    assert (berlin["fact_id"], berlin["state"]) == (B, "current")


def test_include_superseded_shows_them_labelled_with_when_and_by_what() -> None:
    status, answer = search(
        memory(), {"query": "Lisbon", "match_mode": "any", "include_superseded": True}
    )

    assert status == 200
    old = [h for h in answer["hits"] if h["text"] == f"- [user] {LISBON}"]
    assert {h["path"] for h in old} == {"MEMORY.md", "memory/2026-11-02.md"}
    assert all((h["fact_id"], h["state"], h["by"]) == (L, "superseded", B) for h in old)
    assert all(h["at"] == "2026-11-20T10:00:00Z" for h in old)


def test_as_of_answers_what_was_current_that_day() -> None:
    rt = memory()
    _, before = search(rt, {"query": "user", "match_mode": "any", "as_of": "2026-11-05"})
    _, after = search(rt, {"query": "user", "match_mode": "any", "as_of": "2026-11-25"})

    assert f"- [user] {LISBON}" in texts(before) and not any(BERLIN in t for t in texts(before))
    assert any("Tokyo" in t for t in texts(before))  # its until had not passed
    assert not any("Tokyo" in t for t in texts(after))  # expired on 2026-11-09
    assert all(h["path"] != "MEMORY.md" for h in before["hits"])  # MEMORY.md has no days
    assert f"- [user] {LISBON}" not in texts(after)


def test_a_fact_that_depended_on_a_retired_one_is_labelled_possibly_outdated() -> None:
    _, answer = search(memory(), {"query": "tram", "match_mode": "any"})

    (tram,) = answer["hits"]
    assert tram["state"] == "current" and tram["recheck"] == [L]


def test_the_agents_tool_names_fact_ids_and_says_what_is_outdated() -> None:
    tools = MemoryTools(memory(), ALICE).registry()

    found = tools.call(ToolCall(id="c1", name="memory_search", arguments='{"query": "tram"}'))
    old = tools.call(
        ToolCall(
            id="c2",
            name="memory_search",
            arguments=json.dumps(
                {"query": "Lisbon", "matchMode": "any", "includeSuperseded": True}
            ),
        )
    )

    tram = ledger_fact_id("2026-11-02", "The user commutes by tram through Lisbon.")
    assert f"(fact {tram}; possibly outdated: {L} changed)" in found
    assert f"(fact {L}: superseded 2026-11-20T10:00:00Z by {B}; no longer current)" in old


def test_a_bad_as_of_is_a_422_and_a_fact_said_again_after_it_was_retired_is_current() -> None:
    for bad in ("2026-13-01", "yesterday", "2026-02-30"):
        status, answer = search(memory(), {"query": "x", "as_of": bad})
        assert status == 422, answer
    rt = memory()
    rt.store.put(
        ALICE,
        "memory/2026-11-28.md",
        f"\n## Flush — 2026-11-28T10:00:00Z\n> source: session=s3 turns=1\n- [user] {LISBON}\n",
    )
    _, answer = search(rt, {"query": "Lisbon", "match_mode": "any"})
    assert f"- [user] {LISBON}" in texts(answer)  # back in Lisbon: MEMORY.md's line is true
    assert {h["path"] for h in answer["hits"] if h["text"] == f"- [user] {LISBON}"} == {
        "MEMORY.md",
        "memory/2026-11-28.md",
    }


def test_the_injection_keeps_a_persons_own_line_unless_the_user_or_an_operator_retired_it() -> None:
    from agent_harness.memory.engine.file_index import FileIndex
    from agent_harness.memory.engine.truth import truth_of

    lisbon = ledger_fact_id("2026-11-02", LISBON)
    ledgers = {
        "memory/2026-11-02.md": f"\n## Flush — 2026-11-02T09:00:00Z\n- [assistant] {LISBON}\n",
        "memory/2026-11-20.md": "\n## Memory Save — 2026-11-20T10:00:00Z\n"
        f"- [save:agent] {BERLIN} (supersedes {lisbon})\n",
    }
    files = [(p, FileIndex.build(t)) for p, t in ledgers.items()]
    truth = truth_of(files, "2026-11-30")
    memory_md = f"- [operator] {LISBON}\n- [assistant] {LISBON}\n- [user] Likes tea.\n"

    assert truth.current_memory(memory_md) == f"- [operator] {LISBON}\n- [user] Likes tea.\n"
    by_user = {
        **ledgers,
        "memory/2026-11-20.md": "\n## Flush — 2026-11-20T10:00:00Z\n"
        f"- [user] {BERLIN} (supersedes {lisbon})\n",
    }
    truth = truth_of([(p, FileIndex.build(t)) for p, t in by_user.items()], "2026-11-30")
    assert truth.current_memory(memory_md) == "- [user] Likes tea.\n"
