"""docs/design.md#user-isolation as a property: several users, among them ids that are not
key-safe (JWT subs like ``auth0|123``, unicode, slashes, dots, percent signs), do everything
in any order: messages, memory_save, PUT, search, thread search, versions, rollback to
another user's version id, memory_get with crafted paths, forget, chat completions on a
session of the same name, MCP reads and searches, responses (every stored response's id
tried, by GET and as previous_response_id). Every storage request made for an action
names the acting user's key, and no response carries another user's data. Hypothesis
generates the sequences (in-process app on the fakes)."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools import Metrics
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_harness.agent.tools import MemoryTools
from agent_harness.api.routes import build_app
from agent_harness.errors import HarnessError
from agent_harness.ids import User
from agent_harness.memory.jobs.flush import run_post_turn_job
from agent_harness.models.base import ToolCall
from agent_harness.settings import Settings
from local_stack.lambdas import context_for, http_event
from tests.fakes import make_runtime

USERS = ["alice", "auth0|5f7c1e", "ユーザー", "a/b", "..", "alice/../bob", "bob%2F", "bob"]
ACTIONS = [
    "message", "save", "put", "get", "search", "sessions_search", "versions",
    "rollback", "ledger", "memory_get", "forget", "chat", "mcp", "responses",
]  # fmt: skip
CRAFTED = [
    "MEMORY.md",
    "../bob/MEMORY.md",
    "../../users/bob/MEMORY.md",
    "memory/../../bob/MEMORY.md",
    "/users/bob/MEMORY.md",
    "%2e%2e/bob/MEMORY.md",
    "memory/2026-11-30.md",
    "..",
]
checked = {"actions": 0, "foreign": 0, "leaks": 0}


class Recorder:
    """Wraps a store or the table; notes the user key of every call."""

    def __init__(self, inner: Any, seen: list[str]) -> None:
        self._inner, self._seen = inner, seen

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._inner, name)
        if not callable(real):
            return real

        def call(*args: Any, **kwargs: Any) -> Any:
            if args and isinstance(args[0], User):
                self._seen.append(args[0].key)
            return real(*args, **kwargs)

        return call


def request(rt, method: str, path: str, user: str, payload: Any = None, headers=None) -> str:
    all_headers = {"content-type": "application/json", "x-user-id": user, **(headers or {})}
    body = json.dumps(payload).encode() if payload is not None else b""
    raw, _, query = path.partition("?")
    response = build_app(rt).resolve(
        http_event(method, raw, query=query, headers=all_headers, body=body),
        context_for("AgentCallFunction"),
    )
    return str(response.get("body") or "")


def act(rt, n: int, action: str, crafted: str) -> str:
    user, mark = USERS[n], f"marker{n}x"
    if action == "message":
        return request(
            rt,
            "POST",
            "/v1/sessions/s1/messages",
            user,
            {"message": f"Remember that my code word is {mark}. What is it?"},
        )
    if action == "save":
        return request(rt, "POST", "/v1/memory/save", user, {"content": f"code word {mark}"})
    if action == "put":
        return request(
            rt,
            "PUT",
            "/v1/memory",
            user,
            {"content": f"# Mine\n- {mark}\n"},
            {"if-none-match": "*"},
        )
    if action == "get":
        return request(rt, "GET", "/v1/memory", user)
    if action == "search":  # everyone searches for everyone's marker
        return "".join(
            request(
                rt,
                "POST",
                "/v1/memory/search",
                user,
                {"query": f"marker{m}x", "match_mode": "phrase"},
            )
            for m in range(len(USERS))
        )
    if action == "sessions_search":
        return request(rt, "POST", "/v1/sessions/search", user, {"query": "code word"})
    if action == "versions":
        return request(rt, "GET", "/v1/memory/versions", user)
    if action == "rollback":  # version ids are global in the fake: try the others'
        return "".join(
            request(rt, "POST", "/v1/memory/rollback", user, {"version_id": f"v{k}"})
            for k in range(1, 12)
        )
    if action == "chat":  # the OpenAI-compatible route, on a session of the same name
        return request(
            rt,
            "POST",
            "/v1/chat/completions",
            user,
            {"model": "m", "messages": [{"role": "user", "content": "What is my code word?"}]},
            {"x-session-id": "chat1"},
        )
    if action == "responses":  # a stored response, then everyone's ids tried (the fake's
        # ids count up: resp_id-<k>), as GET and as previous_response_id
        made = request(
            rt, "POST", "/v1/responses", user, {"input": f"My code word is {mark}. Say it."}
        )
        tried = [request(rt, "GET", f"/v1/responses/resp_id-{k}", user) for k in range(1, 30)]
        follow = {"input": "What did I say?", "previous_response_id": f"resp_id-{n + 1}"}
        return made + "".join(tried) + request(rt, "POST", "/v1/responses", user, follow)
    if action == "mcp":  # the MCP server: read, then search for everyone's marker
        calls = [("memory_read", {})] + [
            ("memory_search", {"query": f"marker{m}x"}) for m in range(len(USERS))
        ]
        found = []
        for name, arguments in calls:
            message = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": name, "arguments": arguments},
            }
            accept = {"accept": "application/json, text/event-stream"}
            answer = json.loads(request(rt, "POST", "/mcp", user, message, accept))
            # what the server found, not the query it echoes
            found.append(json.dumps(answer.get("result", {}).get("structuredContent")))
        return "".join(found)
    if action == "ledger":
        return request(rt, "GET", "/v1/memory/ledger/2026-11-30", user)
    if action == "memory_get":
        try:
            call = ToolCall(id="c1", name="memory_get", arguments=json.dumps({"path": crafted}))
            return MemoryTools(rt, User.from_id(user)).registry().call(call)
        except HarnessError as exc:
            return str(exc)
    return request(rt, "DELETE", "/v1/memory", user)


def run_steps(steps: list[tuple[int, str, str]]) -> list[str]:
    """``steps`` (user, action, crafted path) on a fresh runtime; asserts that no storage
    call of a step names another user and no answer carries another user's marker, and
    returns the answers. The post-turn jobs a step queues run after it, as the FIFO
    consumer would (flushed and indexed, its turns are in memory and thread search), each
    checked the same way for the user it names."""
    Metrics().clear_metrics()  # one Lambda invocation's worth at a time
    rt = make_runtime(settings=Settings(auth_mode="dev", consolidation_min_gap_seconds=0))
    seen: list[str] = []
    rt.store = Recorder(rt.store, seen)  # type: ignore[assignment]
    rt.table = Recorder(rt.table, seen)  # type: ignore[assignment]
    answers = []
    for n, action, crafted in steps:
        Metrics().clear_metrics()  # each step is an invocation, whose metrics are its own
        seen.clear()
        answer = act(rt, n, action, crafted)
        own = User.from_id(USERS[n]).key
        foreign = [key for key in seen if key != own]
        leaks = [m for m in range(len(USERS)) if m != n and f"marker{m}x" in answer]
        checked["actions"] += 1
        checked["foreign"] += len(foreign)
        checked["leaks"] += len(leaks)
        assert not foreign, (USERS[n], action, crafted, foreign)
        assert not leaks, (USERS[n], action, crafted, answer)
        answers.append(answer)
        while rt.queue.post_turn:
            job = rt.queue.post_turn.pop(0)
            seen.clear()
            run_post_turn_job(rt, job)
            foreign = [key for key in seen if key != User.from_id(job.user_id).key]
            checked["foreign"] += len(foreign)
            assert not foreign, (job, foreign)
    return answers


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.integers(0, len(USERS) - 1), st.sampled_from(ACTIONS), st.sampled_from(CRAFTED)
        ),
        min_size=1,
        max_size=14,
    )
)
def check_sequence(steps) -> None:
    """One generated sequence of actions; hypothesis runs it for many sequences."""
    run_steps(steps)


SEARCHES = ("search", "sessions_search", "mcp", "responses")


def test_each_user_finds_their_own_marker_where_the_others_find_none() -> None:
    """The control of the property below: with every user's marker in memory and in the
    thread log, the searches that must not show another user's marker (``run_steps``
    checks) do show the searcher's own, so "no leak" is not "no search result"."""
    users = range(len(USERS))
    writes = [(n, action, "MEMORY.md") for n in users for action in ("message", "save")]
    searches = [(n, action, "MEMORY.md") for n in users for action in SEARCHES]
    answers = run_steps(writes + searches)[len(writes) :]
    missing = [
        (USERS[n], action)
        for (n, action, _), answer in zip(searches, answers, strict=True)
        if f"marker{n}x" not in answer
    ]
    assert not missing, missing


def test_no_action_of_one_user_reaches_another(record) -> None:
    checked.update(actions=0, foreign=0, leaks=0)
    check_sequence()  # the property: raises on the first (shrunk) counterexample
    keys = {User.from_id(u).key for u in USERS}
    record(
        "user-isolation",
        f"{len(USERS)} users (incl. auth0|…, unicode, '/', '..', '%'), "
        f"{checked['actions']} generated actions: storage calls naming another user",
        checked["foreign"],
        "0",
        checked["foreign"] == 0 and checked["actions"] > 0,
    )
    record(
        "user-isolation",
        "  ... responses carrying another user's data",
        checked["leaks"],
        "0",
        checked["leaks"] == 0,
    )
    record(
        "user-isolation",
        "  ... distinct storage keys for distinct ids",
        len(keys),
        str(len(USERS)),
        len(keys) == len(USERS) and all("/" not in k for k in keys),
    )
    assert checked["actions"] > 0 and checked["foreign"] == checked["leaks"] == 0
    assert len(keys) == len(USERS) and all("/" not in k and k not in (".", "..") for k in keys)
