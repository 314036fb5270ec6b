"""Shared memory scopes: their names, the one choke point that resolves (caller, scope)
to a storage root or refuses, and the operators' membership routes."""

from __future__ import annotations

import pytest

from agent_harness.errors import ForbiddenError, InvalidRequestError, ValidationFailedError
from agent_harness.ids import User
from agent_harness.paths import user_root
from agent_harness.scopes import (
    Scope,
    group_roles,
    parse_scope,
    remove_member,
    resolve,
    set_member,
)
from agent_harness.settings import Settings
from tests.fakes import make_runtime
from tests.unit.test_budgets import admin_call

ANN, BOB = User.from_id("ann"), User.from_id("bob@example.com")
APOLLO = Scope("project", "apollo")


def test_scope_names_parse_and_bad_ones_are_refused() -> None:
    assert parse_scope("user") == Scope("user")
    assert parse_scope("org") == Scope("org")
    assert parse_scope("project:apollo") == APOLLO
    assert str(parse_scope("agent:support-bot.v2")) == "agent:support-bot.v2"
    for bad in ("", "team:x", "project:", "project:../x", "project:a/b", "agent:-x", "ORG", 7,
                None, "project:" + "x" * 65, "project:apollo:extra"):  # fmt: skip
        with pytest.raises(ValidationFailedError):
            parse_scope(bad)


def test_the_users_own_scope_needs_no_membership_and_roots_in_their_prefix() -> None:
    rt = make_runtime()
    grant = resolve(rt, BOB, Scope("user"), "write")
    assert grant.root == user_root(BOB.key) == "users/bob%40example%2Ecom/"
    assert grant.via == "owner"
    assert rt.table.calls.count("get_member") == 0


def test_reading_takes_a_member_and_writing_a_maintainer() -> None:
    rt = make_runtime()
    with pytest.raises(ForbiddenError, match="not a member"):
        resolve(rt, ANN, APOLLO, "read")
    set_member(rt, "project:apollo", ANN, "member")
    grant = resolve(rt, ANN, APOLLO, "read")
    assert grant.root == "scopes/project/apollo/" and grant.role == "member"
    with pytest.raises(ForbiddenError, match="maintainer"):
        resolve(rt, ANN, APOLLO, "write")
    set_member(rt, "project:apollo", ANN, "maintainer")
    assert resolve(rt, ANN, APOLLO, "write").role == "maintainer"
    with pytest.raises(ForbiddenError):  # a membership is of one scope only
        resolve(rt, ANN, Scope("project", "apollo2"), "read")


def test_every_user_reads_org_and_only_a_granted_maintainer_writes_it() -> None:
    rt = make_runtime()
    assert resolve(rt, BOB, Scope("org"), "read").via == "org"
    with pytest.raises(ForbiddenError):
        resolve(rt, BOB, Scope("org"), "write")
    set_member(rt, "org", BOB, "maintainer")
    assert resolve(rt, BOB, Scope("org"), "write").root == "scopes/org/"


def test_jwt_groups_grant_roles_and_the_higher_role_counts() -> None:
    rt = make_runtime()
    groups = ["agent-harness:project:apollo:maintainer", "agent-harness:agent:x:member",
              "agent-harness:user:maintainer", "agent-harness:project:bad/name:member",
              "agent-harness:project:apollo:owner", "agent-harness-admins", "other"]  # fmt: skip
    assert group_roles(groups) == {APOLLO: "maintainer", Scope("agent", "x"): "member"}
    set_member(rt, "project:apollo", ANN, "member")
    grant = resolve(rt, ANN, APOLLO, "write", groups)
    assert grant.role == "maintainer" and grant.via == "group"
    with pytest.raises(ForbiddenError):
        resolve(rt, ANN, Scope("agent", "x"), "write", groups)


def test_operators_manage_members_and_nobody_else_can() -> None:
    rt = make_runtime(settings=Settings(auth_mode="dev"))
    url = "/v1/admin/scopes/project:apollo/members"
    for method, path, payload in (
        ("GET", "/v1/admin/scopes", None),
        ("GET", url, None),
        ("PUT", f"{url}/ann", {"role": "member"}),
        ("DELETE", f"{url}/ann", None),
    ):
        status, body = admin_call(rt, method, path, payload, admin=False)
        assert status == 403 and body["error"]["code"] == "forbidden"
    assert rt.table.members == {}

    status, body = admin_call(rt, "PUT", f"{url}/ann", {"role": "member"})
    assert status == 200 and body["scope"] == "project:apollo" and body["role"] == "member"
    admin_call(rt, "PUT", f"{url}/bob%40example.com", {"role": "maintainer"})
    status, body = admin_call(rt, "GET", url)
    assert status == 200
    assert [(m["user_id"], m["role"]) for m in body["members"]] == [
        ("ann", "member"),
        ("bob@example.com", "maintainer"),
    ]
    status, body = admin_call(rt, "GET", "/v1/admin/scopes")
    assert body == {
        "scopes": [
            {"scope": "project:apollo", "members": 2, "roles": {"member": 1, "maintainer": 1}}
        ]
    }

    status, body = admin_call(rt, "DELETE", f"{url}/ann")
    assert status == 200 and body == {"scope": "project:apollo", "user_id": "ann", "removed": True}
    status, body = admin_call(rt, "DELETE", f"{url}/ann")
    assert status == 404
    with pytest.raises(ForbiddenError):  # the next request that uses the scope is refused
        resolve(rt, ANN, APOLLO, "read")


def test_a_bad_scope_or_role_is_a_4xx_and_writes_nothing() -> None:
    rt = make_runtime(settings=Settings(auth_mode="dev"))
    for path, payload in (
        ("/v1/admin/scopes/user/members/ann", {"role": "member"}),
        ("/v1/admin/scopes/team:x/members/ann", {"role": "member"}),
        ("/v1/admin/scopes/project:apollo/members/ann", {"role": "owner"}),
        ("/v1/admin/scopes/project:apollo/members/ann", {"role": "member", "extra": 1}),
        ("/v1/admin/scopes/project:apollo/members/ann", {}),
    ):
        status, body = admin_call(rt, "PUT", path, payload)
        assert status == 422, (path, payload, body)
    status, _ = admin_call(rt, "PUT", "/v1/admin/scopes/project:apollo/members/ann", None)
    assert status == 400
    assert rt.table.members == {} and rt.table.scopes == set()


def test_a_scope_owner_is_keyed_apart_from_every_user() -> None:
    apollo = User.for_scope("project:apollo")
    assert (apollo.id, apollo.key, apollo.is_scope) == ("project:apollo", "project.apollo", True)
    assert user_root(apollo.key) == "scopes/project/apollo/"
    assert user_root(User.for_scope("org").key) == "scopes/org/"
    assert user_root(User.for_scope("agent:bot.v2").key) == "scopes/agent/bot.v2/"
    namesake = User.from_id("project:apollo")
    assert namesake.key != apollo.key and not namesake.is_scope
    for key in ("project.apollo", "org.", "agent.bot.v2"):
        assert User.from_key(key) == User.for_scope(User.from_key(key).id)
    for bad in ("user", "project", "project:", "team:x", "project:a/b", "org:x"):
        with pytest.raises(InvalidRequestError):
            User.for_scope(bad)
    with pytest.raises(InvalidRequestError):
        User.from_key("project.a/b")


def test_a_scopes_memory_is_consolidated_in_its_own_prefix_partition_and_job() -> None:
    from datetime import UTC, datetime

    from agent_harness.memory import files
    from agent_harness.memory.jobs.consolidate import consolidate
    from agent_harness.memory.jobs.schedule import fan_out

    rt = make_runtime(settings=Settings(consolidation_min_gap_seconds=0))
    apollo = User.for_scope("project:apollo")
    files.save_facts(
        rt,
        apollo,
        "Refunds over 500 EUR need a second approver.",
        timestamp=datetime(2026, 11, 30, 9, tzinfo=UTC),
        source=None,
        origin="api",
    )
    assert any(k.startswith("scopes/project/apollo/memory/") for k in rt.store.objects)
    assert not any(k.startswith("users/") for k in rt.store.objects)

    rt.table.mark_consolidation_due(apollo, "2026-11-30T09:00:00Z", rt.settings.due_shards)
    assert fan_out(rt) == 1
    [job] = rt.queue.consolidation
    assert job.scope == "project:apollo"
    # a save writes MEMORY.md at once: the merge finds it there, and the scope's own
    # watermark (its partition) moves past the ledger
    assert consolidate(rt, job).status in ("consolidated", "unchanged")
    assert "second approver" in rt.store.text(apollo, "MEMORY.md")
    assert rt.table.get_user(apollo).consumed == {"2026-11-30": len(
        rt.store.text(apollo, "memory/2026-11-30.md").encode()
    )}  # fmt: skip
    # the user whose id is the scope's text has nothing
    assert rt.store.get(User.from_id("project:apollo"), "MEMORY.md") is None


# -- the memory routes that take a scope -------------------------------------------------


def scope_call(rt, method: str, path: str, user: str, payload=None, groups: str | None = None):
    import json

    from agent_harness.api.routes import build_app
    from local_stack.lambdas import context_for, http_event

    headers = {"content-type": "application/json", "x-user-id": user}
    if groups:
        headers["x-groups"] = groups
    raw_path, _, query = path.partition("?")
    body = json.dumps(payload).encode() if payload is not None else b""
    event = http_event(method, raw_path, query=query, headers=headers, body=body)
    response = build_app(rt).resolve(event, context_for("AgentCallFunction"))
    return response["statusCode"], json.loads(response["body"]) if response["body"] else None


REFUNDS = "Refunds over 500 EUR need a second approver."


def project() -> object:
    rt = make_runtime(settings=Settings(auth_mode="dev"))
    set_member(rt, "project:apollo", ANN, "maintainer")
    set_member(rt, "project:apollo", BOB, "member")
    return rt


def test_a_maintainer_saves_into_a_scope_and_a_member_reads_and_searches_it() -> None:
    rt = project()
    status, body = scope_call(
        rt, "POST", "/v1/memory/save", "ann", {"content": REFUNDS, "scope": "project:apollo"}
    )
    assert status == 200 and body["saved"] == 1 and body["scope"] == "project:apollo"
    apollo = User.for_scope("project:apollo")
    ledger = rt.store.text(apollo, "memory/2026-11-30.md") or ""
    assert REFUNDS in ledger and "via=memory_save by=ann" in ledger
    assert rt.store.get(ANN, "MEMORY.md") is None  # nothing in the maintainer's own

    status, body = scope_call(rt, "GET", "/v1/memory?scope=project:apollo", "bob@example.com")
    assert status == 200 and REFUNDS in body["content"] and body["scope"] == "project:apollo"
    query = {"query": "refunds approver", "match_mode": "ranked", "scope": "project:apollo"}
    status, body = scope_call(rt, "POST", "/v1/memory/search", "bob@example.com", query)
    assert status == 200 and any("second approver" in h["text"] for h in body["hits"])
    assert body["scope"] == "project:apollo"
    # their own memory is still their own
    status, body = scope_call(rt, "GET", "/v1/memory", "bob@example.com")
    assert status == 200 and REFUNDS not in body["content"] and "scope" not in body


def test_nobody_else_reads_finds_or_writes_a_scope_and_a_refusal_writes_nothing() -> None:
    rt = project()
    scope_call(
        rt, "POST", "/v1/memory/save", "ann", {"content": REFUNDS, "scope": "project:apollo"}
    )
    before = dict(rt.store.objects)
    save = {"content": "Refunds need no approver.", "scope": "project:apollo"}
    search = {"query": "refunds", "match_mode": "any", "scope": "project:apollo"}
    for user, method, path, payload in (
        ("bob@example.com", "POST", "/v1/memory/save", save),  # a member: reads only
        ("carol", "POST", "/v1/memory/save", save),
        ("carol", "GET", "/v1/memory?scope=project:apollo", None),
        ("carol", "POST", "/v1/memory/search", search),
    ):
        status, body = scope_call(rt, method, path, user, payload)
        assert status == 403 and body["error"]["code"] == "forbidden", (user, path, body)
    assert rt.store.objects == before
    for bad in ("team:x", "project:../users/ann", "USER"):
        status, _ = scope_call(rt, "GET", f"/v1/memory?scope={bad}", "ann")
        assert status == 422
    source = {
        "content": REFUNDS,
        "scope": "project:apollo",
        "source": {"session_id": "s1", "turns": [1]},
    }
    status, _ = scope_call(rt, "POST", "/v1/memory/save", "ann", source)
    assert status == 422 and rt.store.objects == before


def test_a_member_who_leaves_is_refused_on_the_next_request_and_groups_grant_too() -> None:
    rt = project()
    url = "/v1/memory?scope=project:apollo"
    assert scope_call(rt, "GET", url, "bob@example.com")[0] == 200
    remove_member(rt, "project:apollo", BOB)
    assert scope_call(rt, "GET", url, "bob@example.com")[0] == 403
    # an identity provider's group grants the role instead
    group = "agent-harness:project:apollo:member"
    assert scope_call(rt, "GET", url, "bob@example.com", groups=group)[0] == 200
    save = {"content": REFUNDS, "scope": "project:apollo"}
    assert scope_call(rt, "POST", "/v1/memory/save", "bob@example.com", save, group)[0] == 403


def test_the_mcp_tools_take_a_scope_through_the_same_choke_point() -> None:
    from agent_harness.mcp.server_tools import call_tool, list_tools

    rt = project()
    schemas = {t["name"]: t["inputSchema"]["properties"] for t in list_tools()}
    assert "scope" in schemas["memory_search"] and "scope" in schemas["memory_save"]

    saved = call_tool(rt, ANN, "memory_save", {"content": REFUNDS, "scope": "project:apollo"})
    assert not saved["isError"] and saved["structuredContent"]["saved"] == 1
    ledger = rt.store.text(User.for_scope("project:apollo"), "memory/2026-11-30.md") or ""
    assert "via=memory_save by=ann" in ledger

    args = {"query": "second approver", "match_mode": "any", "scope": "project:apollo"}
    found = call_tool(rt, BOB, "memory_search", args)
    assert not found["isError"] and "second approver" in found["content"][0]["text"]
    before = dict(rt.store.objects)
    refused = call_tool(rt, BOB, "memory_save", {"content": "x", "scope": "project:apollo"})
    assert refused["isError"] and "maintainer" in refused["content"][0]["text"]
    outsider = call_tool(rt, User.from_id("carol"), "memory_search", args)
    assert outsider["isError"] and "not a member" in outsider["content"][0]["text"]
    assert rt.store.objects == before


def test_mcp_memory_read_and_memory_get_read_a_scope_for_its_members_only() -> None:
    from agent_harness.mcp.server_tools import call_tool

    rt = project()
    call_tool(rt, ANN, "memory_save", {"content": REFUNDS, "scope": "project:apollo"})
    read = call_tool(rt, BOB, "memory_read", {"scope": "project:apollo"})
    assert not read["isError"] and REFUNDS in read["structuredContent"]["content"]
    lines = call_tool(rt, BOB, "memory_get", {"path": "MEMORY.md", "scope": "project:apollo"})
    assert not lines["isError"] and REFUNDS in lines["content"][0]["text"]
    carol = User.from_id("carol")
    tries = [("memory_read", {"scope": "project:apollo"}),
             ("memory_get", {"path": "MEMORY.md", "scope": "project:apollo"})]  # fmt: skip
    for name, args in tries:
        refused = call_tool(rt, carol, name, args)
        assert refused["isError"] and REFUNDS not in refused["content"][0]["text"]
    own = call_tool(rt, BOB, "memory_read", {})
    assert not own["isError"] and REFUNDS not in own["structuredContent"]["content"]


def test_the_mcp_door_honours_the_callers_jwt_groups_as_the_routes_do() -> None:
    import json

    rt = project()
    scope_call(
        rt, "POST", "/v1/memory/save", "ann", {"content": REFUNDS, "scope": "project:apollo"}
    )

    def mcp(user: str, name: str, arguments: dict, groups: str | None = None) -> dict:
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": name, "arguments": arguments}}  # fmt: skip
        from agent_harness.api.routes import build_app
        from local_stack.lambdas import context_for, http_event

        headers = {"content-type": "application/json", "x-user-id": user,
                   "accept": "application/json, text/event-stream"}  # fmt: skip
        if groups:
            headers["x-groups"] = groups
        event = http_event("POST", "/mcp", headers=headers, body=json.dumps(message).encode())
        response = build_app(rt).resolve(event, context_for("AgentCallFunction"))
        return json.loads(response["body"])["result"]

    read = {"scope": "project:apollo"}
    assert mcp("dave", "memory_read", read)["isError"]  # no membership, no group
    other = "agent-harness:project:gemini:maintainer"
    assert mcp("dave", "memory_read", read, other)["isError"]  # another scope's group
    member = "agent-harness:project:apollo:member"
    shown = mcp("dave", "memory_read", read, f"staff,{member}")
    assert not shown["isError"] and REFUNDS in shown["structuredContent"]["content"]
    before = dict(rt.store.objects)
    save = {"content": "- Planted by a member", "scope": "project:apollo"}
    refused = mcp("dave", "memory_save", save, member)
    assert refused["isError"] and "maintainer" in refused["content"][0]["text"]
    assert rt.store.objects == before
    maintainer = "agent-harness:project:apollo:maintainer"
    assert not mcp("dave", "memory_save", save, maintainer)["isError"]
    ledger = rt.store.text(User.for_scope("project:apollo"), "memory/2026-11-30.md") or ""
    assert "Planted by a member" in ledger and "by=dave" in ledger
