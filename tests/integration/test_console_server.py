"""The console's server in-process on loopback, over the in-memory fakes: what it
refuses (another host, a forged or cross-site form, a forget without its confirmation,
a stale ETag) writes nothing, and every error is a page without a trace."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from agent_harness.agent.turn import run_turn
from agent_harness.ids import User
from agent_harness.memory import files
from agent_harness.memory.jobs.consolidate import consolidate, forced_job
from agent_harness.memory.jobs.flush import run_post_turn_job
from console import server as console_server
from console.server import ConsoleServer
from console.target import Target
from tests.fakes import make_runtime

ANN = User.from_id("ann")


@pytest.fixture
def rt():
    rt = make_runtime()
    run_turn(rt, ANN, "s1", "Remember that I use vim.")
    while rt.queue.post_turn:
        run_post_turn_job(rt, rt.queue.post_turn.pop(0))
    consolidate(rt, forced_job(rt, ANN))
    return rt


@contextmanager
def serving(target: Target) -> Iterator[ConsoleServer]:
    """The console on a free loopback port for the ``with`` block."""
    server = ConsoleServer(target, 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def console(rt) -> Iterator[tuple[ConsoleServer, httpx.Client]]:
    with (
        serving(Target(runtime=rt)) as server,
        httpx.Client(base_url=server.origin, follow_redirects=False) as client,
    ):
        yield server, client


def post(console, path: str, data: dict[str, str], **headers: str) -> httpx.Response:
    server, client = console
    return client.post(
        path, data={"csrf": server.token, **data}, headers={"Origin": server.origin, **headers}
    )


def test_it_listens_on_loopback_and_answers_only_to_its_own_host(console) -> None:
    server, client = console
    assert server.server_address[0] == "127.0.0.1"
    assert client.get("/users/ann").status_code == 200
    rebound = client.get("/users/ann", headers={"Host": f"evil.example:{server.server_address[1]}"})
    assert rebound.status_code == 421 and "vim" not in rebound.text


def test_a_shared_url_renders_the_line_provenance_without_a_click(console) -> None:
    _, client = console
    assert 'id="origin"' not in client.get("/users/ann").text
    page = client.get("/users/ann", params={"line": _line_of(console, "vim")})
    assert 'id="origin"' in page.text and "Remember that I use vim." in page.text
    assert "session=s1 turns=1 model=offline" in page.text


def _line_of(console, word: str) -> int:
    server, _ = console
    content = files.get_memory(server.target.get(), ANN).content
    return next(n for n, line in enumerate(content.splitlines(), 1) if word in line)


def test_a_forged_or_cross_site_form_is_refused_and_writes_nothing(console, rt) -> None:
    server, client = console
    before = files.get_memory(rt, ANN)
    data = {"content": "- hijacked\n", "etag": before.etag or ""}
    no_token = client.post("/users/ann/memory", data=data, headers={"Origin": server.origin})
    cross = post(console, "/users/ann/memory", data, Origin="https://evil.example")
    for response in (no_token, cross):
        assert response.status_code == 403 and "nothing was changed" in response.text
    assert files.get_memory(rt, ANN) == before


def test_an_edit_over_a_stale_etag_is_412_keeps_the_text_and_writes_nothing(console, rt) -> None:
    stale = files.get_memory(rt, ANN)
    files.put_memory(
        rt, ANN, stale.content + "- meanwhile\n", if_match=stale.etag, if_none_match=None
    )
    current = files.get_memory(rt, ANN)
    answer = post(console, "/users/ann/memory", {"content": "- mine\n", "etag": stale.etag or ""})
    assert answer.status_code == 412 and "changed since this page was loaded" in answer.text
    assert "- mine" in answer.text  # the operator's draft is kept in the form
    assert files.get_memory(rt, ANN) == current


def test_an_edit_over_the_current_etag_is_saved_and_names_the_console(console, rt) -> None:
    current = files.get_memory(rt, ANN)
    answer = post(
        console, "/users/ann/memory", {"content": "- edited\r\n", "etag": current.etag or ""}
    )
    assert answer.status_code == 303 and answer.headers["location"] == "/users/ann?saved=1"
    assert files.get_memory(rt, ANN).content == "- edited\n"
    latest = rt.store.list_versions(ANN, "MEMORY.md")[0]
    assert rt.store.get_version(ANN, "MEMORY.md", latest.version_id).writer == "console"


def test_forget_needs_the_user_id_typed_again(console, rt) -> None:
    refused = post(console, "/operations/forget", {"user": "ann", "confirm": "an"})
    assert refused.status_code == 400 and "nothing was deleted" in refused.text
    assert files.get_memory(rt, ANN).etag is not None
    done = post(console, "/operations/forget", {"user": "ann", "confirm": "ann"})
    assert done.status_code == 303 and "forgotten=ann" in done.headers["location"]
    assert rt.store.list(ANN, "") == []


@pytest.mark.parametrize(
    ("path", "status", "says"),
    [
        ("/users/%01bad", 400, "control characters"),
        ("/users/nobody", 404, "no user &#x27;nobody&#x27;"),
        ("/users/ann/ledgers?day=2026-02-31", 422, "day"),
        ("/users/ann/sessions/nope", 404, "no session"),
        ("/nowhere", 404, "no page"),
        ("/static/%2E%2E/server.py", 404, "No such file"),
    ],
)
def test_bad_requests_are_pages_with_a_clear_message(console, path, status, says) -> None:
    _, client = console
    page = client.get(path)
    assert page.status_code == status and says in page.text
    assert 'role="alert"' in page.text and "Traceback" not in page.text


def test_an_unexpected_failure_shows_no_trace_or_detail(console, monkeypatch) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(console_server.views.overview, "user_overview", broken)
    _, client = console
    page = client.get("/users/ann")
    assert page.status_code == 500 and "unexpected error" in page.text
    assert "secret internals" not in page.text and "Traceback" not in page.text


def test_a_stack_that_cannot_be_resolved_is_a_503_page(tmp_path) -> None:
    with serving(Target(env_file=str(tmp_path / "missing.json"))) as server:
        page = httpx.get(server.origin + "/")
    assert page.status_code == 503 and "does not exist" in page.text


def test_the_search_page_shows_the_four_modes_and_the_recall_preview(console) -> None:
    _, client = console
    page = client.get("/users/ann/search", params={"q": "vim", "message": "which editor, vim?"})
    for mode in ("phrase", "all", "any", "ranked"):
        assert f'id="mode-{mode}"' in page.text
    assert 'id="recall"' in page.text and "User said: I use vim." in page.text


def test_an_archived_ledger_day_is_readable_and_linked_from_search(console, rt) -> None:
    rt.store.put(
        ANN, "memory/archive/2026-08-01.md", "## Flush — 2026-08-01T09:00:00Z\n- old kayak trip\n"
    )
    _, client = console
    page = client.get("/users/ann/ledgers", params={"day": "2026-08-01", "archived": "1"})
    assert page.status_code == 200 and "memory/archive/2026-08-01.md" in page.text
    assert "old kayak trip" in page.text and "merged" in page.text
    found = client.get("/users/ann/search", params={"q": "kayak"})
    assert "/users/ann/ledgers?day=2026-08-01&amp;archived=1#L2" in found.text


def test_a_session_page_shows_tool_calls_and_their_results() -> None:
    from tests.fakes import ScriptedModel, tool_call

    agent = ScriptedModel(tool_call("memory_search", '{"query": "vim"}', "call_7"), "You use vim.")
    rt = make_runtime(agent=agent)
    run_turn(rt, ANN, "s2", "Which editor do I use, vim or emacs?")
    with serving(Target(runtime=rt)) as server:
        page = httpx.get(server.origin + "/users/ann/sessions/s2").text
    assert "tool call" in page and "memory_search" in page and "call_7" in page
    assert "tool result" in page and "You use vim." in page and 'id="turn-1"' in page


def test_the_user_page_shows_todays_spend_against_the_daily_budget() -> None:
    from agent_harness.settings import Settings

    rt = make_runtime(settings=Settings(consolidation_min_gap_seconds=0, user_daily_turns=5))
    run_turn(rt, ANN, "s1", "Remember that I use vim.")
    with serving(Target(runtime=rt)) as server:
        page = httpx.get(server.origin + "/users/ann").text
    assert "Turns today</dt><dd>1 of 5" in page
    assert "Memory tokens today</dt><dd>0 (no daily limit)" in page
