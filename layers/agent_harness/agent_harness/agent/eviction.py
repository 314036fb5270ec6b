"""Tool-result eviction: a tool result over ``eviction_max_chars`` (80,000) characters is
written to the workspace and replaced, in the conversation, by a placeholder with its
size, its path and a ~2,000-character head and tail.

    tool-results/<session>/<call id>-<sha256[:16]>.txt      content-addressed

The key depends on the content, so a retry after a crash writes the same key with the
same content: a 412 on the create-only write means "already there" (the reference failed
there and kept the huge result: docs/design.md#eviction-retry-fails). Search and read
tools are excluded: their output is what the model asked to see, and it is bounded already.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from agent_harness.errors import PreconditionFailedError, StoreError
from agent_harness.paths import tool_result_path

if TYPE_CHECKING:
    from agent_harness.ids import User
    from agent_harness.models.base import ToolCall
    from agent_harness.runtime import Runtime

__all__ = ["EXCLUDED_TOOLS", "Evictor"]

logger = Logger(child=True)

EXCLUDED_TOOLS = frozenset({"memory_search", "memory_get", "thread_search"})


class Evictor:
    def __init__(self, rt: Runtime, user: User, session_id: str) -> None:
        self._rt = rt
        self._user = user
        self._session_id = session_id

    def __call__(self, call: ToolCall, result: str) -> str:
        limit = self._rt.settings.eviction_max_chars
        if not limit or call.name in EXCLUDED_TOOLS or len(result) <= limit:
            return result
        digest = hashlib.sha256(result.encode()).hexdigest()[:16]
        call_id = re.sub(r"[^A-Za-z0-9_-]", "_", call.id)[:64] or "call"
        path = tool_result_path(self._session_id, call_id, digest)
        try:
            self._rt.store.put(self._user, path, result, create_only=True)
        except PreconditionFailedError:
            pass  # same key, same content: written by an earlier attempt
        except StoreError:
            logger.warning("eviction write failed; keeping the result inline", exc_info=True)
            return result
        preview = min(self._rt.settings.eviction_preview_chars, len(result) // 2)
        text = (
            f"Tool output was too large ({len(result):,} characters) and was saved to "
            f"`{path}`. Read parts of it with memory_get(path, startLine, endLine)."
        )
        if preview > 0:
            text += (
                f"\n\nFirst {preview:,} characters:\n{result[:preview]}"
                f"\n\nLast {preview:,} characters:\n{result[-preview:]}"
            )
        return text
