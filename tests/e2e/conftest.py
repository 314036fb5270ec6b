"""E2E: the local stack (`python -m local_stack`, as `make dev` runs it) in a subprocess,
driven over HTTP. The agent model is a fake OpenAI-compatible server in this process, so
the tests see exactly what the model was sent; the memory model is the offline one."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import httpx
import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.e2e


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class FakeLLM:
    """Chat completions that answer ``ack: <last user message>``. A message containing
    ``[slow]`` is held until ``release`` is set, to keep a session lease busy."""

    port: int = field(default_factory=free_port)
    requests: list[dict[str, Any]] = field(default_factory=list)
    slow_entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def start(self) -> ThreadingHTTPServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                payload["_authorization"] = self.headers.get("Authorization")
                fake.requests.append(payload)
                last = next(
                    m["content"] for m in reversed(payload["messages"]) if m["role"] == "user"
                )
                if "[slow]" in last:
                    fake.slow_entered.set()
                    fake.release.wait(30)
                body = json.dumps(
                    {
                        "id": "chatcmpl-e2e",
                        "object": "chat.completion",
                        "model": payload["model"],
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": f"ack: {last}"},
                                "finish_reason": "stop",
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


@dataclass
class LocalStackProcess:
    url: str
    aws_endpoint: str
    process: subprocess.Popen[str]
    output: list[str]

    def client(self, user: str | None) -> httpx.Client:
        headers = {"X-User-Id": user} if user else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def s3(self) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.aws_endpoint,
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
        )


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
    http_port, moto_port = free_port(), free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HARNESS_", "OPENAI_", "AWS_", "POWERTOOLS_"))
    }
    env.update(extra_env, PYTHONUNBUFFERED="1")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "local_stack",
            "--port",
            str(http_port),
            "--moto-port",
            str(moto_port),
            "--schedule-seconds",
            "2",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line)
            if "local stack ready" in line:
                ready.set()

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(90):
        process.kill()
        raise AssertionError("the local stack did not start:\n" + "".join(output))
    return LocalStackProcess(
        f"http://127.0.0.1:{http_port}", f"http://127.0.0.1:{moto_port}", process, output
    )


def stop_stack(stack: LocalStackProcess) -> None:
    stack.process.send_signal(signal.SIGINT)
    try:
        stack.process.wait(30)
    except subprocess.TimeoutExpired:
        stack.process.kill()
        raise AssertionError("the local stack did not stop on Ctrl-C") from None
    assert stack.process.returncode == 0, "".join(stack.output[-20:])
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
