"""What untrusted text the agent model of a turn has been shown: the authority its memory
writes may claim (a model's output claims at most the lowest authority of its input).

Read from the messages of the model request that produced a memory tool call:

    a tool result (the caller's, a remote MCP tool's)       -> tool:<name>
    memory_search / memory_get / memory_read results         -> the lowest tag among
                                                                their lines
    thread_search results                                    -> assistant, tool:<name>
                                                                of the past messages shown
    MEMORY.md, recall and scopes injected into the prompt    -> the lowest tag among
                                                                their fact lines
    the session's history: an imported assistant message,    -> assistant, tool:<name>
    a tool result (kept after a compaction summarised it)       (WorkingContext.untrusted)

A turn that saw nothing below the user is **clean**: the user's correction through
``memory_correct`` is the user's, as the user asked it. A turn that saw anything below
is **exposed**: retiring or changing a trusted fact, and promoting into a scope (a
maintainer's promotion too), is proposed for a person's review with what the turn was
shown, never applied; a fact below the user may still be corrected at the lowest
authority the turn saw. The acknowledgements of the agent's own memory writes are not
inputs (they echo what it sent).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent_harness.memory import MEMORY_TRAFFIC
from agent_harness.memory.facts.authority import (
    ASSISTANT,
    AUTHORITY_PATTERN,
    TRUSTED,
    USER,
    rank,
    tool_authority,
)
from agent_harness.memory.facts.flow import lowest

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agent_harness.models.base import Message
    from agent_harness.records import WorkingContext

__all__ = ["Exposure"]

_AUTHORITY = f"({AUTHORITY_PATTERN})"
#: a fact line's tag: at the start of a line of a prompt, after a search hit's "...: "
_TAG = re.compile(rf"(?:^|: )\s*(?:[-*+•]\s+)?\[{_AUTHORITY}\]", re.MULTILINE)
#: a memory_get row: "N|text"
_ROW = re.compile(r"^\d+\|(.*)$", re.MULTILINE)
_FACT_ROW = re.compile(rf"^\s*[-*+•]\s+\[{_AUTHORITY}\]")
_STRUCTURE_ROW = re.compile(r"^\s*(?:#|>|$)")
#: a thread_search row names the past message's role: "(assistant, <time>)"
_PAST_ROLE = re.compile(r"^Session .+?, turn \d+ \((assistant|tool)[,)]", re.MULTILINE)
_ACKNOWLEDGES = frozenset({"memory_save", "memory_correct", "memory_promote"})


@dataclass
class Exposure:
    """The authorities a turn's model has been shown below the user, with where."""

    seen: dict[str, str] = field(default_factory=dict)  # authority -> where it was seen

    @staticmethod
    def remember(context: WorkingContext, messages: Sequence[Message], imported: bool) -> None:
        """Keep in the session's context what ``messages``, added to it, hold below the
        user: its tool results, and (``imported``) the assistant's words the caller
        imported. Kept after a compaction summarised them (their summary derives from
        them); what every later turn of the session may claim is bounded by it."""
        found = Exposure.of_history(messages, imported)
        context.untrusted = {**found, **context.untrusted}

    @staticmethod
    def of_history(messages: Sequence[Message], imported: bool) -> dict[str, str]:
        """What ``messages`` hold below the user (see ``remember``)."""
        found: dict[str, str] = {}
        for message in messages:
            if message.role == "assistant" and imported and message.content.strip():
                found.setdefault(ASSISTANT, "an imported assistant message of the session")
            elif message.role == "tool" and (message.name or "tool") not in MEMORY_TRAFFIC:
                name = message.name or "tool"
                found.setdefault(tool_authority(name), f"a result of {name} in the session")
        return found

    def observe(self, messages: Sequence[Message]) -> None:
        """Record what ``messages`` (a model request's) hold below the user."""
        for message in messages:
            for authority, where in _below_user(message):
                self.seen.setdefault(authority, where)

    @property
    def exposed(self) -> bool:
        return bool(self.seen)

    @property
    def floor(self) -> str:
        """The authority a memory write of the turn may claim: ``user`` in a clean turn,
        else the lowest it saw."""
        return lowest(self.seen) if self.seen else USER

    def reasons(self) -> str:
        """What made the turn exposed, in words (for the review queue and the model)."""
        return "; ".join(f"{where} ({authority})" for authority, where in self.seen.items())


def _below_user(message: Message) -> list[tuple[str, str]]:
    if message.role == "tool":
        name = message.name or "tool"
        if name in _ACKNOWLEDGES:
            return []
        if name == "thread_search":
            return [
                (ASSISTANT if role == "assistant" else tool_authority("past"), "thread_search")
                for role in _PAST_ROLE.findall(message.content)
            ]
        if name in ("memory_get", "memory_read"):
            return _rows_below_user(message.content, name)
        if name != "memory_search":
            return [(tool_authority(name), f"a result of {name}")]
        where = "a line memory_search returned"
    elif message.role in ("system", "user"):
        where = "a fact in the memory injected into the prompt"
    else:
        return []
    return [(tag, where) for tag in _TAG.findall(message.content) if _below(tag)]


def _rows_below_user(content: str, name: str) -> list[tuple[str, str]]:
    """A file's rows as memory_get shows them: a fact below the user, or text that is
    no fact at all (a note, an evicted tool result: its words are nobody's we know)."""
    found = []
    where = f"a line {name} returned"
    for row in _ROW.findall(content) or content.splitlines():
        fact = _FACT_ROW.match(row)
        if fact is not None:
            if _below(fact.group(1)):
                found.append((fact.group(1), where))
        elif _STRUCTURE_ROW.match(row) is None:
            found.append((tool_authority(name), where))
    return found


def _below(tag: str) -> bool:
    return tag not in TRUSTED and rank(tag) < rank(USER)
