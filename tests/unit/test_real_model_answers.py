"""What a real small model answered the memory jobs (Qwen2.5-Coder-1.5B-Instruct, Q4,
served by llama.cpp; the strings below are its answers' shapes, replayed by a scripted
model): malformed marks, ids copied into facts, restated old facts, echoed prompt
blocks. Each is cleaned, corrected or refused, and no authority is demoted by a mark."""

from __future__ import annotations

from agent_harness import markup
from agent_harness.ids import User
from agent_harness.jobs import ConsolidationJob
from agent_harness.memory.facts.lifecycle import ledger_fact_id, lifecycle_of
from agent_harness.memory.jobs.consolidate import consolidate
from agent_harness.settings import Settings
from tests.fakes import ScriptedModel, make_runtime
from tests.unit.test_flush_lifecycle import DAY, EARLIER, add_turn, flush, ledgers, seed

ALICE = User.from_id("alice")
LISBON = "The user lives in Lisbon."
LISBON_ID = ledger_fact_id(EARLIER, LISBON)


def today(rt: object) -> str:
    return ledgers(rt).get(DAY, "")  # type: ignore[arg-type]


def test_a_mark_naming_a_turn_number_is_taken_out_of_the_fact() -> None:
    memory = ScriptedModel("- [user] The user takes the U2 to work. (depends 4)")
    rt = make_runtime(memory=memory)
    add_turn(rt, 1, "I take the U2 to work.")
    flush(rt, 1)
    assert "- [user] The user takes the U2 to work.\n" in today(rt)
    assert "depends" not in today(rt) and "(" not in today(rt).split("model=")[-1]


def test_a_bracketed_id_still_supersedes_and_keeps_the_users_authority() -> None:
    memory = ScriptedModel(f"- [user] The user moved to Berlin. (supersedes [{LISBON_ID}])")
    rt = make_runtime(memory=memory)
    seed(rt, f"- [user] {LISBON}")
    add_turn(rt, 1, "I moved to Berlin.")
    flush(rt, 1)

    assert f"- [user] The user moved to Berlin. (supersedes {LISBON_ID})" in today(rt)
    life = lifecycle_of(ledgers(rt))
    assert life.status[LISBON_ID].state == "superseded"


def test_an_id_copied_in_front_of_a_fact_is_not_part_of_it() -> None:
    memory = ScriptedModel("- [2026-12-01.74768b91] The user has a dog named Rex.")
    rt = make_runtime(memory=memory)
    add_turn(rt, 1, "My dog is called Rex.")
    flush(rt, 1)
    assert "- [user] The user has a dog named Rex.\n" in today(rt)
    assert "74768b91" not in today(rt)


def test_a_restated_old_fact_is_not_written_again_with_a_new_day() -> None:
    memory = ScriptedModel(f"- [user] {LISBON}\n- [user] The user started learning German.")
    rt = make_runtime(memory=memory)
    seed(rt, f"- [user] {LISBON}")
    add_turn(rt, 1, "I live in Lisbon and I started learning German.")
    flush(rt, 1)

    assert "Lisbon" not in today(rt)  # one fact, one id: the earlier day's
    assert "- [user] The user started learning German." in today(rt)
    shown = markup.extract(memory.requests[0].messages[1].content, markup.CURRENT_FACTS) or ""
    assert LISBON_ID in shown


def test_a_restatement_in_other_case_and_stop_is_the_same_fact() -> None:
    memory = ScriptedModel("- the user LIVES in lisbon")
    rt = make_runtime(memory=memory)
    seed(rt, f"- [user] {LISBON}")
    add_turn(rt, 1, "Still in Lisbon.")
    flush(rt, 1)
    assert "isbon" not in today(rt)


def test_the_user_saying_what_an_import_held_makes_it_the_users() -> None:
    memory = ScriptedModel(f"- [user] {LISBON}", "NO_REPLY")  # then: retired below? no
    rt = make_runtime(memory=memory)
    seed(rt, f"- [import] {LISBON}")
    add_turn(rt, 1, "I live in Lisbon.")
    flush(rt, 1)
    assert f"- [user] {LISBON}" in today(rt)


def test_memory_calls_are_deterministic_and_bounded() -> None:
    memory = ScriptedModel(
        "- [user] The user likes jazz.", "# Memory\n- [user] The user likes jazz."
    )
    rt = make_runtime(memory=memory)
    add_turn(rt, 1, "I like jazz.")
    flush(rt, 1)
    consolidate(rt, ConsolidationJob(user_id="alice", force=True, requested_at=f"{DAY}T10:00:00Z"))
    for request in memory.requests:
        assert request.temperature == 0.0 and request.seed == 7
        assert request.max_output_tokens is not None and request.max_output_tokens > 0


# --- the consolidation's answers ---

ECHOED = """<current_memory>
# Memory
- [user] The user lives in Lisbon.
</current_memory>

## Flush — 2026-12-02T09:00:00Z
> source: session=s1 turns=1-3 model=llama
- [user] The user likes jazz.
- [user] The user likes jazz.
"""


def consolidation_run(*answers: str) -> tuple[object, ScriptedModel, str]:
    memory = ScriptedModel(*answers)
    rt = make_runtime(memory=memory)
    rt.store.put(ALICE, "MEMORY.md", f"# Memory\n- [user] {LISBON}\n", create_only=True)
    rt.store.put(
        ALICE,
        f"memory/{DAY}.md",
        "\n## Flush — t\n> source: session=s1 turns=1 model=x\n- [user] The user likes jazz.\n",
    )
    outcome = consolidate(
        rt, ConsolidationJob(user_id="alice", force=True, requested_at=f"{DAY}T10:00:00Z")
    )
    return outcome, memory, rt.store.text(ALICE, "MEMORY.md") or ""


def test_an_answer_echoing_the_prompts_blocks_is_unwrapped_without_a_second_call() -> None:
    outcome, memory, document = consolidation_run(ECHOED)
    assert outcome.status == "consolidated"  # type: ignore[attr-defined]
    assert len(memory.requests) == 1
    assert (
        document
        == "# Memory\n- [user] The user lives in Lisbon.\n\n- [user] The user likes jazz.\n"
    )


def test_a_line_carrying_an_invented_id_is_written_without_it() -> None:
    answer = (
        "# Memory\n- [user] The user lives in Lisbon.\n"
        "- [2026-12-02.74768b91] The user likes jazz.\n"
    )
    _, _, document = consolidation_run(answer)
    assert "74768b91" not in document
    assert "- [user] The user likes jazz." in document  # an exact copy of the user's line


def test_a_corrective_call_fixes_an_answer_that_is_only_an_echo() -> None:
    only_echo = f"<{markup.NEW_ENTRIES}>\n</{markup.NEW_ENTRIES}>"
    fixed = "# Memory\n- [user] The user lives in Lisbon.\n- [user] The user likes jazz.\n"
    outcome, memory, document = consolidation_run(only_echo, fixed)
    assert outcome.status == "consolidated"  # type: ignore[attr-defined]
    assert document == fixed
    correction = memory.requests[1].messages[-1].content
    assert "refused" in correction and "echoed" in correction


def test_a_consolidation_that_keeps_failing_shows_in_the_api() -> None:
    from tests.unit.test_routes import call

    echo = f"<{markup.CURRENT_MEMORY}>\n</{markup.CURRENT_MEMORY}>"
    rt = make_runtime(memory=ScriptedModel(echo, echo), settings=Settings(auth_mode="dev"))
    rt.store.put(ALICE, f"memory/{DAY}.md", "\n## Flush — t\n- [user] The user likes jazz.\n")
    status, body, _ = call(rt, "GET", "/v1/usage")
    assert status == 200 and body["consolidation"]["last_failure"] is None

    outcome = consolidate(rt, JOB)
    assert outcome.status == "failed"

    status, body, _ = call(rt, "GET", "/v1/usage")
    failure = body["consolidation"]["last_failure"]
    assert failure["failures"] == 1 and "echoed" in failure["error"]
    assert failure["retry_at"] > failure["at"] and body["consolidation"]["due"]
    status, body, _ = call(rt, "POST", "/v1/memory/consolidate")
    assert status == 202 and body["status"] == "queued"
    assert body["last_failure"] == failure  # not a bare 202


JOB = ConsolidationJob(user_id="alice", force=True, requested_at=f"{DAY}T10:00:00Z")


def test_a_text_two_days_repeated_is_shown_under_one_id() -> None:
    memory = ScriptedModel("NO_REPLY")
    rt = make_runtime(memory=memory)
    seed(rt, f"- [user] {LISBON}")  # written before this fix: once a day
    seed(rt, f"- [user] {LISBON}", day="2026-11-20")
    add_turn(rt, 1, "Lisbon is lovely in spring.")
    flush(rt, 1)
    shown = markup.extract(memory.requests[0].messages[1].content, markup.CURRENT_FACTS) or ""
    assert shown.count("Lisbon") == 1


def test_a_link_nobody_wrote_is_not_written_and_until_today_is_not_an_end() -> None:
    memory = ScriptedModel(
        "- [user] A guide to Prenzlauer Berg is at https://www.prenzlauerberg.de/en/\n"
        f"- [user] The user likes Berlin. (until {DAY})"
    )
    rt = make_runtime(memory=memory)
    add_turn(rt, 1, "Find me a guide to Prenzlauer Berg. I like Berlin.")
    flush(rt, 1)
    assert "prenzlauerberg.de" not in today(rt)  # invented: nothing given holds it
    assert "- [user] The user likes Berlin.\n" in today(rt)  # not expired on its own day


def test_an_until_the_conversation_never_bounded_is_not_an_end() -> None:
    # the real model, answering against the JSON schema, set every fact's until to a
    # day after the window's: each fact would have expired within days
    answer = (
        '{"facts": [{"text": "I work as a nurse at Santa Maria hospital.", "until": "2026-12-08"}]}'
    )
    rt = make_runtime(
        memory=ScriptedModel(answer), settings=Settings(memory_answer_format="json_schema")
    )
    add_turn(rt, 1, "I work as a nurse at Santa Maria hospital.")
    flush(rt, 1)
    assert "- [user] I work as a nurse at Santa Maria hospital.\n" in today(rt)


def test_an_until_the_user_said_is_kept() -> None:
    memory = ScriptedModel("- [user] I am in Tokyo for a conference. (until 2026-12-12)")
    rt = make_runtime(memory=memory)
    add_turn(rt, 1, "I am in Tokyo for a conference until next Saturday.")
    flush(rt, 1)
    assert "Tokyo for a conference. (until 2026-12-12)\n" in today(rt)


def test_an_answer_that_restates_a_fact_and_retires_it_keeps_the_fact() -> None:
    # answering the JSON schema, the real model restated the current facts it was shown
    # and filled retracts with every id it was offered: every fact of the user was gone
    answer = (
        '{"facts": [{"text": "The user lives in Lisbon.", "supersedes": ["'
        + LISBON_ID
        + '"]}], "retracts": [{"id": "'
        + LISBON_ID
        + '", "why": "restated"}]}'
    )
    rt = make_runtime(
        memory=ScriptedModel(answer), settings=Settings(memory_answer_format="json_schema")
    )
    seed(rt, f"- [user] {LISBON}")
    add_turn(rt, 1, "Lisbon is lovely in spring.")
    flush(rt, 1)
    assert lifecycle_of(ledgers(rt)).current(LISBON_ID)
    assert "retracts" not in today(rt)
