"""Token counting with tiktoken, offline.

The BPE file ships in the layer (``tiktoken_cache/``, see local_stack/tiktoken_cache.py)
and tiktoken finds it through ``TIKTOKEN_CACHE_DIR``. Nothing is loaded at import:
the encoding is loaded on first use (about 0.2 s for cl100k_base) and cached for the
life of the container. No network is ever needed.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import tiktoken

__all__ = ["DEFAULT_CACHE_DIR", "TokenCounter", "Truncated"]

#: ``/opt/python/tiktoken_cache`` in the layer, ``layers/agent_harness/tiktoken_cache`` in the repo
DEFAULT_CACHE_DIR = Path(__file__).resolve().parent.parent / "tiktoken_cache"


class Truncated(NamedTuple):
    text: str
    tokens: int
    original_tokens: int
    truncated: bool


@cache
def _load(encoding: str, cache_dir: str) -> tiktoken.Encoding:
    # tiktoken reads TIKTOKEN_CACHE_DIR when it resolves the file; set it before loading.
    os.environ["TIKTOKEN_CACHE_DIR"] = cache_dir
    import tiktoken  # deferred: keeps the import of every handler cheap

    return tiktoken.get_encoding(encoding)


class TokenCounter:
    """Counts and trims text in tokens of one encoding."""

    def __init__(self, encoding: str = "cl100k_base", cache_dir: str | None = None) -> None:
        self.encoding_name = encoding
        self.cache_dir = cache_dir or str(DEFAULT_CACHE_DIR)

    @property
    def _enc(self) -> tiktoken.Encoding:
        return _load(self.encoding_name, self.cache_dir)

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self._enc.encode(text, disallowed_special=()))

    def head_tail(self, text: str, max_tokens: int, notice: str) -> Truncated:
        """Fit ``text`` in ``max_tokens``: keep the head and the tail, ``notice`` between.

        The head of MEMORY.md holds its curated sections and the tail the newest saves,
        so both ends survive (the reference kept only the head:
        docs/design.md#uncapped-memory-injection). Cuts fall on line boundaries where
        possible so no fact is half kept.
        """
        tokens = self._enc.encode(text, disallowed_special=())
        total = len(tokens)
        if total <= max_tokens:
            return Truncated(text, total, total, False)
        rendered_notice = notice.format(kept="{kept}", total=total)
        budget = max(max_tokens - self.count(rendered_notice) - 8, 0)
        head_budget = (budget * 2) // 3
        tail_budget = budget - head_budget
        head = self._enc.decode(tokens[:head_budget])
        tail = self._enc.decode(tokens[total - tail_budget :]) if tail_budget else ""
        if "\n" in head:
            head = head[: head.rindex("\n") + 1]
        if "\n" in tail:
            tail = tail[tail.index("\n") + 1 :]
        kept = self.count(head) + self.count(tail)
        joined = (
            f"{head.rstrip()}\n\n{rendered_notice.format(kept=kept)}\n\n{tail.lstrip()}".strip()
        )
        return Truncated(joined, self.count(joined), total, True)
