"""`python -m local_stack` as a child process on free ports: what the e2e tests and the
LoCoMo benchmark drive over HTTP (the same command as `make dev`)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import httpx

ROOT = Path(__file__).resolve().parent.parent
#: the child gets its configuration from ``extra_env`` only, never from the caller's
_CLEARED = ("HARNESS_", "OPENAI_", "AWS_", "POWERTOOLS_")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LocalStackProcess:
    url: str
    aws_endpoint: str
    process: subprocess.Popen[str]
    output: list[str]

    def client(self, user: str | None, timeout: float = 30) -> httpx.Client:
        headers = {"X-User-Id": user} if user else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def aws(self, service: str) -> Any:
        """A boto3 client of ``service`` on the stack's embedded AWS (moto)."""
        return boto3.client(
            service,
            endpoint_url=self.aws_endpoint,
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
        )

    def s3(self) -> Any:
        return self.aws("s3")

    def stop(self, timeout: float = 30) -> int:
        """Ctrl-C, as a developer stops `make dev`; returns the exit code (killed: -9)."""
        self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return -9


def start_local_stack(
    extra_env: dict[str, str], *, schedule_seconds: float = 2, timeout: float = 90
) -> LocalStackProcess:
    """Start it and wait for "local stack ready"; raises RuntimeError with its output if it
    does not get there in ``timeout`` seconds."""
    http_port, moto_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(_CLEARED)}
    env.update(extra_env, PYTHONUNBUFFERED="1")
    command = [sys.executable, "-m", "local_stack", "--port", str(http_port)]
    command += ["--moto-port", str(moto_port), "--schedule-seconds", str(schedule_seconds)]
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
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
    if not ready.wait(timeout):
        process.kill()
        raise RuntimeError("the local stack did not start:\n" + "".join(output[-40:]))
    return LocalStackProcess(
        f"http://127.0.0.1:{http_port}", f"http://127.0.0.1:{moto_port}", process, output
    )
