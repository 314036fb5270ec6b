"""A session bound to shared scopes: bound on its first message, granted again on every
request (a member removed is refused on their next turn), each scope's MEMORY.md
injected as its own labelled, capped block, and the memory tools reading the scopes."""

from __future__ import annotations

import json

import pytest

from agent_harness import markup
from agent_harness.agent.scoped import (
    MAX_BOUND_SCOPES,
    SCOPE_MEMORY_MAX_TOKENS,
    Binding,
    parse_bound,
)
from agent_harness.agent.turn import run_turn
from agent_harness.errors import ConflictError, ForbiddenError, ValidationFailedError
from agent_harness.ids import User
from agent_harness.scopes import Scope, remove_member, set_member
from agent_harness.settings import Settings
from tests.fakes import ScriptedModel, make_runtime, tool_call

ANN, BOB = User.from_id("ann"), User.from_id("bob")
APOLLO = User.for_scope("project:apollo")
SUPPORT = User.for_scope("agent:support")


def bind(*scopes: str, groups: tuple[str, ...] = ()) -> Binding:
    return Binding(parse_bound(list(scopes)), groups)


def shared_runtime(*steps: object, settings: Settings | None = None):  # type: ignore[no-untyped-def]
    model = ScriptedModel(*steps)  # type: ignore[arg-type]
    rt = make_runtime(agent=model, **({"settings": settings} if settings else {}))
    rt.store.put(APOLLO, "MEMORY.md", "- Refunds over 500 EUR need a second approver.\n")
    rt.store.put(SUPPORT, "MEMORY.md", "- Greet customers by their first name.\n")
    rt.store.put(ANN, "MEMORY.md", "- Ann prefers short answers.\n")
    set_member(rt, "project:apollo", ANN, "member")
    set_member(rt, "agent:support", ANN, "member")
    return rt, model


def test_bound_scope_names_are_checked_deduplicated_and_capped() -> None:
    assert parse_bound(None) is None
    assert parse_bound(["user", "project:apollo", "project:apollo"]) == (
        Scope("project", "apollo"),
    )
    assert parse_bound("project:apollo, agent:support") == (
        Scope("project", "apollo"),
        Scope("agent", "support"),
    )
    with pytest.raises(ValidationFailedError):
        parse_bound(["team:x"])
    with pytest.raises(ValidationFailedError, match="at most"):
        parse_bound([f"project:p{i}" for i in range(MAX_BOUND_SCOPES + 1)])


def test_each_bound_scope_is_injected_as_its_own_labelled_block_after_the_users() -> None:
    rt, model = shared_runtime("ok")
    result = run_turn(
        rt, ANN, "s1", "How do refunds work?", binding=bind("project:apollo", "agent:support")
    )

    assert result.scopes == ["project:apollo", "agent:support"]
    assert rt.table.calls.count("scopes_of") == 1  # both granted by one read
    reference = model.requests[0].messages[1].content
    users, apollo, support = (
        reference.index("Ann prefers"),
        reference.index("second approver"),
        reference.index("first name"),
    )
    assert users < apollo < support
    assert (
        'scope="project:apollo"' in reference and 'source="project:apollo/MEMORY.md"' in reference
    )
    assert 'scope="agent:support"' in reference
    assert markup.extract(reference, markup.MEMORY).strip() == "- Ann prefers short answers."
    record = json.loads(rt.store.text(ANN, "sessions/s1/turns/00000001.json"))
    assert [s["scope"] for s in record["memory"]["scopes"]] == ["project:apollo", "agent:support"]
    assert result.memory_tokens == record["memory"]["tokens"] + sum(
        s["tokens"] for s in record["memory"]["scopes"]
    )
    context = json.loads(rt.store.text(ANN, "sessions/s1/context.json"))
    assert context["scopes"] == ["project:apollo", "agent:support"]


def test_later_turns_keep_the_binding_and_may_not_change_it() -> None:
    rt, model = shared_runtime("one", "two", "three")
    run_turn(rt, ANN, "s1", "first", binding=bind("project:apollo"))
    second = run_turn(rt, ANN, "s1", "second")  # scopes left out: the bound ones
    assert second.scopes == ["project:apollo"]
    assert "second approver" in model.requests[1].messages[1].content
    with pytest.raises(ConflictError, match="bound to project:apollo"):
        run_turn(rt, ANN, "s1", "third", binding=bind("agent:support"))
    assert rt.table.get_session(ANN, "s1").turn == 2  # nothing written
    assert run_turn(rt, ANN, "s1", "third", binding=bind("project:apollo")).turn == 3


def test_a_scope_the_caller_is_not_a_member_of_is_refused_and_nothing_is_written() -> None:
    rt, model = shared_runtime("never")
    with pytest.raises(ForbiddenError, match="not a member"):
        run_turn(rt, BOB, "s1", "hello", binding=bind("project:apollo"))
    assert model.requests == []
    assert rt.store.get(BOB, "sessions/s1/context.json") is None
    assert rt.store.get(BOB, "sessions/s1/turns/00000001.json") is None
    assert rt.queue.post_turn == []
    assert rt.table.sessions[(BOB.key, "s1")].lease_owner is None


def test_a_member_removed_is_refused_on_their_next_turn() -> None:
    rt, _ = shared_runtime("one", "two")
    run_turn(rt, ANN, "s1", "first", binding=bind("project:apollo"))
    remove_member(rt, "project:apollo", ANN)
    with pytest.raises(ForbiddenError):
        run_turn(rt, ANN, "s1", "second")
    assert rt.table.get_session(ANN, "s1").turn == 1


def test_a_jwt_group_grants_the_binding_without_a_membership_read() -> None:
    rt, model = shared_runtime("ok")
    rt.table.calls.clear()
    group = ("agent-harness:project:orion:member",)
    rt.store.put(User.for_scope("project:orion"), "MEMORY.md", "- Orion ships on Fridays.\n")
    run_turn(rt, BOB, "s1", "when?", binding=bind("project:orion", groups=group))
    assert "Orion ships on Fridays." in model.requests[0].messages[1].content
    assert "scopes_of" not in rt.table.calls and "get_member" not in rt.table.calls


def test_all_scopes_share_at_most_half_the_cap_and_each_its_own() -> None:
    rt, model = shared_runtime(
        "ok", settings=Settings(consolidation_max_tokens=1200, session_wait_seconds=0)
    )
    rt.store.put(
        APOLLO, "MEMORY.md", "".join(f"- apollo rule {i} about releases\n" for i in range(800))
    )
    rt.store.put(
        SUPPORT, "MEMORY.md", "".join(f"- support rule {i} about tickets\n" for i in range(800))
    )
    run_turn(rt, ANN, "s1", "rules?", binding=bind("project:apollo", "agent:support"))
    record = json.loads(rt.store.text(ANN, "sessions/s1/turns/00000001.json"))
    scopes = record["memory"]["scopes"]
    assert all(s["truncated"] for s in scopes)
    assert all(s["tokens"] <= SCOPE_MEMORY_MAX_TOKENS for s in scopes)
    assert sum(s["tokens"] for s in scopes) <= 600
    assert record["memory"]["tokens"] + sum(s["tokens"] for s in scopes) <= 1200
    assert "about tickets" in model.requests[0].messages[1].content


def test_memory_search_labels_the_hits_of_each_bound_scope() -> None:
    search = tool_call(
        "memory_search", json.dumps({"query": "refunds approver", "matchMode": "any"})
    )
    rt, model = shared_runtime(search, "done")
    rt.store.put(
        ANN, "memory/2026-11-30.md", "## Flush\n- Ann asked about refunds and an approver.\n"
    )
    run_turn(rt, ANN, "s1", "refunds?", binding=bind("project:apollo"))
    answer = next(m.content for m in model.requests[1].messages if m.role == "tool")
    assert "[scope project:apollo] Source: MEMORY.md#1" in answer
    assert "Ann asked about refunds" in answer
    assert answer.index("Ann asked") < answer.index("[scope project:apollo]")


def test_memory_get_reads_a_bound_scope_and_refuses_one_not_bound() -> None:
    get = tool_call("memory_get", json.dumps({"path": "MEMORY.md", "scope": "project:apollo"}))
    other = tool_call(
        "memory_get", json.dumps({"path": "MEMORY.md", "scope": "agent:support"}), "call_2"
    )
    rt, model = shared_runtime(get, other, "done")
    run_turn(rt, ANN, "s1", "read it", binding=bind("project:apollo"))
    tools = [m.content for m in model.requests[2].messages if m.role == "tool"]
    assert "second approver" in tools[0]
    assert tools[1].startswith("Error:") and "not bound" in tools[1]


def test_without_a_bound_scope_the_tools_offer_no_scope_argument() -> None:
    rt, model = shared_runtime("ok")
    run_turn(rt, ANN, "s1", "hi")
    specs = {t.name: t for t in model.requests[0].tools}
    assert "scope" not in specs["memory_search"].parameters["properties"]


def put_saved(rt, owner: User, fact: str, source: str = "api via=memory_save") -> None:  # type: ignore[no-untyped-def]
    """A ledger of 2026-11-30 holding one saved fact."""
    rt.store.put(
        owner,
        "memory/2026-11-30.md",
        f"## Save — 2026-11-30T10:00:00Z\n> source: {source}\n- [save:api] {fact}\n",
    )


def test_recall_brings_lines_of_the_bound_scopes_labelled_within_the_one_budget() -> None:
    rt, model = shared_runtime("ok")
    put_saved(
        rt,
        APOLLO,
        "The apollo deploy window is Tuesday at 14:00 UTC.",
        "api via=memory_save by=ann",
    )
    rt.store.put(
        ANN,
        "memory/2026-11-29.md",
        "## Flush — 2026-11-29T10:00:00Z\n> source: session=s0 turns=1\n"
        "- [user] Ann wants deploy reminders the day before.\n",
    )
    result = run_turn(
        rt, ANN, "s1", "When is the deploy window for apollo?", binding=bind("project:apollo")
    )
    recall = model.requests[0].messages[-2].content
    assert "[scope project:apollo] [save:api] The apollo deploy window is Tuesday" in recall
    record = json.loads(rt.store.text(ANN, "sessions/s1/turns/00000001.json"))
    scoped = [line for line in record["memory"]["lines"] if line["scope"]]
    assert scoped and scoped[0]["source"].startswith("project:apollo/memory/2026-11-30.md#")
    assert (
        result.memory_tokens <= rt.settings.recall_max_tokens + rt.settings.consolidation_max_tokens
    )


def test_recall_never_reads_a_scope_the_session_did_not_bind() -> None:
    rt, model = shared_runtime("ok")
    put_saved(rt, SUPPORT, "The apollo deploy window is secret for support.")
    run_turn(rt, ANN, "s1", "When is the deploy window for apollo?", binding=bind("project:apollo"))
    sent = json.dumps([m.content for m in model.requests[0].messages])
    assert "secret for support" not in sent and "first name" not in sent


def count_scope_lists(rt) -> list[str]:  # type: ignore[no-untyped-def]
    """Spy on the store's LISTs of a shared scope's root; returns the owners listed."""
    listed: list[str] = []
    real = rt.store.list

    def spy(user, prefix, **kw):  # type: ignore[no-untyped-def]
        if user.is_scope and prefix == "":
            listed.append(user.key)
        return real(user, prefix, **kw)

    rt.store.list = spy
    return listed


def test_a_scope_is_listed_once_per_window_and_one_stale_scope_is_relisted_per_turn() -> None:
    rt, _ = shared_runtime("1", "2", "3", "4")
    listed = count_scope_lists(rt)
    both = bind("project:apollo", "agent:support")
    run_turn(rt, ANN, "s1", "first", binding=both)
    assert sorted(listed) == sorted([APOLLO.key, SUPPORT.key])  # never listed here: both
    listed.clear()
    run_turn(rt, ANN, "s1", "second")
    assert listed == []  # within the window: no request for either
    rt.clock.advance(seconds=rt.settings.recall_listing_seconds + 1)
    run_turn(rt, ANN, "s1", "third")
    assert len(listed) == 1  # past the window: one scope a turn, the oldest
    run_turn(rt, ANN, "s1", "fourth")
    assert sorted(listed) == sorted([APOLLO.key, SUPPORT.key])


def test_a_maintainers_save_in_this_container_reaches_the_next_bound_turn() -> None:
    from tests.unit.test_promotion import call

    rt, model = shared_runtime("1", "2")
    rt.settings = rt.settings.model_copy(update={"auth_mode": "dev"})
    set_member(rt, "project:apollo", BOB, "maintainer")
    run_turn(rt, ANN, "s1", "first", binding=bind("project:apollo"))
    fact = {"content": "- Release notes go to the wiki.", "scope": "project:apollo"}
    assert call(rt, "POST", "/v1/memory/save", "bob", fact)[0] == 200
    run_turn(rt, ANN, "s1", "second")  # no time passed: the listing was dropped by the write
    assert "Release notes go to the wiki." in model.requests[1].messages[1].content


def test_a_member_reads_a_scopes_memory_but_never_its_review_queue() -> None:
    queue = tool_call(
        "memory_get", json.dumps({"path": "review/queue.jsonl", "scope": "project:apollo"})
    )
    rt, model = shared_runtime(queue, "done")
    rt.store.put(APOLLO, "review/queue.jsonl", '{"id": "r1", "text": "bob proposal secret"}\n')
    run_turn(rt, ANN, "s1", "read the queue", binding=bind("project:apollo"))
    answer = next(m.content for m in model.requests[1].messages if m.role == "tool")
    assert answer.startswith("Error:") and "proposal secret" not in answer
