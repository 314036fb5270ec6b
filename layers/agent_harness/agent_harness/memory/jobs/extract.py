"""The flush's model calls over one window: a pass each (memory.facts.flow), then the
user's change of facts below the user. What they return are candidates for the gate,
each with the authority of what its call was shown and the marks that authority may
make; nothing here writes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from agent_harness.memory.facts.authority import ASSISTANT, disown, rank, strip_tags
from agent_harness.memory.facts.flow import FlushPass, floor_view, label_of, lowest
from agent_harness.memory.facts.gate import Candidate
from agent_harness.memory.facts.ledger import clean_bullets
from agent_harness.memory.facts.lifecycle import Marks, split_marks, strip_marks
from agent_harness.memory.jobs.prompts import (
    FLUSH_CONTEXT_CHARS,
    flush_messages,
    render_conversation,
)
from agent_harness.memory.jobs.related import Shown, checked_marks, related_facts, without_shown
from agent_harness.models.base import ChatRequest
from agent_harness.usage import record_spend

if TYPE_CHECKING:
    from agent_harness.ids import User
    from agent_harness.memory.engine.file_index import FileIndex
    from agent_harness.memory.facts.lifecycle import LedgerFact
    from agent_harness.runtime import Runtime

__all__ = ["extract", "retire_below"]


def extract(
    rt: Runtime,
    user: User,
    day: str,
    ledger: str,
    memory_md: str,
    ledgers: list[tuple[str, FileIndex]],
    flush_pass: FlushPass,
) -> tuple[list[tuple[Candidate, Marks]], list[LedgerFact]]:
    """One model call of the window (memory.facts.flow): shown what the pass may see,
    its lines written with the pass's authority at most, and only the marks that
    authority may make. Also returns the related current facts it was not shown (below
    a trusted pass's authority), for ``retire_below``."""
    settings = rt.settings
    floor = flush_pass.floor
    shown = related_facts(rt, ledgers, day, ledger, flush_pass.messages())
    below: list[LedgerFact] = []
    if flush_pass.trusted:  # the user's call sees nothing below the user
        memory_md, ledger = floor_view(memory_md, floor), floor_view(ledger, floor)
        below = [f for f in shown.facts if rank(f.authority) < rank(floor)]
        shown = Shown([f for f in shown.facts if rank(f.authority) >= rank(floor)])
    # a fact of the day shown with its id is left out of the day's ledger, which gives
    # up the room it took: the request grows by the ids, not by the facts
    view, moved = without_shown(ledger, day, shown)
    messages = flush_messages(
        render_conversation(flush_pass.turns),
        memory_md,
        view,
        day=day,
        zone=settings.timezone,
        prompt=settings.flush_prompt,
        context_chars=max(0, FLUSH_CONTEXT_CHARS - moved),
        current=[(f.id, f.text) for f in shown.facts],
    )
    model = rt.models.for_role("memory")
    reply = model.complete(ChatRequest(messages=messages, purpose="flush"))
    record_spend(rt, user, "memory", reply.usage)
    bullets = clean_bullets(reply.message.content)  # raises ModelOutputError when malformed
    candidates: list[tuple[Candidate, Marks]] = []
    for bullet in bullets:
        # the model's tags are the format's, never its claim: stripped, not shown; who
        # said it is what the call was shown, never whose words the line matches
        text, marks = split_marks(strip_tags(bullet.removeprefix("- ")))
        authority = label_of(text, flush_pass)
        kept = checked_marks(marks, shown, authority)
        if marks.is_record() and not kept.retracts:
            continue  # a retraction of nothing it may retire (or a confirmation): no line
        candidates.append((Candidate(disown(text, authority), authority), kept))
    return candidates, below


#: the most authority levels below the user's one flush window is checked against
RETIRE_BELOW_CALLS = 2


def retire_below(
    rt: Runtime,
    user: User,
    day: str,
    flush_pass: FlushPass,
    found: list[tuple[Candidate, Marks]],
    below: list[LedgerFact],
) -> list[tuple[Candidate, Marks]]:
    """The user's change of a fact below the user (an app's save, an import, a tool's
    claim): for each authority level of the related facts below the pass's, one call
    shown the user's messages and those facts alone. Its output claims at most that
    level, so its marks may retire only facts of that level or lower (a planted fact
    can retire only its equals), and its lines are never written: a mark joins the
    user's own line that states the same words, or is written as a retraction record
    of that level."""
    levels: dict[int, list[LedgerFact]] = {}
    for fact in below:
        levels.setdefault(rank(fact.authority), []).append(fact)
    stated = {_words(c.text): n for n, (c, _) in enumerate(found)}
    out = list(found)
    model = rt.models.for_role("memory")
    for level in sorted(levels, reverse=True)[:RETIRE_BELOW_CALLS]:
        facts = levels[level]
        authority = lowest(f.authority or ASSISTANT for f in facts)
        messages = flush_messages(
            render_conversation(flush_pass.turns),
            "",
            "",
            day=day,
            zone=rt.settings.timezone,
            prompt=rt.settings.flush_prompt,
            current=[(f.id, f.text) for f in facts],
        )
        reply = model.complete(ChatRequest(messages=messages, purpose="flush"))
        record_spend(rt, user, "memory", reply.usage)
        for bullet in clean_bullets(reply.message.content):
            text, marks = split_marks(strip_tags(bullet.removeprefix("- ")))
            kept = checked_marks(marks, Shown(facts), authority)
            if not kept.changes():
                continue
            n = stated.get(_words(text))
            if n is not None:  # the user's own line states it: the mark joins it
                candidate, had = out[n]
                joined = replace(
                    had,
                    supersedes=tuple(dict.fromkeys(had.supersedes + kept.supersedes)),
                    retracts=tuple(dict.fromkeys(had.retracts + kept.retracts)),
                )
                out[n] = (candidate, joined)
                continue
            why = f"now: {text}" if text else "no longer true, in the user's words"
            for target in kept.changes():
                out.append((Candidate(why, authority), Marks(retracts=(target,))))
    return out


def _words(text: str) -> str:
    """A line's words for matching one call's line to another's (case and spacing
    aside)."""
    return " ".join(strip_marks(text).casefold().split()).rstrip(".!")
