"""E2E: the local stack (`python -m local_stack`, as `make dev` runs it) in a subprocess,
driven over HTTP. The agent model is a fake OpenAI-compatible server in this process, so
the tests see exactly what the model was sent; the memory model is the offline one."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from local_stack.process import LocalStackProcess, free_port, start_local_stack

pytestmark = pytest.mark.e2e


@dataclass
class Rendezvous:
    """Where requests meet: each one that ``enter``s waits until ``size`` of them are in
    at once, or ``timeout`` seconds (then nobody waits any more). Calls that run side by
    side meet at once; calls that run one after another each wait out the timeout alone
    and leave ``peak``, the most that were in at the same time, at 1."""

    size: int = 2
    timeout: float = 15.0
    peak: int = 0
    inside: int = 0
    expired: bool = False
    _changed: threading.Condition = field(default_factory=threading.Condition, repr=False)

    def reset(self, size: int = 2, timeout: float = 15.0) -> None:
        with self._changed:
            self.size, self.timeout, self.peak, self.inside = size, timeout, 0, 0
            self.expired = False

    def enter(self) -> None:
        with self._changed:
            self.inside += 1
            self.peak = max(self.peak, self.inside)
            self._changed.notify_all()
            met = self._changed.wait_for(
                lambda: self.peak >= self.size or self.expired, self.timeout
            )
            if not met:
                self.expired = True
                self._changed.notify_all()

    def leave(self) -> None:
        with self._changed:
            self.inside -= 1


@dataclass
class FakeLLM:
    """Chat completions that answer ``ack: <last user message>``, or, for a user message
    with a script, its next scripted answer (tool calls included). A message containing
    ``[slow]`` is held until ``release`` is set, to keep a session lease busy (one with
    ``[0.5s]`` for half a second; one with ``[held]`` until ``held_release`` is set, which
    a test clears first); one
    containing ``[together]`` waits at ``together`` for others (see ``Rendezvous``).
    ``spans`` records when each request came in and was answered. A request whose
    ``tool_choice`` forces a call (``required``, or a named function) and has no script
    left is answered with that call, as a model that obeys the choice does
    (``forced_call``)."""

    port: int = field(default_factory=free_port)
    requests: list[dict[str, Any]] = field(default_factory=list)
    slow_entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    held_release: threading.Event = field(default_factory=threading.Event)
    scripts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    together: Rendezvous = field(default_factory=Rendezvous)
    #: (last user message, received, answered) per request, by ``time.monotonic()``
    spans: list[tuple[str, float, float]] = field(default_factory=list)

    def script(self, user_message: str, *answers: str | list[tuple[str, str, dict]]) -> None:
        """The answers to the calls of the turn whose user message is ``user_message``,
        in order: a text, or tool calls as (id, name, arguments) triples."""
        self.scripts[user_message] = [
            {"role": "assistant", "content": answer}
            if isinstance(answer, str)
            else {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(arguments)},
                    }
                    for call_id, name, arguments in answer
                ],
            }
            for answer in answers
        ]

    def requests_of(self, user_message: str) -> list[dict[str, Any]]:
        """Every request of the turn whose user message is ``user_message``."""
        return [r for r in self.requests if last_user_message(r) == user_message]

    def start(self) -> ThreadingHTTPServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                received = time.monotonic()
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                payload["_authorization"] = self.headers.get("Authorization")
                fake.requests.append(payload)
                last = last_user_message(payload)
                if "[together]" in last:
                    fake.together.enter()
                    try:
                        self.answer(payload, last)
                    finally:
                        fake.together.leave()
                else:
                    self.answer(payload, last)
                fake.spans.append((last, received, time.monotonic()))

            def answer(self, payload: dict[str, Any], last: str) -> None:
                if "[0.5s]" in last:  # a turn that holds its session a while
                    time.sleep(0.5)
                if "[slow]" in last:
                    fake.slow_entered.set()
                    fake.release.wait(30)
                if "[held]" in last:
                    fake.held_release.wait(120)
                message: dict[str, Any] = {"role": "assistant", "content": f"ack: {last}"}
                if fake.scripts.get(last):
                    message = fake.scripts[last].pop(0)
                elif (obeyed := forced_call(payload, len(fake.requests))) is not None:
                    message = obeyed  # a model that obeys a forced choice
                body = json.dumps(
                    {
                        "id": "chatcmpl-e2e",
                        "object": "chat.completion",
                        "model": payload["model"],
                        "choices": [
                            {
                                "index": 0,
                                "message": message,
                                "finish_reason": "tool_calls"
                                if "tool_calls" in message
                                else "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 42, "completion_tokens": 7},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    def requests_for(self, text: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["messages"][-1]["content"] == text]


def forced_call(payload: dict[str, Any], number: int) -> dict[str, Any] | None:
    """The call a model that obeys ``tool_choice`` makes: the named function, or for
    ``required`` the first tool offered that is not the stack's own memory tool; each
    required argument filled (1, or "x")."""
    choice, tools = payload.get("tool_choice"), payload.get("tools") or []
    if choice == "required" and tools:  # the caller's tool, as the caller meant
        own = [t for t in tools if not t["function"]["name"].startswith(("memory_", "thread_"))]
        function = (own or tools)[0]["function"]
    elif isinstance(choice, dict) and choice.get("type") == "function":
        name = choice["function"]["name"]
        function = next(t["function"] for t in tools if t["function"]["name"] == name)
    else:
        return None
    schema = function.get("parameters") or {}
    kinds = {k: v.get("type") for k, v in (schema.get("properties") or {}).items()}
    arguments = {k: 1 if kinds.get(k) == "integer" else "x" for k in schema.get("required", [])}
    call = {
        "id": f"call_forced_{number}",
        "type": "function",
        "function": {"name": function["name"], "arguments": json.dumps(arguments)},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def last_user_message(payload: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(payload["messages"]) if m["role"] == "user")


def wait_for(check: Any, timeout: float = 30.0, interval: float = 0.25) -> Any:
    """Poll ``check()`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s")


@pytest.fixture(scope="session")
def fake_llm() -> Iterator[FakeLLM]:
    fake = FakeLLM()
    server = fake.start()
    yield fake
    server.shutdown()


def start_stack(extra_env: dict[str, str]) -> LocalStackProcess:
    """`python -m local_stack` on free ports, with ``extra_env`` as the model settings."""
    return start_local_stack(extra_env, schedule_seconds=2)


def stop_stack(stack: LocalStackProcess) -> None:
    code = stack.stop()
    assert code != -9, "the local stack did not stop on Ctrl-C"
    assert code == 0, "".join(stack.output[-20:])
    assert stack.output[-1].strip() == "stopped"


@pytest.fixture(scope="session")
def local_stack(fake_llm: FakeLLM) -> Iterator[LocalStackProcess]:
    """The agent model is the recording fake; memory and compaction are offline."""
    stack = start_stack(
        {
            "HARNESS_MODEL": "openai:fake-e2e",
            "HARNESS_MEMORY_MODEL": "offline",
            "HARNESS_COMPACTION_MODEL": "offline",
            "OPENAI_BASE_URL": f"http://127.0.0.1:{fake_llm.port}/v1",
            "OPENAI_API_KEY": "sk-e2e",
            # as many agent containers as the reliability suite sends calls at once, as
            # Lambda scales out (each a process: ~70 MB)
            "LOCAL_CONCURRENCY": "50",
        }
    )
    yield stack
    stop_stack(stack)


@pytest.fixture(scope="session")
def offline_stack() -> Iterator[LocalStackProcess]:
    """Every role on the offline model, as `make dev` runs by default."""
    stack = start_stack({"HARNESS_MODEL": "offline"})
    yield stack
    stop_stack(stack)
