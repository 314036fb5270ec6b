"""Lambda containers of the local stack: each one a process of its own.

Lambda runs one invocation at a time in a container and shares nothing between
containers. Threads of one process cannot give that: Powertools keeps the event it is
resolving on a class (``BaseRouter.current_event``), and whatever else a library keeps at
class or module level is shared by every copy of a handler module in the process. So each
container here is a process, forked from a clean fork server (no threads, no moto, no
handler imported), that imports its function's handler under the function's environment
once (its cold start) and then serves one event at a time over a pipe, warm, until the
stack stops.

    HTTP thread / SQS poller / timer ──event──▶ ContainerPool.invoke
        an idle warm container, else a new one (a cold start), at most ``limit`` at once
        (more requests wait for a free one, as a throttled Lambda's callers retry)
                                    ──pipe──▶ container process: lambda_handler(event, ctx)
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import os
import signal
import sys
import threading
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

#: third-party modules the fork server imports once, so a cold start forks them ready;
#: nothing of ours (the layer and the handlers read their environment when imported)
_PRELOAD = ["boto3", "botocore.session", "pydantic", "httpx"]
#: how long a container may take to import its handler (a cold start) before it is killed
INIT_TIMEOUT_SECONDS = 120
#: how long past the function's timeout an invocation may run before its container is
#: killed (the handler's own deadline ends model work before the timeout)
_KILL_GRACE_SECONDS = 5


class ContainerFailed(RuntimeError):
    """The container did not answer: it crashed, or ran past its timeout and was killed
    (Lambda answers such an invocation with an error, and starts a new container)."""


@dataclass(frozen=True)
class FunctionSpec:
    """What a container of one function needs: its handler and its environment."""

    function_id: str
    module_name: str
    handler_path: str
    environment: dict[str, str]
    timeout_seconds: int
    #: ``sys.setswitchinterval`` in the container (None: Python's default)
    switch_interval: float | None = None


def _context() -> Any:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    return context


def _serve(spec: FunctionSpec, conn: Connection) -> None:
    """The container process: import the handler (init), then one event at a time."""
    from local_stack.aws_calls import record_calls
    from local_stack.lambdas import context_for

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the stack, which stops us
    os.environ.clear()
    os.environ.update(spec.environment)
    if spec.switch_interval:
        sys.setswitchinterval(spec.switch_interval)
    record_calls(spec.function_id)  # when $LOCAL_AWS_CALL_LOG is set (the IAM test)
    try:
        module_spec = importlib.util.spec_from_file_location(spec.module_name, spec.handler_path)
        assert module_spec is not None and module_spec.loader is not None
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[spec.module_name] = module
        module_spec.loader.exec_module(module)
    except BaseException:
        conn.send(("init_error", traceback.format_exc()))
        return
    conn.send(("ready", os.getpid()))
    while True:
        try:
            event = conn.recv()
        except (EOFError, OSError):  # the stack went away
            return
        try:
            result = module.lambda_handler(
                event, context_for(spec.function_id, spec.timeout_seconds)
            )
        except Exception as exc:  # an invocation error; the container stays warm
            conn.send(("error", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
        else:
            conn.send(("ok", result))


class Container:
    """One container process of a function; ``invoke`` one event at a time."""

    def __init__(self, spec: FunctionSpec, process_context: Any) -> None:
        self.spec = spec
        self._conn, child = process_context.Pipe()
        self.process: BaseProcess = process_context.Process(
            target=_serve, args=(spec, child), name=f"container:{spec.function_id}", daemon=True
        )
        self.process.start()
        child.close()
        answer = self._receive(INIT_TIMEOUT_SECONDS, "its init")
        if answer[0] != "ready":
            self.stop()
            raise ContainerFailed(f"{spec.function_id} failed to start:\n{answer[1]}")

    def invoke(self, event: dict[str, Any]) -> Any:
        """The handler's result; its exception is re-raised as a ``RuntimeError``."""
        try:
            self._conn.send(event)
        except (OSError, ValueError) as exc:
            self.stop()
            raise ContainerFailed(f"{self.spec.function_id} is gone: {exc}") from exc
        answer = self._receive(self.spec.timeout_seconds + _KILL_GRACE_SECONDS, "the event")
        if answer[0] == "error":
            raise RuntimeError(answer[1])
        return answer[1]

    def _receive(self, timeout: float, waiting_for: str) -> tuple[Any, ...]:
        try:
            if self._conn.poll(timeout):
                return tuple(self._conn.recv())
        except (EOFError, OSError):
            pass
        else:
            self.stop()
            raise ContainerFailed(
                f"{self.spec.function_id} did not answer {waiting_for} in {timeout:g} s: killed"
            )
        self.stop()
        code = self.process.exitcode
        raise ContainerFailed(f"{self.spec.function_id} crashed (exit code {code})")

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        self._conn.close()


class ContainerPool:
    """The containers of one function: warm ones are reused, a new one is cold-started
    when all are busy, and at most ``limit`` serve at once (others wait for one)."""

    def __init__(self, spec: FunctionSpec, limit: int, *, warm: int = 1) -> None:
        if limit < 1:
            raise ValueError("a function needs at least one container")
        self.spec = spec
        self.limit = limit
        self._process_context = _context()
        self._slots = threading.BoundedSemaphore(limit)
        self._lock = threading.Lock()
        self._idle: list[Container] = []
        self._all: list[Container] = []
        self.started = 0
        for _ in range(min(warm, limit)):
            self._idle.append(self._start())

    def _start(self) -> Container:
        container = Container(self.spec, self._process_context)
        with self._lock:
            self._all.append(container)
            self.started += 1
        return container

    def invoke(self, event: dict[str, Any]) -> Any:
        with self._slots:
            with self._lock:
                container = self._idle.pop() if self._idle else None
            if container is None:
                container = self._start()
            try:
                result = container.invoke(event)
            except ContainerFailed:
                with self._lock:
                    self._all.remove(container)
                raise
            except BaseException:
                with self._lock:
                    self._idle.append(container)
                raise
            with self._lock:
                self._idle.append(container)
            return result

    @property
    def running(self) -> int:
        with self._lock:
            return len(self._all)

    def stop(self) -> None:
        with self._lock:
            containers, self._all, self._idle = list(self._all), [], []
        for container in containers:
            container.stop()
