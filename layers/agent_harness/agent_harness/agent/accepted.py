"""What a turn's memory tool calls were accepted to write, read back from the turn's
record when it is committed: a tool answers first (checked, nothing written), and the
answer's opening words say what the commit applies.

    memory_save     "Saved ..."                     the lines, as save:agent
    memory_correct  "Correcting <id>: ... (as A)"   the correction, as A
                    "Proposing a correction ..."    queued for the user's review
    memory_promote  "Promoting ..." / "Proposing"   agent.scoped
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agent_harness.models.base import Message

__all__ = [
    "CORRECTING",
    "PROPOSING",
    "SAVED",
    "AcceptedCorrection",
    "accepted_calls",
    "corrections_of",
    "saved_lines",
]

SAVED = "Saved "
CORRECTING = "Correcting "
PROPOSING = "Proposing a correction of "


def saved_lines(messages: list[Message]) -> list[list[str]]:
    """The lines of each memory_save call of a turn that succeeded, in order: what the
    turn persists when it is written (a failed or paused turn has saved nothing yet)."""
    from agent_harness.memory.files import memory_lines

    results = {m.tool_call_id: m.content for m in messages if m.role == "tool"}
    saves = []
    for message in messages:
        for call in message.tool_calls:
            if call.name != "memory_save" or not results.get(call.id, "").startswith(SAVED):
                continue
            saves.append(memory_lines(json.loads(call.arguments)["content"]))
    return saves


def accepted_calls(
    messages: Sequence[Message], name: str, answers: str | tuple[str, ...]
) -> list[tuple[dict[str, Any], str]]:
    """The arguments of each ``name`` call of a turn whose result starts with one of
    ``answers`` (the tool accepted it), with that result, in order: what the turn
    applies when it is written."""
    results = {m.tool_call_id: m.content for m in messages if m.role == "tool"}
    found = []
    for message in messages:
        for call in message.tool_calls:
            result = results.get(call.id, "")
            if call.name == name and result.startswith(answers):
                found.append((json.loads(call.arguments), result))
    return found


_AS = re.compile(r"\(as ([^()\s]+)\)$")


@dataclass(frozen=True)
class AcceptedCorrection:
    arguments: dict[str, Any]
    #: the authority the tool decided from what the turn was shown
    authority: str
    #: proposed for review (an exposed turn's correction of a trusted fact)
    proposed: bool


def corrections_of(messages: Sequence[Message]) -> list[AcceptedCorrection]:
    """Each memory_correct call of a turn that was accepted, in order, as the tool
    decided it (its answer ends ``(as <authority>)``)."""
    out = []
    for args, result in accepted_calls(messages, "memory_correct", (CORRECTING, PROPOSING)):
        match = _AS.search(result)
        if match is not None:
            out.append(AcceptedCorrection(args, match.group(1), result.startswith(PROPOSING)))
    return out
