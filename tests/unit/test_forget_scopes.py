"""Forgetting a user takes them out of the shared scopes they wrote into: their pending
proposals are dropped, what a maintainer accepted stays as the scope's knowledge with
``by=(forgotten)``, and no version of any object of the scope names them any more
(provenance, a version's writer, a derived snapshot). Scopes they never wrote into are
not visited; other writers keep their names."""

from __future__ import annotations

import json
import re

from agent_harness.agent.turn import run_turn
from agent_harness.clock import iso
from agent_harness.ids import User
from agent_harness.memory.facts.lifecycle import ledger_fact_id
from agent_harness.memory.jobs.forget import ANONYMOUS
from agent_harness.memory.review import list_review
from agent_harness.scopes import set_member
from tests.fakes import tool_call
from tests.unit.test_promotion import ANN, APOLLO, BOB, CAROL, FACT, call, scoped_runtime
from tests.unit.test_session_scopes import bind

GEMINI = User.for_scope("project:gemini")
BOB_NAMED = re.compile(r"\bby[= ]bob(?![A-Za-z0-9_%-])")


def every_version(rt, owner: User) -> dict[str, list[tuple[str, str]]]:  # type: ignore[no-untyped-def]
    """Each path of ``owner``'s with every stored version's (content, writer)."""
    root = f"scopes/{owner.id.replace(':', '/')}/"
    return {
        key[len(root) :]: [(v.data.decode(), v.writer or "") for v in versions]
        for table in (rt.store.objects, rt.store.deleted)
        for key, versions in table.items()
        if key.startswith(root)
    }


def names_bob(rt, owner: User) -> list[str]:  # type: ignore[no-untyped-def]
    return [
        path
        for path, versions in every_version(rt, owner).items()
        for content, writer in versions
        if BOB_NAMED.search(content) or BOB_NAMED.search(writer)
    ]


def contributed_project():  # type: ignore[no-untyped-def]
    """Bob proposes from a session (approved) and over HTTP (left pending), saves and
    corrects as a maintainer; Carol and Ann write too; Gemini never sees Bob."""
    promote = tool_call("memory_promote", json.dumps({"scope": "project:apollo", "content": FACT}))
    rt, _ = scoped_runtime(promote, "Proposed it.")
    set_member(rt, "project:apollo", CAROL, "member")
    set_member(rt, "project:gemini", ANN, "maintainer")
    run_turn(rt, BOB, "s1", "Share the refund rule", binding=bind("project:apollo"))
    (from_session,) = list_review(rt, APOLLO)
    assert call(rt, "POST", f"/v1/memory/review/{from_session.id}", "ann",
                {"action": "approve", "scope": "project:apollo"})[0] == 200  # fmt: skip
    pending = {"scope": "project:apollo", "content": "- Bob's pending idea about pricing."}
    assert call(rt, "POST", "/v1/memory/promote", "bob", pending)[0] == 200
    carols = {"scope": "project:apollo", "content": "- Carol's proposal about onboarding."}
    assert call(rt, "POST", "/v1/memory/promote", "carol", carols)[0] == 200
    set_member(rt, "project:apollo", BOB, "maintainer")
    save = {"scope": "project:apollo", "content": "- Deploys freeze on Fridays."}
    assert call(rt, "POST", "/v1/memory/save", "bob", save)[0] == 200
    ann = {"scope": "project:apollo", "content": "- Standup is at 09:30."}
    assert call(rt, "POST", "/v1/memory/save", "ann", ann)[0] == 200
    early = {"scope": "project:apollo", "content": "- Lunch is at noon."}
    assert call(rt, "POST", "/v1/memory/save", "ann", early)[0] == 200
    # Bob, a maintainer now, corrects Ann's fact: the correction names him as its writer
    fact_id = ledger_fact_id("2026-11-30", "Lunch is at noon.")
    fix = {"by": "- Lunch is at 12:30.", "scope": "project:apollo"}
    fixed = call(rt, "POST", f"/v1/memory/facts/{fact_id}/supersede", "bob", fix)
    assert fixed[0] == 200, fixed
    search = {"query": "deploys freeze", "match_mode": "ranked", "scope": "project:apollo"}
    assert call(rt, "POST", "/v1/memory/search", "carol", search)[0] == 200
    gemini = {"scope": "project:gemini", "content": "- Gemini ships in March."}
    assert call(rt, "POST", "/v1/memory/save", "ann", gemini)[0] == 200
    # what the scope's jobs derive or move: a ranked snapshot, an archived ledger, and a
    # ledger deleted since (its versions are still stored)
    ledger = rt.store.text(APOLLO, "memory/2026-11-30.md") or ""
    rt.store.put(APOLLO, "index/ranked/memory-2026-11.json", json.dumps({"text": ledger}))
    rt.store.put(APOLLO, "memory/archive/2026-11-30.md", ledger)
    rt.store.put(APOLLO, "memory/2026-11-29.md", ledger)
    rt.store.delete(APOLLO, "memory/2026-11-29.md")
    return rt


def test_forgetting_a_member_anonymises_what_they_wrote_into_a_scope_in_every_version() -> None:
    rt = contributed_project()
    assert set(names_bob(rt, APOLLO)) >= {"MEMORY.md", "review/queue.jsonl"}
    gemini_before = every_version(rt, GEMINI)

    assert call(rt, "DELETE", "/v1/memory", "bob")[0] == 204

    assert names_bob(rt, APOLLO) == []  # no version of anything of the scope names Bob
    assert rt.store.get(APOLLO, "index/ranked/memory-2026-11.json") is None  # rebuilt later
    assert f"by={ANONYMOUS}" in (rt.store.text(APOLLO, "memory/archive/2026-11-30.md") or "")
    memory = rt.store.text(APOLLO, "MEMORY.md") or ""
    for fact in ("Refunds over 500 EUR", "Deploys freeze on Fridays.", "Standup is at 09:30."):
        assert fact in memory  # accepted facts are the scope's knowledge now
    ledger = "".join(
        rt.store.text(APOLLO, info.path) or ""
        for info in rt.store.list(APOLLO, "memory/")
    )  # fmt: skip
    assert f"by={ANONYMOUS}" in ledger and f"session={ANONYMOUS} turns=1" in ledger
    assert "by=ann" in ledger  # other writers keep their names
    assert "Lunch is at 12:30." in ledger  # Bob's correction stands, without his name
    # Bob's pending proposal is dropped; Carol's waits for review still
    queue = [i.text for i in list_review(rt, APOLLO)]
    assert queue == ["- Carol's proposal about onboarding."]
    # a scope Bob never wrote into is left exactly as it was
    assert every_version(rt, GEMINI) == gemini_before
    # the scope's members still find what Bob promoted, without his name
    search = {"query": "second approver", "match_mode": "ranked", "scope": "project:apollo"}
    status, found = call(rt, "POST", "/v1/memory/search", "carol", search)
    assert status == 200 and any("second approver" in h["text"] for h in found["hits"])
    assert "bob" not in json.dumps(found)
    # Bob's own records are gone with his partition
    assert rt.table.written_by(BOB) == {} and rt.table.scopes_of(BOB) == []


def test_a_forget_that_fails_in_a_scope_is_run_again_and_completes() -> None:
    from agent_harness.errors import StoreError

    rt = contributed_project()
    real, failed = rt.store.delete_versions, []

    def fail_once(*args, **kwargs):  # type: ignore[no-untyped-def]
        if not failed:
            failed.append(True)
            raise StoreError("S3 is unavailable")
        return real(*args, **kwargs)

    rt.store.delete_versions = fail_once  # type: ignore[method-assign]
    assert call(rt, "DELETE", "/v1/memory", "bob")[0] == 503
    # the scopes go first: what says where Bob wrote is still there to run it again
    assert rt.table.written_by(BOB) and names_bob(rt, APOLLO)
    assert call(rt, "DELETE", "/v1/memory", "bob")[0] == 204
    assert names_bob(rt, APOLLO) == [] and rt.table.written_by(BOB) == {}


def test_forgetting_a_user_who_wrote_no_scope_visits_none() -> None:
    rt, _ = scoped_runtime()
    assert call(rt, "GET", "/v1/memory?scope=project:apollo", "bob")[0] == 200  # a reader
    rt.store.calls.clear()
    assert call(rt, "DELETE", "/v1/memory", "bob")[0] == 204
    assert not [c for c in rt.store.calls if c[0] in ("changed_since", "delete_versions")]


def test_a_refused_write_records_no_scope_to_visit() -> None:
    rt, _ = scoped_runtime()
    save = {"scope": "project:apollo", "content": "- A member may not save."}
    assert call(rt, "POST", "/v1/memory/save", "bob", save)[0] == 403
    outsider = {"scope": "project:apollo", "content": FACT}
    assert call(rt, "POST", "/v1/memory/promote", "carol", outsider)[0] == 403
    fix = {"by": "- x", "scope": "project:apollo"}
    assert call(rt, "POST", "/v1/memory/facts/2026-11-30.00000000/supersede", "ann", fix)[0] == 404
    assert rt.table.writers == {}
    assert call(rt, "POST", "/v1/memory/promote", "bob", outsider)[0] == 200
    assert rt.table.written_by(BOB) == {"project:apollo": iso(rt.clock.now())}
    assert ANN.key not in {key for key, _ in rt.table.writers}
