"""Shared memory scopes over HTTP against `python -m local_stack` (what `make dev` runs):
an operator grants two users a project, the maintainer saves a fact into it, the member
reads and searches it over HTTP and MCP (the official SDK), a third user outside it is
refused everywhere, the maintainer's correction reaches the member, and a member who
leaves is refused on the next request."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from agent_harness.memory.facts.lifecycle import ledger_fact_id
from local_stack.process import LocalStackProcess

pytestmark = pytest.mark.e2e

REFUNDS = "Refunds over 500 EUR need a second approver."
CORRECTED = "Refunds over 800 EUR need a second approver."


def call(
    stack: LocalStackProcess,
    method: str,
    path: str,
    user: str,
    body: Any = None,
    admin: bool = False,
) -> httpx.Response:
    headers = {"x-user-id": user} | ({"x-admin": "true"} if admin else {})
    return httpx.request(method, f"{stack.url}{path}", headers=headers, json=body, timeout=30)


def mcp_tool(
    stack: LocalStackProcess, user: str, name: str, args: dict[str, Any]
) -> CallToolResult:
    async def run() -> CallToolResult:
        async with (
            httpx.AsyncClient(headers={"x-user-id": user}, timeout=30) as web,
            Client(streamable_http_client(f"{stack.url}/mcp", http_client=web)) as client,
        ):
            return await client.call_tool(name, args)

    return anyio.run(run)


def text_of(result: CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


def test_two_members_share_a_project_fact_a_third_never_sees_it(offline_stack) -> None:
    tag = uuid.uuid4().hex[:8]
    scope, ann, bob, carol = f"project:apollo-{tag}", f"ann-{tag}", f"bob-{tag}", f"carol-{tag}"
    members = f"/v1/admin/scopes/{scope}/members"
    assert call(
        offline_stack, "PUT", f"{members}/{ann}", "ops", {"role": "maintainer"}, True
    ).is_success
    assert call(
        offline_stack, "PUT", f"{members}/{bob}", "ops", {"role": "member"}, True
    ).is_success
    listed = call(offline_stack, "GET", members, "ops", admin=True).json()["members"]
    assert {(m["user_id"], m["role"]) for m in listed} == {(ann, "maintainer"), (bob, "member")}

    saved = call(
        offline_stack, "POST", "/v1/memory/save", ann, {"content": REFUNDS, "scope": scope}
    )
    assert saved.status_code == 200 and saved.json()["saved"] == 1

    # the member reads and searches it, over HTTP and MCP
    read = call(offline_stack, "GET", f"/v1/memory?scope={scope}", bob)
    assert read.status_code == 200 and REFUNDS in read.json()["content"]
    query = {"query": "refunds approver", "match_mode": "ranked", "scope": scope}
    hits = call(offline_stack, "POST", "/v1/memory/search", bob, query).json()["hits"]
    assert any(REFUNDS.rstrip(".") in h["text"] for h in hits)
    found = mcp_tool(offline_stack, bob, "memory_search", query)
    assert not found.is_error and "second approver" in text_of(found)

    # outside the project: refused at every door, and the fact is in nothing of theirs
    assert call(offline_stack, "GET", f"/v1/memory?scope={scope}", carol).status_code == 403
    assert call(offline_stack, "POST", "/v1/memory/search", carol, query).status_code == 403
    refused = mcp_tool(offline_stack, carol, "memory_search", query)
    assert refused.is_error and "second approver" not in text_of(refused)
    own = call(offline_stack, "GET", "/v1/memory", carol).json()["content"]
    assert "approver" not in own
    # a member may read, not write
    write = {"content": "Refunds need no approver.", "scope": scope}
    assert call(offline_stack, "POST", "/v1/memory/save", bob, write).status_code == 403

    # the maintainer corrects the fact; the member sees the correction, not the old one
    # the fact's id: its ledger day (the save's, today in UTC) and its words; a search
    # shows the MEMORY.md line first and leaves out the ledger line with the same words
    fact_id = ledger_fact_id(datetime.now(UTC).date().isoformat(), REFUNDS)
    fixed = call(
        offline_stack,
        "POST",
        f"/v1/memory/facts/{fact_id}/supersede",
        ann,
        {"by": CORRECTED, "scope": scope},
    )
    assert fixed.status_code == 200 and fixed.json()["state"] == "superseded"
    hits = call(offline_stack, "POST", "/v1/memory/search", bob, query).json()["hits"]
    texts = " ".join(h["text"] for h in hits)
    assert "800 EUR" in texts and "500 EUR" not in texts

    # a member who leaves loses access on the next request
    assert call(offline_stack, "DELETE", f"{members}/{bob}", "ops", admin=True).status_code == 200
    assert call(offline_stack, "GET", f"/v1/memory?scope={scope}", bob).status_code == 403
    assert call(offline_stack, "POST", "/v1/memory/search", bob, query).status_code == 403


def test_a_bound_session_sees_the_scope_and_a_removed_member_loses_it_next_turn(
    offline_stack,
) -> None:
    from openai import OpenAI, PermissionDeniedError

    tag = uuid.uuid4().hex[:8]
    scope, ann, bob, carol = f"project:orion-{tag}", f"ann-{tag}", f"bob-{tag}", f"carol-{tag}"
    members = f"/v1/admin/scopes/{scope}/members"
    for user, role in ((ann, "maintainer"), (bob, "member")):
        put = call(offline_stack, "PUT", f"{members}/{user}", "ops", {"role": role}, True)
        assert put.is_success
    fact = f"Orion {tag} releases ship on Fridays after the 15:00 freeze."
    assert call(
        offline_stack, "POST", "/v1/memory/save", ann, {"content": fact, "scope": scope}
    ).is_success

    # our own route: scopes on the first message, each one's MEMORY.md injected, labelled
    first = {"message": f"When does orion {tag} ship?", "scopes": [scope]}
    turn = call(offline_stack, "POST", f"/v1/sessions/s-{tag}/messages", bob, first)
    assert turn.status_code == 200, turn.text
    assert turn.json()["scopes"] == [scope]
    record = call(offline_stack, "GET", f"/v1/sessions/s-{tag}/turns/1/memory", bob).json()
    assert [s["scope"] for s in record["scopes"]] == [scope] and record["scopes"][0]["tokens"] > 0

    # a third user may not bind it: 403, nothing written
    refused = call(offline_stack, "POST", f"/v1/sessions/c-{tag}/messages", carol, first)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    assert call(offline_stack, "GET", f"/v1/sessions/c-{tag}/messages", carol).json()["turns"] == []

    # the OpenAI route binds with a header, through the official client
    client = OpenAI(
        base_url=f"{offline_stack.url}/v1",
        api_key="dev-mode-needs-no-key",
        default_headers={"x-user-id": bob, "x-harness-scopes": scope},
    )
    raw = client.chat.completions.with_raw_response.create(
        model="agent-harness", messages=[{"role": "user", "content": f"Orion {tag} ship day?"}]
    )
    session = raw.headers["x-session-id"]
    assert raw.parse().choices[0].message.content
    chat_record = call(offline_stack, "GET", f"/v1/sessions/{session}/turns/1/memory", bob)
    assert [s["scope"] for s in chat_record.json()["scopes"]] == [scope]
    outsider = OpenAI(
        base_url=f"{offline_stack.url}/v1",
        api_key="dev-mode-needs-no-key",
        default_headers={"x-user-id": carol, "x-harness-scopes": scope},
    )
    with pytest.raises(PermissionDeniedError):
        outsider.chat.completions.create(
            model="agent-harness", messages=[{"role": "user", "content": "anything?"}]
        )

    # the member leaves: their very next turn of the bound session is refused
    assert call(offline_stack, "DELETE", f"{members}/{bob}", "ops", admin=True).is_success
    later = call(
        offline_stack, "POST", f"/v1/sessions/s-{tag}/messages", bob, {"message": "again?"}
    )
    assert later.status_code == 403
    turns = call(offline_stack, "GET", f"/v1/sessions/s-{tag}/messages", bob).json()["turns"]
    assert len(turns) == 1


def test_a_promoted_fact_reaches_the_other_member_and_never_an_outsider(offline_stack) -> None:
    tag = uuid.uuid4().hex[:8]
    scope, ann, bob, carol = f"project:vega-{tag}", f"ann-{tag}", f"bob-{tag}", f"carol-{tag}"
    members = f"/v1/admin/scopes/{scope}/members"
    for user, role in ((ann, "maintainer"), (bob, "member")):
        assert call(
            offline_stack, "PUT", f"{members}/{user}", "ops", {"role": role}, True
        ).is_success
    fact = f"Vega {tag} builds must pass the soak test before a release."

    # bob proposes; it waits for review and nobody sees it yet
    proposed = call(
        offline_stack, "POST", "/v1/memory/promote", bob, {"scope": scope, "content": fact}
    )
    assert proposed.status_code == 200 and proposed.json()["status"] == "queued"
    (item,) = proposed.json()["items"]
    assert (
        fact not in call(offline_stack, "GET", f"/v1/memory?scope={scope}", ann).json()["content"]
    )
    assert call(offline_stack, "GET", f"/v1/memory/review?scope={scope}", bob).status_code == 403
    assert (
        call(
            offline_stack, "POST", "/v1/memory/promote", carol, {"scope": scope, "content": fact}
        ).status_code
        == 403
    )

    # the maintainer approves it: both members' next turns are shown it
    decided = call(
        offline_stack,
        "POST",
        f"/v1/memory/review/{item}",
        ann,
        {"action": "approve", "scope": scope},
    )
    assert decided.status_code == 200 and decided.json()["written"]
    for user in (ann, bob):
        turn = call(
            offline_stack,
            "POST",
            f"/v1/sessions/v-{tag}/messages",
            user,
            {"message": f"What must vega {tag} builds pass?", "scopes": [scope]},
        )
        assert turn.status_code == 200, turn.text
        shown = call(offline_stack, "GET", f"/v1/sessions/v-{tag}/turns/1/memory", user).json()
        assert shown["scopes"][0]["scope"] == scope and shown["scopes"][0]["tokens"] > 0
        hits = call(
            offline_stack,
            "POST",
            "/v1/memory/search",
            user,
            {"query": f"vega {tag} soak", "match_mode": "all", "scope": scope},
        ).json()["hits"]
        assert any("soak test" in h["text"] for h in hits)

    # the outsider finds it nowhere: not in their own memory, not in the scope
    assert call(
        offline_stack, "POST", "/v1/memory/search", carol,
        {"query": "soak", "match_mode": "any", "scope": scope},
    ).status_code == 403  # fmt: skip
    own = call(
        offline_stack, "POST", "/v1/memory/search", carol, {"query": "soak", "match_mode": "any"}
    )
    assert all(tag not in h["text"] for h in own.json()["hits"])
    refused = call(
        offline_stack, "POST", f"/v1/sessions/v-{tag}/messages", carol,
        {"message": "soak?", "scopes": [scope]},
    )  # fmt: skip
    assert refused.status_code == 403


def test_a_forgotten_member_is_anonymised_in_every_version_of_the_scope(offline_stack) -> None:
    import re
    from urllib.parse import unquote

    tag = uuid.uuid4().hex[:8]
    scope, ann, bob = f"project:lyra-{tag}", f"ann-{tag}", f"bob-{tag}"
    members = f"/v1/admin/scopes/{scope}/members"
    for user, role in ((ann, "maintainer"), (bob, "member")):
        assert call(
            offline_stack, "PUT", f"{members}/{user}", "ops", {"role": role}, True
        ).is_success
    accepted, pending = f"Lyra {tag} releases need two reviews.", f"Lyra {tag} idea pending."
    items = []
    for text in (accepted, pending):
        done = call(
            offline_stack, "POST", "/v1/memory/promote", bob, {"scope": scope, "content": text}
        )
        assert done.status_code == 200
        items += done.json()["items"]
    decided = call(offline_stack, "POST", f"/v1/memory/review/{items[0]}", ann,
                   {"action": "approve", "scope": scope})  # fmt: skip
    assert decided.status_code == 200
    own = {"content": f"Lyra {tag} standup is at nine.", "scope": scope}
    assert call(offline_stack, "POST", "/v1/memory/save", ann, own).status_code == 200

    s3, bucket = offline_stack.s3(), "agent-harness-local-workspace"
    root = f"scopes/project/lyra-{tag}/"
    named = re.compile(rf"\bby[= ]{re.escape(bob)}(?![A-Za-z0-9_%-])")

    def versions_naming(pattern: re.Pattern[str]) -> list[str]:
        found = []
        for v in s3.list_object_versions(Bucket=bucket, Prefix=root).get("Versions", []):
            obj = s3.get_object(Bucket=bucket, Key=v["Key"], VersionId=v["VersionId"])
            writers = [unquote(m) for m in obj.get("Metadata", {}).values()]  # percent-encoded
            text = obj["Body"].read().decode() + " " + " ".join(writers)
            if pattern.search(text):
                found.append(v["Key"])
        return found

    assert versions_naming(named)  # bob is named before he is forgotten
    assert call(offline_stack, "DELETE", "/v1/memory", bob).status_code == 204

    assert versions_naming(named) == []
    assert versions_naming(re.compile(r"\bby=\(forgotten\)"))  # anonymised, still there
    assert versions_naming(re.compile(rf"\bby={re.escape(ann)}\b"))  # ann keeps her name
    review = call(offline_stack, "GET", f"/v1/memory/review?scope={scope}", ann).json()["items"]
    assert review == []  # bob's pending proposal is gone
    memory = call(offline_stack, "GET", f"/v1/memory?scope={scope}", ann).json()["content"]
    assert f"Lyra {tag} releases need two reviews." in memory and pending not in memory
    query = {"query": f"lyra {tag} reviews", "match_mode": "all", "scope": scope}
    hits = call(offline_stack, "POST", "/v1/memory/search", ann, query).json()["hits"]
    assert any("two reviews" in h["text"] for h in hits)
