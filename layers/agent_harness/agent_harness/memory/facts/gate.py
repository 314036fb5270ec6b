"""The one gate every memory write passes: flushes, saves, edits, rollbacks, merges.

    a line of content, with its authority (facts.authority)
      -> structure neutralised: one line, no leading bullet, heading or quote, a leading
         authority tag shown as a claim ("(claimed user)"), no tag of our markup
         (markup.inert): read back, it is a fact and nothing else
      -> lifecycle marks stripped (``(supersedes <id>)``, ``(retracts <id>)``...,
         facts.lifecycle): no content retires a fact; corrections, the flush and the
         consolidation add marks after the gate
      -> secrets redacted (always), PII per ``HARNESS_REDACT_PII``       facts.checks
      -> an instruction (facts.checks.instruction_kind):
           injection, or a directive from below the user      -> held for review
           injection from the user, an import, a person       -> HARNESS_INSTRUCTION_FACTS
                                                                  (review, drop or mark)
         a claim about the user's payment details, accounts, credentials, contacts or
         identity by a tool result, the agent or an agent's save  -> held for review
      -> ``- [authority] text``

Held lines go to the user's review queue (memory.review), never into memory. Whatever
the writer, what it stores cannot be taken for a section header, a ``> source:`` line or
another authority: the system writes those, and content only ever follows a tag. The
instruction and sensitive-subject checks are best effort behind that structure.

Nothing here reads or writes storage; the same input always gives the same output.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from agent_harness import markup
from agent_harness.memory.facts.authority import (
    ASSISTANT,
    TOOL,
    TRUSTED,
    fact_line,
    neutralise_tags,
    parse_fact,
    strip_tags,
)
from agent_harness.memory.facts.checks import (
    INSTRUCTION_MARK,
    instruction_kind,
    redact_pii,
    redact_secrets,
    sensitive_subject,
)
from agent_harness.memory.facts.ledger import MAX_BULLET_CHARS, parse_header
from agent_harness.memory.facts.lifecycle import strip_marks

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from agent_harness.settings import Settings

__all__ = [
    "Admitted",
    "Candidate",
    "Held",
    "Policy",
    "admit",
    "admit_document",
    "clean_text",
]

InstructionPolicy = Literal["review", "drop", "mark"]
#: leading list, heading and quote markers, and tags, which content may not start with
_LEAD = re.compile(r"^(?:\s*(?:[-*+•]|\d{1,3}[.)]|#{1,6}|>+)(?=\s|$))+\s*")
_HEADING = re.compile(r"^(#{1,6})\s+(\S.*)$")
#: authorities whose claims about the user's accounts, contacts or identity are held:
#: a tool result, the agent, and what an agent saves (an MCP client is one too)
_CLAIMS_HELD = ("save:agent", "save:mcp", ASSISTANT)


@dataclass(frozen=True)
class Policy:
    pii: frozenset[str] = frozenset()
    instructions: InstructionPolicy = "review"

    @classmethod
    def of(cls, settings: Settings) -> Policy:
        return cls(settings.pii_kinds, settings.instruction_facts)


@dataclass(frozen=True)
class Candidate:
    text: str
    authority: str | None
    #: a line the version it replaces already held: its authority stands, and it is not
    #: judged again (an approved item stays approved); secrets and structure still are
    carried: bool = False


@dataclass(frozen=True)
class Held:
    """A line the gate keeps out of memory, for a person to approve or reject."""

    text: str
    authority: str
    #: "instruction", or the subject of a claim: payment, credential, contact, identity
    reason: str


@dataclass
class Admitted:
    lines: list[str] = field(default_factory=list)  # "- [authority] text"
    held: list[Held] = field(default_factory=list)
    #: what the gate did: secrets / pii replaced, instructions held, dropped or marked,
    #: claims held, lines left empty
    counts: Counter[str] = field(default_factory=Counter)


def clean_text(text: str, *, ours: bool = False) -> str:
    """One line of content made inert: whitespace collapsed (no newline can start a
    line of its own), leading markers stripped and a leading authority tag neutralised
    in view (``- [user] x`` -> ``(claimed user) x``; ``ours``: a stored fact's text,
    whose marks the system wrote, keeps them), our markup tags broken, and cut at the
    fact length. Other bracketed text (``[TODO] x``) is the content's own and stays."""
    one = " ".join(text.split())
    if not ours:
        one = neutralise_tags(_LEAD.sub("", one))
    one = markup.inert(one)
    if len(one) > MAX_BULLET_CHARS:
        one = one[: MAX_BULLET_CHARS - 1].rstrip() + "…"
    return one


def _judge(candidate: Candidate, text: str, policy: Policy, out: Admitted) -> str | None:
    """The line to store for an uncarried candidate, or None (held or dropped). A line
    without authority (a merge of lines from before authorities) is judged as the
    agent's words and stored without a tag."""
    authority = candidate.authority or ASSISTANT
    kind = instruction_kind(text)
    trusted = authority in TRUSTED
    if kind == "injection" or (kind == "directive" and not trusted):
        if trusted and policy.instructions == "drop":
            out.counts["instructions_dropped"] += 1
            return None
        if trusted and policy.instructions == "mark":
            out.counts["instructions_marked"] += 1
            return _line(authority, f"{INSTRUCTION_MARK} {text}")  # the mark is ours
        out.counts["instructions_held"] += 1
        out.held.append(Held(text, authority, "instruction"))
        return None
    if authority.startswith(TOOL) or authority in _CLAIMS_HELD:
        subject = sensitive_subject(text)
        if subject is not None:
            out.counts["claims_held"] += 1
            out.held.append(Held(text, authority, subject))
            return None
    return fact_line(candidate.authority, text)


def admit(candidates: Iterable[Candidate], policy: Policy, *, decided: bool = False) -> Admitted:
    """Every candidate through the gate, in order. ``decided``: a person already judged
    these lines (an approved review item): secrets and structure only."""
    out = Admitted()
    for line in _admit_each(candidates, policy, out, decided=decided):
        if line is not None:
            out.lines.append(line)
    return out


def _admit_each(
    candidates: Iterable[Candidate], policy: Policy, out: Admitted, *, decided: bool
) -> Iterable[str | None]:
    for candidate in candidates:
        text = clean_text(candidate.text, ours=candidate.carried)
        if not candidate.carried:  # only the system writes marks, after the gate
            text = strip_marks(text)
        text, secrets = redact_secrets(text)
        text, pii = redact_pii(text, policy.pii)
        out.counts["secrets"] += secrets
        out.counts["pii"] += pii
        if not text:
            out.counts["empty"] += 1
            yield None
        elif decided or (candidate.carried and candidate.authority):
            yield _line(candidate.authority, text)
        elif candidate.carried and instruction_kind(text) != "injection":
            yield _line(None, text)  # a line from before authorities: as it was
        else:
            yield _judge(candidate, text, policy, out)


def _line(authority: str | None, text: str) -> str:
    """A fact line of text already clean (a carried line keeps its marks)."""
    return f"- [{authority}] {text}" if authority else f"- {text}"


def _heading(line: str) -> str | None:
    """A heading of a whole document, made inert: never one a ledger section has."""
    match = _HEADING.match(line)
    if match is None:
        return None
    text, _ = redact_secrets(markup.inert(" ".join(match.group(2).split())))
    heading = f"{match.group(1)} {text[:MAX_BULLET_CHARS]}"
    return heading.replace(" — ", " - ") if parse_header(heading) else heading


def admit_document(
    text: str,
    *,
    previous: str,
    assign: Callable[[str], str | None],
    policy: Policy,
) -> tuple[str, Admitted]:
    """A whole MEMORY.md through the gate: headings kept (inert), every other line a
    fact. A line ``previous`` already held is carried as it was; any other takes the
    authority ``assign`` gives its text (a person's edit: ``operator``; a merge: who its
    words come from). Returns the document to store and what the gate did."""
    held_before = {line.rstrip() for line in previous.splitlines() if parse_fact(line)}
    out = Admitted()
    rendered: list[str] = []
    for raw in text.splitlines():
        line = raw.rstrip()
        heading = _heading(line) if line.lstrip().startswith("#") else None
        if not line.strip() or heading is not None:
            if heading is not None or (rendered and rendered[-1]):
                rendered.append(heading or "")
            continue
        fact = parse_fact(line)
        if fact is not None and line in held_before:
            candidate = Candidate(fact.text, fact.authority, carried=True)
        else:
            body = fact.text if fact is not None else line
            candidate = Candidate(body, assign(strip_tags(clean_text(body))))
        for stored in _admit_each([candidate], policy, out, decided=False):
            if stored is not None:
                out.lines.append(stored)
                rendered.append(stored)
    while rendered and not rendered[-1]:
        rendered.pop()
    return ("\n".join(rendered) + "\n" if rendered else ""), out
