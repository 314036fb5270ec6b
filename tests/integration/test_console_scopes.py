"""The console's scope pages in-process over the fakes: an operator grants and removes
roles, sees a scope's members, MEMORY.md, review queue and spend, decides its queue,
and promotes a user's MEMORY.md line into a scope of theirs (queued for a member,
written for a maintainer, refused for anyone else with nothing written). A scope's page
shows that scope only, and a user whose id is a scope's text is a user."""

from __future__ import annotations

import html
from collections.abc import Iterator

import pytest

from agent_harness.ids import User
from agent_harness.memory.owner import Memory
from agent_harness.memory.review import list_review
from agent_harness.scopes import set_member
from console.server import ConsoleServer
from console.target import Target
from tests.fakes import make_runtime
from tests.integration.test_console_server import post, serving, signed_in

ANN, BOB = User.from_id("ann"), User.from_id("bob")
APOLLO, SUPPORT = User.for_scope("project:apollo"), User.for_scope("agent:support")


@pytest.fixture
def rt():  # type: ignore[no-untyped-def]
    rt = make_runtime()
    at = rt.clock.now()
    for user, line in (
        (ANN, "Refunds over 500 EUR need a second approver."),
        (APOLLO, "Apollo deploys on Tuesdays."),
        (SUPPORT, "Support greets customers by first name."),
        (User.from_id("project:apollo"), "A person whose id looks like a scope."),
    ):
        Memory(rt, user).save([line], authority="save:api", provenance="> source: t", at=at)
    return rt


@pytest.fixture
def console(rt) -> Iterator[tuple[ConsoleServer, object]]:  # type: ignore[no-untyped-def]
    with serving(Target(runtime=rt)) as server:
        client = signed_in(server)
        yield server, client
        client.close()


def page(console, path: str) -> str:  # type: ignore[no-untyped-def]
    response = console[1].get(path)
    assert response.status_code == 200, response.text
    return html.unescape(response.text)


def test_an_operator_grants_sees_and_removes_a_scopes_members(console, rt) -> None:  # type: ignore[no-untyped-def]
    granted = post(console, "/scopes", {"scope": "project:apollo", "user": "ann", "role": "member"})
    assert granted.status_code == 303 and granted.headers["location"].startswith(
        "/scopes/project:apollo?"
    )
    assert rt.table.get_member("project:apollo", ANN).role == "member"
    listing = page(console, "/scopes")
    assert "project:apollo" in listing and "org" in listing

    shown = page(console, "/scopes/project:apollo")
    assert "ann" in shown and "Apollo deploys on Tuesdays." in shown
    assert "Support greets" not in shown and "looks like a scope" not in shown
    assert "Refunds over 500" not in shown  # Ann's own memory is hers

    changed = post(console, "/scopes/project:apollo/members", {"user": "ann", "role": "maintainer"})
    assert changed.status_code == 303
    assert rt.table.get_member("project:apollo", ANN).role == "maintainer"
    removed = post(console, "/scopes/project:apollo/remove", {"user": "ann"})
    assert removed.status_code == 303 and rt.table.get_member("project:apollo", ANN) is None
    # the user whose id is the scope's text is a user: their page is theirs
    person = page(console, "/users/project:apollo")
    assert "looks like a scope" in person and "Apollo deploys" not in person


def test_a_bad_scope_or_role_or_a_missing_member_is_a_page_and_writes_nothing(console, rt) -> None:  # type: ignore[no-untyped-def]
    bad = post(console, "/scopes", {"scope": "apollo", "user": "ann", "role": "member"})
    assert bad.status_code == 422 and "Nothing was changed" in html.unescape(bad.text)
    role = post(console, "/scopes", {"scope": "project:apollo", "user": "ann", "role": "owner"})
    assert role.status_code == 422
    gone = post(console, "/scopes/project:apollo/remove", {"user": "bob"})
    assert gone.status_code == 404
    forged = console[1].post(
        "/scopes", data={"scope": "project:apollo", "user": "ann", "role": "maintainer"}
    )
    assert forged.status_code == 403
    assert rt.table.members == {}
    assert console[1].get("/scopes/user").status_code == 422  # not a shared scope


def test_the_promote_button_queues_a_members_fact_and_a_maintainer_approves_it(console, rt) -> None:  # type: ignore[no-untyped-def]
    set_member(rt, "project:apollo", ANN, "member")
    memory = page(console, "/users/ann")
    assert "Promote to a shared scope" in memory and "project:apollo" in memory

    promoted = post(console, "/users/ann/promote", {"line": "1", "scope": "project:apollo"})
    assert promoted.status_code == 303 and "queued" in promoted.headers["location"]
    (item,) = list_review(rt, APOLLO)
    assert item.reason == "promotion" and "console via=memory_promote by=ann" in item.source
    assert item.text == "- Refunds over 500 EUR need a second approver."
    assert item.authority == "save:api"  # as in Ann's MEMORY.md; an approval vouches
    assert "Refunds over 500" not in (rt.store.text(APOLLO, "MEMORY.md") or "")

    queue = page(console, "/scopes/project:apollo")
    assert "Refunds over 500 EUR" in queue and "by=ann" in queue
    decided = post(console, "/scopes/project:apollo/review", {"id": item.id, "action": "approve"})
    assert decided.status_code == 303
    assert "Refunds over 500 EUR" in (rt.store.text(APOLLO, "MEMORY.md") or "")
    assert list_review(rt, APOLLO) == []
    ledger = rt.store.text(APOLLO, "memory/2026-11-30.md") or ""
    assert "by=ann" in ledger  # the approval keeps who proposed it


def test_a_maintainers_promotion_is_written_and_a_non_member_is_refused(console, rt) -> None:  # type: ignore[no-untyped-def]
    set_member(rt, "agent:support", ANN, "maintainer")
    done = post(console, "/users/ann/promote", {"line": "1", "scope": "agent:support"})
    assert done.status_code == 303 and "promoted" in done.headers["location"]
    # the line keeps whose words it holds: Ann's was saved over the API, not vouched for
    assert "- [save:api] Refunds over 500 EUR" in (rt.store.text(SUPPORT, "MEMORY.md") or "")

    before = {k: list(v) for k, v in rt.store.objects.items()}
    refused = post(console, "/users/ann/promote", {"line": "1", "scope": "project:apollo"})
    assert refused.status_code == 403 and "not a member" in html.unescape(refused.text)
    not_a_fact = post(console, "/users/ann/promote", {"line": "99", "scope": "agent:support"})
    assert not_a_fact.status_code == 422
    assert {k: list(v) for k, v in rt.store.objects.items()} == before
    assert rt.table.written_by(ANN) == {"agent:support": rt.table.written_by(ANN)["agent:support"]}
