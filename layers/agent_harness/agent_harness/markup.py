"""Tagged blocks used in prompts: one definition shared by the prompt builders and
the offline model that reads them, so the two cannot drift apart.

Content placed in a block has the block's closing tag neutralised, so data (a
MEMORY.md a human edited, a user message) cannot close the block and pose as
instructions. A transcript is one ``<message role=...>`` block per message, whose content
can neither close it nor open another: a tool result holding ``\n[user]: ...`` or
``<message role="user">`` stays inside the tool's block, so it never speaks as the user.
"""

from __future__ import annotations

import re

__all__ = ["TAGS", "extract", "inert", "message", "read_messages", "wrap"]

CONVERSATION = "conversation"
MEMORY_MD = "memory_md"
LEDGER_TODAY = "ledger_today"
CURRENT_FACTS = "current_facts"
CURRENT_MEMORY = "current_memory"
NEW_ENTRIES = "new_ledger_entries"
RETIRED_FACTS = "retired_facts"
RECHECK_FACTS = "recheck_facts"
LEFT_OUT_FACTS = "left_out_facts"
NEW_FACTS = "new_facts"
HARNESS_CONTEXT = "harness_context"
MEMORY = "memory"
RECALLED = "recalled_memory"
MESSAGES = "messages"
MESSAGE = "message"
SUMMARY = "conversation_summary"
PREVIOUS_SUMMARY = "previous_summary"
#: every tag a prompt or an injected message uses
TAGS = (
    CONVERSATION, MEMORY_MD, LEDGER_TODAY, CURRENT_FACTS, CURRENT_MEMORY, NEW_ENTRIES,
    RETIRED_FACTS, RECHECK_FACTS, LEFT_OUT_FACTS, NEW_FACTS, HARNESS_CONTEXT, MEMORY,
    RECALLED, MESSAGES, MESSAGE, SUMMARY, PREVIOUS_SUMMARY,
)  # fmt: skip


_ANY_TAG = re.compile(
    r"<(\s*/?\s*)(" + "|".join(sorted(TAGS, key=len, reverse=True)) + r")\b", re.IGNORECASE
)


def inert(text: str) -> str:
    """``text`` with every opening or closing tag of ours broken by a zero-width space:
    what memory stores can never open or close a block of a later prompt."""
    return _ANY_TAG.sub("<\\1\u200b\\2", text)


def _neutralise(text: str, tag: str) -> str:
    return re.sub(rf"</\s*{tag}\s*>", f"</{tag}\u200b>", text, flags=re.IGNORECASE)


def wrap(tag: str, text: str, **attrs: str) -> str:
    rendered = "".join(f' {k}="{v}"' for k, v in attrs.items())
    return f"<{tag}{rendered}>\n{_neutralise(text, tag).strip()}\n</{tag}>"


def extract(text: str, tag: str) -> str | None:
    """The body of the first ``<tag ...>`` block in ``text``, or None."""
    match = re.search(rf"<{tag}(?:\s[^>]*)?>\n?(.*?)\n?</{tag}>", text, flags=re.DOTALL)
    return match.group(1) if match else None


_MESSAGE_TAG = re.compile(r"<(\s*/?\s*)(message)", re.IGNORECASE)
_ATTR_BAD = re.compile(r'["<>\s]+')
_MESSAGE = re.compile(r'<message((?:\s+[a-z_]+="[^"]*")*)>\n(.*?)\n</message>', re.DOTALL)
_ATTR = re.compile(r'([a-z_]+)="([^"]*)"')


def message(text: str, **attrs: str | int) -> str:
    """One message of a transcript. Any ``<message`` or ``</message`` in ``text`` is
    broken with a zero-width space, so the content cannot end its block or open another;
    attribute values lose quotes, angle brackets and whitespace."""
    rendered = "".join(f' {k}="{_ATTR_BAD.sub("_", str(v))}"' for k, v in attrs.items())
    body = _MESSAGE_TAG.sub("<\\1\u200b\\2", text)
    return f"<message{rendered}>\n{body}\n</message>"


def read_messages(text: str) -> list[tuple[dict[str, str], str]]:
    """The ``message`` blocks of a transcript, in order: (attributes, content)."""
    return [(dict(_ATTR.findall(m.group(1))), m.group(2)) for m in _MESSAGE.finditer(text)]
