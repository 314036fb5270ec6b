"""docs/design.md#memory-scopes as a property: users (one whose id is a scope's very text),
shared scopes and the operators' grants change in any order while everyone saves, reads
and searches every scope through HTTP and MCP, and runs turns bound to one (our route,
chat completions and Responses with the header: injection and recall), while the
operator's console shows a scope's page and a user's and promotes a user's line. Whoever
the grants at that moment do not allow gets 403 (or the tool's error), and no storage
request for their action names the scope's memory; nobody's answer carries a marker of a
scope they may not read, or of another scope, or another user's own (a turn's model is
shown the caller's own memory and the one scope it bound, nothing else; a scope's
console page shows that scope only, a user's page that user's only). Hypothesis
generates the sequences (in-process app on the fakes)."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools import Metrics
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_harness.ids import User
from agent_harness.memory.owner import Memory
from agent_harness.models.base import ChatRequest, ChatResponse, Message, Usage
from agent_harness.scopes import remove_member, set_member
from agent_harness.settings import Settings
from tests.fakes import make_runtime
from tests.reliability.test_isolation import Recorder, request

USERS = ["alice", "auth0|5f7c1e", "project:apollo", "bob"]
SCOPES = ["project:apollo", "agent:support", "org"]
ACTIONS = ["grant_member", "grant_maintainer", "revoke", "save", "get", "search", "mcp_search",
           "mcp_save", "own_save", "turn", "chat", "responses", "console",
           "console_user", "console_promote"]  # fmt: skip
TURNS = ("turn", "chat", "responses")
checked = {"actions": 0, "refused": 0, "foreign": 0, "leaks": 0, "wrong_status": 0}


def marker(scope: int, step: int) -> str:
    return f"scopemark{scope}s{step}x"


def own_marker(user: int) -> str:
    return f"usermark{user}x"


def mcp(rt, user: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": name, "arguments": arguments}}  # fmt: skip
    accept = {"accept": "application/json, text/event-stream"}
    return json.loads(request(rt, "POST", "/mcp", user, message, accept))["result"]


class Shown:
    """The agent model: answers "ok" and keeps what each call was shown."""

    name = "scripted:shown"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def complete(self, request: ChatRequest) -> ChatResponse:
        self.prompts.append(json.dumps([m.content for m in request.messages]))
        return ChatResponse(
            message=Message(role="assistant", content="ok"), usage=Usage(), model=self.name
        )


def bound_turn(rt, model: Shown, user: str, scope: str, action: str, step: int) -> tuple[str, bool]:
    """A turn of a new session bound to ``scope``: what its model was shown, and whether
    it ran (our route, chat completions with the header, Responses with the header)."""
    model.prompts.clear()
    if action == "turn":
        body = request(rt, "POST", f"/v1/sessions/t{step}/messages", user,
                       {"message": "what fact do you know?", "scopes": [scope]})  # fmt: skip
    else:
        path = "/v1/chat/completions" if action == "chat" else "/v1/responses"
        ask = ({"messages": [{"role": "user", "content": "what fact do you know?"}]}
               if action == "chat" else {"input": "what fact do you know?"})  # fmt: skip
        body = request(rt, "POST", path, user, {"model": "agent-harness", **ask},
                       {"x-harness-scopes": scope})  # fmt: skip
    return body + "".join(model.prompts), bool(model.prompts)


def console_view(rt, scope: str | None, user: str) -> str:
    """The body of the console's page of ``scope`` (None: of ``user``), as the operator
    sees it; "" for a user with nothing stored yet (the console's 404)."""
    from agent_harness.errors import NotFoundError
    from console import views, views_scopes
    from console.page import Ctx

    ctx = Ctx(rt, {}, {}, "token")
    try:
        if scope is not None:
            return views_scopes.scope_page(ctx, scope).body
        return views.memory_page(ctx, User.from_id(user)).body
    except NotFoundError:
        return ""


def console_promote(rt, scope: str, user: str) -> bool:
    """The console's Promote button on the user's first MEMORY.md line: True if it went
    through, False when the user's grants refused it (403)."""
    from agent_harness.errors import ForbiddenError
    from console import views_scopes
    from console.page import Ctx

    try:
        views_scopes.promote(
            Ctx(rt, {}, {"line": "1", "scope": scope}, "token"), User.from_id(user)
        )
    except ForbiddenError:
        return False
    return True


def run_steps(steps: list[tuple[int, int, str]]) -> None:
    model = Shown()
    rt = make_runtime(settings=Settings(auth_mode="dev"), agent=model)
    seen: list[str] = []
    rt.store = Recorder(rt.store, seen)  # type: ignore[assignment]
    rt.table = Recorder(rt.table, seen)  # type: ignore[assignment]
    roles: dict[tuple[int, int], str] = {}  # the model of the grants
    saved: dict[int, list[str]] = {s: [marker(s, -1)] for s in range(len(SCOPES))}
    # every scope and every user holds a marker from the start, so each check has
    # something to find whatever the sequence granted
    for number, name in enumerate(SCOPES):
        lines = [f"fact {marker(number, -1)}"]
        Memory(rt, User.for_scope(name)).save(lines, authority="operator",
                      provenance="> source: seed", at=rt.clock.now())  # fmt: skip
    for number, name in enumerate(USERS):
        lines = [f"own {own_marker(number)}"]
        Memory(rt, User.from_id(name)).save(lines, authority="save:api",
                      provenance="> source: seed", at=rt.clock.now())  # fmt: skip
    for step, (u, s, action) in enumerate(steps):
        Metrics().clear_metrics()  # each step is an invocation, whose metrics are its own
        user, scope, owner = USERS[u], SCOPES[s], User.for_scope(SCOPES[s]).key
        caller = User.from_id(user)
        role = roles.get((u, s)) or ("member" if scope == "org" else None)
        may_read, may_write = role is not None, role == "maintainer"
        seen.clear()
        checked["actions"] += 1
        if action.startswith("grant_"):
            roles[(u, s)] = action.removeprefix("grant_")
            set_member(rt, scope, caller, roles[(u, s)])
            continue
        if action == "revoke":
            if (u, s) in roles:
                del roles[(u, s)]
                remove_member(rt, scope, caller)
            continue
        if action == "own_save":  # the user's own memory, which no scope shows
            request(rt, "POST", "/v1/memory/save", user, {"content": f"own {own_marker(u)}"})
            continue
        if action == "console_promote":
            if may_read:  # a member's would carry their own marker into the scope
                checked["actions"] -= 1
                continue
            assert not console_promote(rt, scope, user), (user, scope, action)
            checked["refused"] += 1
            foreign = [k for k in seen if k == owner]
            checked["foreign"] += len(foreign)
            assert not foreign, (user, scope, action, seen)
            continue
        if action.startswith("console"):  # the operator's: a page shows its owner's only
            page_of_scope = action == "console"
            body = console_view(rt, scope if page_of_scope else None, user)
            scoped = [m for t, ms in saved.items() if not page_of_scope or t != s for m in ms]
            owns = [own_marker(o) for o in range(len(USERS)) if page_of_scope or o != u]
            leaked = [m for m in [*scoped, *owns] if m in body]
            checked["leaks"] += len(leaked)
            assert not leaked, (user, scope, action, leaked)
            continue
        mark = marker(s, step)
        allowed = may_write if action in ("save", "mcp_save") else may_read
        if action == "save":
            body = request(rt, "POST", "/v1/memory/save", user,
                           {"content": f"fact {mark}", "scope": scope})  # fmt: skip
            ok = '"saved"' in body
        elif action == "mcp_save":
            result = mcp(rt, user, "memory_save", {"content": f"fact {mark}", "scope": scope})
            body, ok = json.dumps(result), not result["isError"]
        elif action == "get":
            body = request(rt, "GET", f"/v1/memory?scope={scope}", user)
            ok = '"content"' in body
        elif action == "search":
            query = {"query": "fact", "match_mode": "any", "limit": 100, "scope": scope}
            body = request(rt, "POST", "/v1/memory/search", user, query)
            ok = '"hits"' in body
        elif action in ("turn", "chat", "responses"):
            body, ok = bound_turn(rt, model, user, scope, action, step)
        else:
            args = {"query": "fact", "match_mode": "any", "limit": 100, "scope": scope}
            result = mcp(rt, user, "memory_search", args)
            body, ok = json.dumps(result), not result["isError"]
        if ok and action in ("save", "mcp_save"):
            saved[s].append(mark)
        checked["wrong_status"] += ok != allowed
        assert ok == allowed, (user, scope, action, role, body[:300])
        if not allowed:
            checked["refused"] += 1
            foreign = [k for k in seen if k == owner]
            checked["foreign"] += len(foreign)
            assert not foreign, (user, scope, action, seen)
        # never another scope's marker, nor anyone's own; a refused caller not even this one's
        others = [m for t, marks in saved.items() if t != s for m in marks]
        visible = [] if allowed else saved[s]
        # a turn shows the caller's own memory beside the bound scope's, never anyone else's
        owns = [own_marker(o) for o in range(len(USERS)) if not (o == u and action in TURNS)]
        leaked = [m for m in [*others, *visible, *owns] if m in body and m != mark]
        checked["leaks"] += len(leaked)
        assert not leaked, (user, scope, action, leaked)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.integers(0, len(USERS) - 1),
            st.integers(0, len(SCOPES) - 1),
            st.sampled_from(ACTIONS),
        ),
        min_size=4,
        max_size=16,
    )
)
def check_sequence(steps) -> None:
    run_steps(steps)


def test_a_member_reads_what_a_maintainer_saved_and_the_control_finds_it() -> None:
    """The control of the property: a granted member does find the scope's fact, so "no
    leak" is not "nothing found"."""
    rt = make_runtime(settings=Settings(auth_mode="dev"))
    set_member(rt, "project:apollo", User.from_id("alice"), "maintainer")
    set_member(rt, "project:apollo", User.from_id("bob"), "member")
    request(rt, "POST", "/v1/memory/save", "alice",
            {"content": "fact scopemark0s0x", "scope": "project:apollo"})  # fmt: skip
    query = {"query": "fact", "match_mode": "any", "scope": "project:apollo"}
    assert "scopemark0s0x" in request(rt, "POST", "/v1/memory/search", "bob", query)
    assert "scopemark0s0x" in json.dumps(mcp(rt, "bob", "memory_search", query))
    assert "scopemark0s0x" not in request(rt, "GET", "/v1/memory", "project:apollo")
    assert "scopemark0s0x" in console_view(rt, "project:apollo", "alice")


def test_no_one_outside_a_scope_reads_finds_or_writes_it(record) -> None:
    checked.update(actions=0, refused=0, foreign=0, leaks=0, wrong_status=0)
    check_sequence()
    record(
        "scope-isolation",
        f"{len(USERS)} users (one named as a scope), {len(SCOPES)} scopes, "
        f"{checked['actions']} generated actions ({checked['refused']} refused): "
        "storage calls of a refused action naming the scope",
        checked["foreign"],
        "0",
        checked["foreign"] == 0 and checked["actions"] >= 500,
    )
    record("scope-isolation", "  ... answers carrying what the caller may not read",
           checked["leaks"], "0", checked["leaks"] == 0)  # fmt: skip
    record("scope-isolation", "  ... answers whose status the grants did not decide",
           checked["wrong_status"], "0", checked["wrong_status"] == 0)  # fmt: skip
    assert checked["actions"] >= 500 and checked["refused"] > 0
    assert checked["foreign"] == checked["leaks"] == checked["wrong_status"] == 0
