"""Writes ``agent_harness_client/_async.py``: ``_sync.py`` made async.

    python clients/python/make_async.py

The async client is the sync one with ``async``/``await`` where it waits, httpx's
AsyncClient, ``asyncio.sleep`` and ``Async`` names: one source, two clients.
tests/unit/test_client_sync_async.py checks that ``_async.py`` is what this writes.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SYNC = HERE / "agent_harness_client" / "_sync.py"
ASYNC = HERE / "agent_harness_client" / "_async.py"

DOCSTRING = '''"""``AsyncAgentHarness``: the async client (httpx.AsyncClient), one method per route.

Generated from ``_sync.py`` by ``python clients/python/make_async.py``: do not edit it,
edit that one and regenerate this one (a test checks that it is current).
"""'''

NAMES = (
    "AgentHarness",
    "Sessions",
    "Memory",
    "Admin",
    "ConversationItems",
    "Conversations",
    "Responses",
    "ChatCompletions",
    "Chat",
)

REPLACEMENTS = (
    ("import time\n", "import asyncio\n"),
    ("time.sleep", "asyncio.sleep"),
    ("httpx.Client", "httpx.AsyncClient"),
    ("from collections.abc import Callable,", "from collections.abc import Awaitable, Callable,"),
    ("Callable[[float], None]", "Callable[[float], Awaitable[None]]"),
    ("return self._client._request(", "return await self._client._request("),
    ("return self._request(", "return await self._request("),
    ("response = self._http.send(", "response = await self._http.send("),
    ("self._http.close()", "await self._http.aclose()"),
    ("        self.close()\n", "        await self.close()\n"),
    ("def __enter__(", "def __aenter__("),
    ("def __exit__(", "def __aexit__("),
    ("The API's client (sync)", "The API's client (async)"),
)


def make_async(source: str) -> str:
    """``_sync.py``'s text, made async."""
    body = source.split('"""', 2)[2]  # past the module docstring
    for old, new in REPLACEMENTS:
        body = body.replace(old, new)
    # every method waits on the network, but a constructor
    body = re.sub(r"^(    )def (?!__init__)", r"\1async def ", body, flags=re.MULTILINE)
    body = re.sub(r"^(\s+)self\._sleep\(", r"\1await self._sleep(", body, flags=re.MULTILINE)
    names = "|".join(NAMES)
    body = re.sub(rf"\b({names})(?=\(|:|\)|\"\])", r"Async\1", body)
    return DOCSTRING + body


def formatted(source: str) -> str:
    """``source`` as ``ruff format`` (the repository's settings) writes it."""
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        raise RuntimeError("ruff is needed (make venv installs it into .venv)")
    done = subprocess.run(
        [ruff, "format", "--stdin-filename", str(ASYNC), "-"],
        input=source,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def generated() -> str:
    """What ``_async.py`` must hold."""
    return formatted(make_async(SYNC.read_text(encoding="utf-8")))


def main() -> int:
    ASYNC.write_text(generated(), encoding="utf-8")
    print(f"wrote {ASYNC.relative_to(HERE.parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
