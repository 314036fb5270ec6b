"""The operator CLI over the library, on the in-memory fakes."""

from __future__ import annotations

import json

import pytest

from agent_harness.agent.turn import run_turn
from agent_harness.cli import main, stack_environment
from agent_harness.ids import User
from agent_harness.jobs import PostTurnJob
from agent_harness.memory.jobs.flush import run_post_turn_job
from agent_harness.memory.owner import Memory
from tests.fakes import make_runtime

ALICE, BOB = User.from_id("alice"), User.from_id("bob")


def remembered(rt, user: User, text: str) -> None:
    result = run_turn(rt, user, "s1", text)
    job = PostTurnJob(
        user_id=user.id, session_id="s1", turn=result.turn, queued_at="2026-11-30T09:00:00Z"
    )
    run_post_turn_job(rt, job)


def cli(rt, capsys, *argv: str) -> tuple[int, str]:
    status = main(list(argv), runtime=rt)
    return status, capsys.readouterr().out


def test_show_search_consolidate_and_trace_a_users_memory(capsys) -> None:
    rt = make_runtime()
    remembered(rt, ALICE, "Remember that I prefer window seats on long flights.")
    remembered(rt, BOB, "Remember that I prefer aisle seats.")

    status, out = cli(rt, capsys, "consolidate-now", "alice")
    assert status == 0 and json.loads(out)["status"] == "consolidated"

    status, out = cli(rt, capsys, "show", "alice")
    assert status == 0 and "window seats" in out and "aisle" not in out

    status, out = cli(rt, capsys, "search", "alice", "window seats", "--mode", "phrase")
    hits = json.loads(out)
    assert {h["path"] for h in hits} == {"MEMORY.md", "memory/2026-11-30.md"}

    status, out = cli(rt, capsys, "trace", "alice", "- User said: I prefer window seats")
    origin = json.loads(out)[0]
    assert origin["path"] == "memory/2026-11-30.md" and origin["section"] == "Flush"
    assert origin["source"] == "session=s1 turns=1 model=offline"

    status, out = cli(rt, capsys, "show", "alice", "--days")
    assert [d["day"] for d in json.loads(out)] == ["2026-11-30"]


def test_reindex_rebuilds_a_users_ranked_snapshots_only(capsys) -> None:
    rt = make_runtime()
    remembered(rt, ALICE, "Remember that I prefer window seats on long flights.")
    remembered(rt, BOB, "Remember that I prefer aisle seats.")
    snapshot = "index/ranked/memory-2026-11.json"
    before = rt.store.text(ALICE, snapshot)
    assert before is not None  # the post-turn job wrote it
    rt.store.put(ALICE, snapshot, "damaged")
    bob_before = rt.store.text(BOB, snapshot)

    status, out = cli(rt, capsys, "reindex", "alice")

    assert status == 0 and json.loads(out) == {"snapshots_written": 1}
    assert rt.store.text(ALICE, snapshot) == before
    assert rt.store.text(BOB, snapshot) == bob_before
    status, out = cli(rt, capsys, "reindex", "alice")
    assert json.loads(out) == {"snapshots_written": 0}  # up to date: nothing rewritten


def test_rollback_restores_a_listed_version(capsys) -> None:
    rt = make_runtime()
    rt.store.put(ALICE, "MEMORY.md", "# v1\n- first\n", create_only=True)
    current = rt.store.get(ALICE, "MEMORY.md")
    rt.store.put(ALICE, "MEMORY.md", "# v2\n- second\n", if_match=current.etag)
    _, out = cli(rt, capsys, "show", "alice", "--versions")
    oldest = json.loads(out)[-1]["version_id"]

    status, _ = cli(rt, capsys, "rollback", "alice", oldest)

    assert status == 0 and rt.store.text(ALICE, "MEMORY.md") == "# v1\n- first\n"


def test_forget_needs_confirmation_and_then_removes_only_that_user(capsys) -> None:
    rt = make_runtime()
    for user, fact in ((ALICE, "likes tea"), (BOB, "likes coffee")):
        Memory(rt, user).save(
            [fact], authority="save:api", provenance="> source: test", at=rt.clock.now()
        )

    status, out = cli(rt, capsys, "forget", "alice")
    assert status == 2 and "--yes" in out and rt.store.text(ALICE, "MEMORY.md")

    status, out = cli(rt, capsys, "forget", "alice", "--yes")
    assert status == 0 and json.loads(out)["object_versions"] >= 2
    assert json.loads(out)["scopes"] == {
        "scopes": 0,
        "anonymised": 0,
        "versions": 0,
        "proposals": 0,
    }
    assert rt.store.text(ALICE, "MEMORY.md") is None
    assert rt.store.text(BOB, "MEMORY.md") == "- [save:api] likes coffee\n"


def test_a_failing_command_exits_1_with_the_error(capsys) -> None:
    status = main(["rollback", "alice", "no-such-version"], runtime=make_runtime())
    assert status == 1 and "no version" in capsys.readouterr().err


def test_an_env_file_per_function_locates_the_local_stack(tmp_path) -> None:
    env_file = tmp_path / "env.json"
    env_file.write_text(
        json.dumps(
            {
                "AgentCallFunction": {
                    "HARNESS_BUCKET": "b",
                    "AWS_ENDPOINT_URL": "http://127.0.0.1:5001",
                },
                "MemoryConsolidateFunction": {"HARNESS_TABLE": "t", "HARNESS_MODEL": ""},
            }
        )
    )
    env = stack_environment(str(env_file), None)
    assert (env["HARNESS_BUCKET"], env["HARNESS_TABLE"]) == ("b", "t")
    assert env["AWS_ACCESS_KEY_ID"]  # moto needs some credentials


def test_bad_usage_exits_2() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["show"])
    assert exc.value.code == 2


def test_users_lists_users_by_prefix_with_what_is_not_merged_yet(capsys) -> None:
    rt = make_runtime()
    remembered(rt, ALICE, "Remember that I prefer window seats on long flights.")
    remembered(rt, BOB, "Remember that I prefer aisle seats.")
    cli(rt, capsys, "consolidate-now", "alice")

    status, out = cli(rt, capsys, "users", "al")
    (alice,) = json.loads(out)
    assert status == 0 and alice["user"] == "alice" and alice["sessions"] == 1
    assert alice["memory_bytes"] > 0 and alice["unmerged_bytes"] == 0
    status, out = cli(rt, capsys, "users")
    bob = json.loads(out)[1]
    assert bob["user"] == "bob" and bob["memory_bytes"] == 0
    assert bob["unmerged_bytes"] == bob["ledger_bytes"] > 0


def test_usage_and_top_show_spend_by_user_role_and_day(capsys) -> None:
    rt = make_runtime()
    remembered(rt, ALICE, "Remember that I prefer window seats on long flights.")
    remembered(rt, BOB, "Remember that I prefer aisle seats.")

    status, out = cli(rt, capsys, "usage", "alice", "--days", "3")
    report = json.loads(out)
    assert status == 0 and len(report["days"]) == 3 and report["totals"]["turns"] == 1
    assert report["totals"]["by_role"]["memory"]["model_calls"] == 1  # the flush
    status, out = cli(rt, capsys, "top", "--limit", "5")
    assert status == 0 and {r["user"] for r in json.loads(out)["users"]} == {"alice", "bob"}
    status, _ = cli(rt, capsys, "top", "--day", "not-a-day")
    assert status == 1


def test_budget_shows_sets_and_clears_a_users_override(capsys) -> None:
    from agent_harness.settings import Settings
    from agent_harness.usage import DEFAULT_MEMORY_TOKENS

    rt = make_runtime(settings=Settings(user_daily_turns=5))
    status, out = cli(rt, capsys, "budget", "alice", "--turns", "2")
    view = json.loads(out)
    assert status == 0 and view["override"]["turns"] == 2 and view["effective"]["turns"] == 2
    status, out = cli(rt, capsys, "budget", "alice", "--tokens", "900")
    effective = {"tokens": 900, "turns": 2, "memory_tokens": DEFAULT_MEMORY_TOKENS}
    assert json.loads(out)["effective"] == effective
    status, out = cli(rt, capsys, "budget", "alice", "--clear")
    assert json.loads(out)["override"] is None and json.loads(out)["effective"]["turns"] == 5
    status, _ = cli(rt, capsys, "budget", "alice", "--turns", "-1")
    assert status == 1


def test_budget_says_when_the_stack_has_no_budget_to_override(capsys) -> None:
    rt = make_runtime()
    status = main(["budget", "alice", "--turns", "2"], runtime=rt)
    assert status == 0 and "overrides do not apply" in capsys.readouterr().err


def test_scope_members_are_granted_listed_and_revoked(capsys) -> None:
    rt = make_runtime()
    status, out = cli(rt, capsys, "grant", "project:apollo", "alice", "maintainer")
    assert status == 0 and json.loads(out)["role"] == "maintainer"
    cli(rt, capsys, "grant", "project:apollo", "bob", "member")
    status, out = cli(rt, capsys, "members", "project:apollo")
    assert [(m["user_id"], m["role"]) for m in json.loads(out)["members"]] == [
        ("alice", "maintainer"),
        ("bob", "member"),
    ]
    status, out = cli(rt, capsys, "scopes")
    assert json.loads(out)["scopes"][0]["members"] == 2
    status, out = cli(rt, capsys, "revoke", "project:apollo", "bob")
    assert status == 0 and json.loads(out)["removed"] is True
    status, _ = cli(rt, capsys, "revoke", "project:apollo", "bob")  # not a member any more
    assert status == 1
    status, _ = cli(rt, capsys, "grant", "user", "bob", "member")  # the user scope has none
    assert status == 1 and rt.table.get_member("user", User.from_id("bob")) is None


def test_vectors_backfills_what_a_model_change_left_without_vectors_with_progress(
    capsys,
) -> None:
    from agent_harness.embeddings.embedder import Embedder
    from agent_harness.embeddings.stand_in import StandInEmbeddingModel
    from agent_harness.memory.engine.vectors import decode, vector_path

    rt = make_runtime()
    remembered(rt, ALICE, "Remember that I prefer window seats on long flights.")
    status, _ = cli(rt, capsys, "vectors", "alice")
    assert status == 2  # no embedding model: said, nothing written

    model = StandInEmbeddingModel()
    rt.embedder, rt.embeddings_built = Embedder(model), True
    status = main(["vectors", "alice"], runtime=rt)
    captured = capsys.readouterr()
    done = json.loads(captured.out)
    assert status == 0 and done["memory"]["embedded"] >= 1 and done["memory"]["missing"] == 0
    assert done["threads"]["embedded"] >= 2 and done["threads"]["missing"] == 0
    assert "memory: " in captured.err and "threads: " in captured.err
    stored = decode(rt.store.text(ALICE, vector_path(model.name)) or "", model.name)
    assert stored is not None and len(stored.keys) == done["memory"]["lines"]
    # run again: nothing left to embed
    assert main(["vectors", "alice"], runtime=rt) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["memory"]["embedded"] == 0 and again["threads"]["embedded"] == 0
