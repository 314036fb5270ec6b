"""Automatic recall: before a turn's first model call, the lines of the user's memory
most relevant to the new message, so the model sees them without calling a tool.

    query    the new message, with the previous user message when the new one is short
    rank     ``ranked`` over MEMORY.md and every ledger (archive included), without the
             thread segments: the turn's own GET of MEMORY.md, one LIST of memory/ beside
             the turn's reads, GETs only of the ledgers the container has not cached
    floor    a line must hold at least ``recall_min_score`` of the message's words,
             weighted by rarity (``coverage``): no memory beats a wrong one
    skip     lines the injected MEMORY.md already shows (or a line with the same words);
             facts no longer current (memory.engine.truth), and MEMORY.md lines
             restating one; a fact whose ground changed is labelled possibly outdated
    order    best first; equal scores newest first; of two chosen facts about one
             thing, the newer first (the budget chooses by rank alone)
    render   each line with its ``path#line``; a ledger's path is its day
    messages with ``recall_messages`` on, past messages too (the thread segments, ranked
             as thread_search ranks them, the current session's left out since the model
             has them), of the roles ``recall_message_roles`` names (the user's own by
             default), each through the gate's checks as a written fact would be: memory
             lines and messages alternate, each best first
    redact   every line shown without its secrets, as the gate redacts a fact's (a
             message through the gate's checks, a memory line ``without_secrets``):
             a MEMORY.md line edited by hand or a segment indexed before a pattern
             existed shows ``[redacted secret]`` too; only lines that would be shown
    budget   whole lines until ``recall_max_tokens`` less the message's frame (agent.recall)

The lines reach the model as reference data, never instructions (agent.context), and
the turn's log names every line it was shown (``MemoryInjection.recalled``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from itertools import chain, zip_longest
from typing import TYPE_CHECKING

from agent_harness.memory.engine import index
from agent_harness.memory.engine.fusion import coverage, fuse
from agent_harness.memory.engine.index import search_files
from agent_harness.memory.facts.authority import (
    ASSISTANT,
    distinctive,
    message_authority,
    parse_fact,
    strip_tags,
)
from agent_harness.memory.facts.gate import Candidate, Policy, admit
from agent_harness.memory.facts.secrets import SECRET_MARK, without_secrets
from agent_harness.paths import ledger_date
from agent_harness.text import WORD, fold, terms

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import tzinfo

    from agent_harness.memory.engine.file_index import FileIndex
    from agent_harness.memory.engine.index import LinkedTexts
    from agent_harness.memory.engine.segments import Segment
    from agent_harness.memory.engine.truth import Truth
    from agent_harness.tokens import TokenCounter

__all__ = [
    "Meaning",
    "PastMessages",
    "RecallReport",
    "Recalled",
    "coverage",
    "recall_query",
    "select_lines",
]

#: a message with fewer distinct terms than this is searched with the one before it
SHORT_QUERY_TERMS = 4
#: how many ranked hits are considered before the floor, the skips and the budget: at
#: least this many, and more for a larger budget (lines MEMORY.md shows are skipped)
MIN_CANDIDATES = 60
#: a recalled line's tokens, roughly, for sizing the candidates to the budget
LINE_TOKENS = 10
#: a past message longer than this is cut (an assistant's long answer would take the
#: budget of a dozen lines); LoCoMo's longest message is 497 characters
MESSAGE_CHARS = 600


#: recall by meaning: each line key's cosine with the message, and the model's floor
Meaning = tuple[dict[str, float], float]


@dataclass(frozen=True)
class Recalled:
    """One recalled line and where it came from."""

    path: str
    line: int
    text: str
    day: str | None
    score: float
    #: a past message's role, session and turn (None: a line of MEMORY.md or a ledger)
    said: tuple[str, str, int] | None = None
    #: who the words come from (memory.facts.authority): a fact's tag, a message's role
    authority: str | None = None
    #: a current fact that depended on one since retired (memory.engine.truth)
    outdated: bool = False
    #: the bound shared scope whose memory holds the line (None: the user's own)
    scope: str | None = None

    @property
    def source(self) -> str:
        """``path#line``: a memory file's line, or a past message's line in its month's
        thread segment; a shared scope's line is ``<scope>/path#line``."""
        where = f"{self.path}#{self.line}"
        return f"{self.scope}/{where}" if self.scope else where

    def render(self) -> str:
        """The line as the model sees it, with its source. A ledger's path is its day
        (``day`` is read from it), so the day is not said twice: it was a third of an
        observation's tokens, and a budget holds that many more lines. A past message
        says who said it, where and when instead of its segment's path."""
        if self.said is not None:
            role, session, turn = self.said
            text = self.text  # through the gate: one line, at most a fact's length
            if len(text) > MESSAGE_CHARS:
                text = text[:MESSAGE_CHARS].rstrip() + "…"
            said = f"[{self.authority}] " if self.authority else ""
            return f"- {said}{text} ({role}, session {session} turn {turn}, {self.day})"
        note = "; possibly outdated: a fact it depends on changed" if self.outdated else ""
        label = f"[scope {self.scope}] " if self.scope else ""
        text = self.text.strip().lstrip("-*• ").strip()
        return f"- {label}{text} ({self.path}#{self.line}{note})"


@dataclass
class RecallReport:
    """What recall found and did not show (a turn's memory record keeps it)."""

    #: ranked candidates under the floor
    below_floor: int = 0
    #: past messages the gate's checks kept out
    held: int = 0
    #: lines over the floor that the token budget left out
    over_budget: list[Recalled] = field(default_factory=list)
    #: lines of facts no longer current (superseded, retracted, expired), left out
    retired: int = 0


@dataclass(frozen=True)
class PastMessages:
    """What recalling past messages ranks: the user's thread segments, with the ledger
    facts naming their turns (as thread_search ranks them), leaving out ``session``."""

    segments: list[tuple[str, Segment]]
    facts: LinkedTexts | None
    session: str | None
    zone: tzinfo
    #: whose messages may be recalled (``HARNESS_RECALL_MESSAGE_ROLES``)
    roles: frozenset[str] = frozenset({"user"})
    #: the checks a written fact passes, which a recalled message passes too
    policy: Policy = field(default_factory=Policy)


def recall_query(message: str, previous: str | None) -> str:
    """The text to search with: a short message ("and the second one?") is searched
    together with the user's message before it."""
    if previous and len(set(terms(message))) < SHORT_QUERY_TERMS:
        return f"{previous}\n{message}"
    return message


def _words(line: str) -> str:
    return " ".join(WORD.findall(fold(strip_tags(line.lstrip("-*• ")))))


def select_lines(
    files: list[tuple[str, FileIndex]],
    query: str,
    *,
    shown: str,
    counter: TokenCounter,
    max_tokens: int,
    min_score: float,
    messages: PastMessages | None = None,
    in_context: Sequence[str] = (),
    report: RecallReport | None = None,
    truth: Truth | None = None,
    meaning: Meaning | None = None,
) -> list[Recalled]:
    """The lines to inject for ``query``: ranked, holding at least ``min_score`` of its
    words by rarity (or, with ``meaning``, above the model's floor by meaning:
    memory.engine.fusion), not already ``shown`` (the MEMORY.md text the model gets anyway) nor
    one of the messages ``in_context``, best first with newest-first ties, whole lines
    within ``max_tokens``. With ``messages``, past messages chosen the same way
    alternate with the memory lines. ``report`` learns what was left out. With
    ``truth``, only current facts: no superseded, retracted or expired ledger fact, no
    MEMORY.md line restating one; a fact whose ground changed is labelled; and of two
    facts about one thing, the newer comes first."""
    if max_tokens <= 0 or not query.strip():
        return []
    report = report if report is not None else RecallReport()
    seen = {w for w in [*map(_words, shown.splitlines()), *map(_words, in_context)] if w}
    candidates = max(MIN_CANDIDATES, max_tokens // LINE_TOKENS)
    found = _memory_lines(files, query, candidates, min_score, seen, report, truth, meaning)
    if messages is not None and messages.segments:
        said = _past_messages(messages, query, candidates, min_score, seen, report, in_context)
        found = [r for r in chain.from_iterable(zip_longest(found, said)) if r is not None]
    chosen: list[Recalled] = []
    used = 0
    for line in found:
        cost = counter.count(line.render()) + 1
        if used + cost > max_tokens:
            report.over_budget.append(line)
            continue
        # the gate's checks (a message) or its secret redaction (a memory line), only on
        # the lines that would be shown: a fraction of a millisecond each, on the hot path
        shown_line = _shown(line, messages.policy if messages is not None else None)
        if shown_line is None:
            report.held += 1
            continue
        if shown_line.text != line.text:  # "[redacted secret]" may be longer than a PIN
            cost = counter.count(shown_line.render()) + 1
            if used + cost > max_tokens:
                report.over_budget.append(shown_line)
                continue
        chosen.append(shown_line)
        used += cost
    return _newest_first_in_conflicts(chosen) if truth is not None else chosen


def _best_first(found: list[Recalled]) -> list[Recalled]:
    found.sort(key=lambda r: r.day or "", reverse=True)  # stable: the next sort keeps it
    found.sort(key=lambda r: -r.score)
    return found


def _memory_lines(
    files: list[tuple[str, FileIndex]],
    query: str,
    limit: int,
    min_score: float,
    seen: set[str],
    report: RecallReport,
    truth: Truth | None = None,
    meaning: Meaning | None = None,
) -> list[Recalled]:
    hits = search_files(files, query, "ranked", limit)
    shares = coverage(files, query, hits)
    if meaning is not None:  # fused: a line found by its words alone still needs min_score
        cosines, min_cosine = meaning
        hits = fuse(files, query, hits, cosines, limit, min_cosine, min_coverage=min_score)
        shares = [1.0] * len(hits)
    found: list[Recalled] = []
    for hit, share in zip(hits, shares, strict=True):
        words = _words(hit.text)
        if hit.score is not None and share < min_score:
            report.below_floor += 1
            continue
        if hit.score is None or not words or words in seen:
            continue
        outdated = False
        if truth is not None:
            if truth.restated(hit.text) is not None:
                report.retired += 1
                continue
            known = truth.fact(hit.path, hit.text)
            status = truth.status(known) if known is not None else None
            if known is not None and status is not None:
                if known.is_record or status.state != "current":
                    report.retired += 1
                    continue
                outdated = bool(status.recheck)
        seen.add(words)
        date = ledger_date(hit.path)
        day = f"{date[0]:04d}-{date[1]:02d}-{date[2]:02d}" if date else None
        fact = parse_fact(hit.text)
        authority = fact.authority if fact is not None else None
        found.append(
            Recalled(hit.path, hit.line, hit.text, day, hit.score, None, authority, outdated)
        )
    return _best_first(found)


#: two facts sharing this share of their distinctive words are about one thing
CONFLICT_OVERLAP = 0.5


def _newest_first_in_conflicts(chosen: list[Recalled]) -> list[Recalled]:
    """Of two chosen current facts about one thing that nobody marked (the memory model
    missed it), the newer moves just before the older: both are shown, with their days,
    and the agent model judges (docs/design.md). Only the memory lines move, among the
    places they hold: what fits the budget is chosen by rank alone."""
    slots = [n for n, r in enumerate(chosen) if r.said is None]
    found = [chosen[n] for n in slots]
    words = [distinctive(r.text) for r in found]
    out = list(found)
    for j in range(len(found)):
        for i in range(j):
            a, b = words[i], words[j]
            older, newer = found[i], found[j]
            if not a or not b or (older.day or "") >= (newer.day or ""):
                continue
            if len(a & b) / min(len(a), len(b)) >= CONFLICT_OVERLAP and a != b:
                out.remove(newer)
                out.insert(out.index(older), newer)
                break
    placed = list(chosen)
    for n, line in zip(slots, out, strict=True):
        placed[n] = line
    return placed


def _past_messages(
    messages: PastMessages,
    query: str,
    limit: int,
    min_score: float,
    seen: set[str],
    report: RecallReport,
    in_context: Sequence[str] = (),
) -> list[Recalled]:
    """The best past messages of other sessions, as ``Recalled`` lines. A message
    ``in_context`` holds is left out also when its segment row was redacted (compared
    with the context redacted the same way, only when a row was)."""
    by_path = dict(messages.segments)
    indexes = [(path, segment.index) for path, segment in messages.segments]
    # the current session's messages rank high (they share its words) and are left out
    own = 0
    if messages.session is not None:
        own = sum(
            s.index.links.sessions.count(messages.session)
            for s in by_path.values()
            if s.index.links
        )
    # messages of other roles rank too and are left out after: the candidates are many
    # times what a budget shows, so the user's own still fill it
    hits = search_files(indexes, query, "ranked", limit + own, messages.facts, index.FACT_WEIGHT)
    found: list[Recalled] = []
    redacted_context: set[str] | None = None
    for hit, share in zip(hits, coverage(indexes, query, hits), strict=True):
        session, turn, role, at = by_path[hit.path].meta(hit.line - 1)
        words = _words(hit.text)
        if session == messages.session or hit.score is None:
            continue
        if share < min_score:
            report.below_floor += 1
            continue
        if not words or words in seen:
            continue
        if SECRET_MARK in hit.text and in_context:
            if redacted_context is None:  # rare: redact the context once, only then
                redacted_context = {_words(without_secrets(t)) for t in in_context}
            if words in redacted_context:
                continue
        if role not in messages.roles:
            report.held += 1
            continue
        seen.add(words)
        day = _day(at, messages.zone)
        said = (role, session, turn)
        found.append(Recalled(hit.path, hit.line, hit.text, day, hit.score, said))
        if len(found) >= limit:
            break
    return _best_first(found)


_TOOL_RESULT = re.compile(r"^\[tool_result: ([^\]]*)\] ")


def _shown(line: Recalled, policy: Policy | None) -> Recalled | None:
    """A line as recall shows it: a past message through the gate's checks (``_checked``:
    None when the gate would hold it), a memory line without its secrets."""
    if line.said is not None and policy is not None:
        return _checked(line, policy)
    text = without_secrets(line.text)
    return line if text == line.text else replace(line, text=text)


def _checked(line: Recalled, policy: Policy) -> Recalled | None:
    """A past message as the gate would store it (its authority, its text made inert and
    redacted), or None when the gate would hold or drop it: recall never replays what
    memory would not keep."""
    role, text, name = line.said[0] if line.said else "user", line.text, None
    if role == "tool" and (match := _TOOL_RESULT.match(text)):
        name, text = match.group(1), text[match.end() :]
    authority = message_authority(role, name, imported=False) or ASSISTANT
    admitted = admit([Candidate(text, authority)], policy)
    fact = parse_fact(admitted.lines[0]) if admitted.lines else None
    if fact is None:
        return None
    return replace(line, text=fact.text, authority=authority)


def _day(at: str, zone: tzinfo) -> str:
    """A message's day in the configured zone (its time as stored if that fails)."""
    try:
        return datetime.fromisoformat(at).astimezone(zone).date().isoformat()
    except ValueError:
        return at[:10]
