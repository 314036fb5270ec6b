"""Tagged blocks used in prompts: one definition shared by the prompt builders and
the offline model that reads them, so the two cannot drift apart.

Content placed in a block has the block's closing tag neutralised, so data (a
MEMORY.md a human edited, a user message) cannot close the block and pose as
instructions.
"""

from __future__ import annotations

import re

__all__ = ["extract", "wrap"]

CONVERSATION = "conversation"
MEMORY_MD = "memory_md"
LEDGER_TODAY = "ledger_today"
CURRENT_MEMORY = "current_memory"
NEW_ENTRIES = "new_ledger_entries"
HARNESS_CONTEXT = "harness_context"
MEMORY = "memory"
RECALLED = "recalled_memory"
MESSAGES = "messages"


def _neutralise(text: str, tag: str) -> str:
    return re.sub(rf"</\s*{tag}\s*>", f"</{tag}\u200b>", text, flags=re.IGNORECASE)


def wrap(tag: str, text: str, **attrs: str) -> str:
    rendered = "".join(f' {k}="{v}"' for k, v in attrs.items())
    return f"<{tag}{rendered}>\n{_neutralise(text, tag).strip()}\n</{tag}>"


def extract(text: str, tag: str) -> str | None:
    """The body of the first ``<tag ...>`` block in ``text``, or None."""
    match = re.search(rf"<{tag}(?:\s[^>]*)?>\n?(.*?)\n?</{tag}>", text, flags=re.DOTALL)
    return match.group(1) if match else None
