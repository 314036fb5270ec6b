"""Where the console's stack is: the CLI's own resolution (env file, CloudFormation
stack or the environment), done on first use so a missing stack is a message on the
page, and the console keeps running while the operator fixes it."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_harness.runtime import Runtime

__all__ = ["Target", "TargetError"]


class TargetError(Exception):
    """The stack cannot be reached or described; the message says why, for a person."""


@dataclass
class Target:
    env_file: str | None = None
    stack: str | None = None
    runtime: Runtime | None = None  # given: used as is (tests)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def label(self) -> str:
        if self.stack:
            return f"stack {self.stack}"
        if self.env_file:
            return f"env file {self.env_file}"
        return "the environment's HARNESS_* variables"

    def get(self) -> Runtime:
        with self._lock:
            if self.runtime is None:
                self.runtime = self._resolve()
            return self.runtime

    def _resolve(self) -> Runtime:
        from agent_harness.cli import runtime_from, stack_environment
        from agent_harness.errors import HarnessError

        try:
            return runtime_from(stack_environment(self.env_file, self.stack))
        except FileNotFoundError as exc:
            raise TargetError(f"the env file {exc.filename} does not exist") from None
        except (HarnessError, ValueError) as exc:
            raise TargetError(f"{self.label} is not usable: {exc}") from None
        except Exception as exc:  # botocore: no such stack, no credentials, no region
            raise TargetError(f"{self.label} cannot be reached: {_reason(exc)}") from None


def _reason(exc: Exception) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]
