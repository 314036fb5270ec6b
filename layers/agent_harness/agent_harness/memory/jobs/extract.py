"""The flush's model calls over one window: a pass each (memory.facts.flow), then the
user's change of facts below the user. What they return are candidates for the gate,
each with the authority of what its call was shown and the marks that authority may
make; nothing here writes.

Each answer is read forgivingly and checked (a real model is sloppy): a mark anywhere
in a line counts, bracketed ids are ids, a mark naming no id (``(depends 4)``) and an id
copied into the text are taken out of the fact and counted (``FlushCheck_marks_removed``);
a line restating a current fact the call was shown (the same words once tags and marks
are aside) is not written again (``FlushCheck_restated``): a fact is one fact with one
id, however many flushes repeat it. A line holding an identifier (a number, code,
address or link) that nothing the call was given holds is invented, and not written
(``FlushCheck_invented_identifiers``). Which marks count is ``checked_marks``' (an
``until`` not after the window's day, or in a window whose conversation bounds nothing
in time, a model filling the field, is one it drops). A broken format gets one
corrective call (memory.jobs.calls).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.memory.facts.authority import (
    ASSISTANT,
    disown,
    distinctive,
    identifiers_in,
    rank,
    strip_tags,
    support,
)
from agent_harness.memory.facts.flow import FlushPass, floor_view, label_of, lowest
from agent_harness.memory.facts.gate import Candidate
from agent_harness.memory.facts.ledger import clean_bullets
from agent_harness.memory.facts.lifecycle import Cleaned, Marks, clean_marks, strip_marks
from agent_harness.memory.jobs.calls import ask
from agent_harness.memory.jobs.formats import flush_request, flush_text
from agent_harness.memory.jobs.prompts import (
    FLUSH_CONTEXT_CHARS,
    flush_messages,
    render_conversation,
)
from agent_harness.memory.jobs.related import (
    Shown,
    checked_marks,
    related_facts,
    time_bound_in,
    without_shown,
)

if TYPE_CHECKING:
    from agent_harness.ids import User
    from agent_harness.memory.engine.file_index import FileIndex
    from agent_harness.memory.facts.lifecycle import LedgerFact
    from agent_harness.models.base import Message
    from agent_harness.runtime import Runtime

__all__ = ["extract", "read_answer", "restates", "retire_below"]

logger = Logger(child=True)
metrics = Metrics()


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
    shown = related_facts(rt, ledgers, day, ledger, flush_pass.messages(), user)
    below: list[LedgerFact] = []
    if flush_pass.trusted:  # the user's call sees nothing below the user
        memory_md, ledger = floor_view(memory_md, floor), floor_view(ledger, floor)
        below = [f for f in shown.facts if rank(f.authority) < rank(floor)]
        shown = Shown([f for f in shown.facts if rank(f.authority) >= rank(floor)])
    # a fact of the day shown with its id is left out of the day's ledger, which gives
    # up the room it took: the request grows by the ids, not by the facts
    view, moved = without_shown(ledger, day, shown)
    conversation = render_conversation(flush_pass.turns)
    bounded = time_bound_in(conversation)
    messages = flush_messages(
        conversation,
        memory_md,
        view,
        day=day,
        zone=settings.timezone,
        prompt=settings.flush_prompt,
        context_chars=max(0, FLUSH_CONTEXT_CHARS - moved),
        current=[(f.id, f.text) for f in shown.facts],
    )
    lines = _ask(rt, user, messages, [f.id for f in shown.facts])
    given = "\n".join(m.content or "" for m in messages)
    # an answer that restates a fact and also retires it contradicts itself (a small
    # model answering a schema fills every field it is offered): the fact stays
    still_true = {
        found.id
        for line in lines
        if not line.marks.is_record()
        and (found := restated_fact(line.text, shown, label_of(line.text, flush_pass)))
    }
    candidates: list[tuple[Candidate, Marks]] = []
    for line in lines:
        # the model's tags are the format's, never its claim: stripped, not shown; who
        # said it is what the call was shown, never whose words the line matches
        text, marks = line.text, _sparing(line.marks, still_true)
        authority = label_of(text, flush_pass)
        if not marks.is_record() and restates(text, shown, authority):
            metrics.add_metric("FlushCheck_restated", MetricUnit.Count, 1)
            continue
        if not identifiers_in(text, given):  # a link or number nobody wrote: invented
            metrics.add_metric("FlushCheck_invented_identifiers", MetricUnit.Count, 1)
            continue
        kept = checked_marks(marks, shown, authority, day, bounded=bounded)
        if marks.is_record() and not kept.retracts:
            continue  # a retraction of nothing it may retire (or a confirmation): no line
        candidates.append((Candidate(disown(text, authority), authority), kept))
    return candidates, below


def _ask(rt: Runtime, user: User, messages: list[Message], ids: list[str]) -> list[Cleaned]:
    """One flush call (memory.jobs.formats: JSON whose marks may name only ``ids`` where
    the provider takes a schema, else text), its lines read and checked."""
    request, expected = flush_request(rt, messages, ids)
    return ask(rt, user, request, lambda c: read_answer(flush_text(c)), expected=expected).value


def read_answer(content: str) -> list[Cleaned]:
    """A flush answer's lines: bullets (``clean_bullets``: ModelOutputError when there
    are none and no NO_REPLY), the model's tags aside, marks read forgivingly (what the
    ledger cannot keep is taken out of the text and counted). A line with no words left
    is dropped."""
    out: list[Cleaned] = []
    for bullet in clean_bullets(content):
        line = clean_marks(strip_tags(bullet.removeprefix("- ")))
        if line.removed:
            metrics.add_metric("FlushCheck_marks_removed", MetricUnit.Count, len(line.removed))
            logger.info("marks taken out of a flushed line", extra={"removed": line.removed})
        if line.text or line.marks.is_record():
            out.append(line)
    return out


def _sparing(marks: Marks, still_true: set[str]) -> Marks:
    """``marks`` without retiring a fact the same answer restates (counted)."""
    spared = [i for i in (*marks.supersedes, *marks.retracts) if i in still_true]
    if not spared:
        return marks
    metrics.add_metric("FlushCheck_self_contradictions", MetricUnit.Count, len(spared))
    return replace(
        marks,
        supersedes=tuple(i for i in marks.supersedes if i not in still_true),
        retracts=tuple(i for i in marks.retracts if i not in still_true),
    )


def restates(text: str, shown: Shown, authority: str) -> bool:
    """Does ``text`` state a current fact the call was shown, of at least ``authority``
    (the user saying what an import held is news: the fact becomes the user's): the same
    words (case, spacing and end stop aside), or each holding all of the other's
    distinctive words, identifiers and negation alike?"""
    return restated_fact(text, shown, authority) is not None


def restated_fact(text: str, shown: Shown, authority: str) -> LedgerFact | None:
    """The shown fact ``text`` restates (``restates``), if any."""
    key = _words(text)
    words = distinctive(text)
    for fact in shown.facts:
        if rank(fact.authority) < rank(authority):
            continue
        if _words(fact.text) == key:
            return fact
        if (
            words
            and distinctive(fact.text) == words
            and support(text, fact.text) == 1.0
            and support(fact.text, text) == 1.0
        ):
            return fact
    return None


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
        for line in _ask(rt, user, messages, [f.id for f in facts]):
            text = line.text
            kept = checked_marks(line.marks, Shown(facts), authority, day)
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
