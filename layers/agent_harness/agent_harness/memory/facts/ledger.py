"""The daily ledger format (layer 1): ``memory/YYYY-MM-DD.md``, append-only.

Each append is one section with its time and, for flushes, its provenance; every fact
line carries its authority (memory.facts.authority owns the tag):

    ## Flush — 2026-11-30T09:12:44Z
    > source: session=trip-planning turns=3-5 model=openai:gpt-4.1-mini
    - [user] The user prefers window seats on flights.

The ``source`` line right under a ``## Flush`` header makes flushes idempotent: before
appending, the flush reads the day's file and skips every turn a flush section already
covers, so a redelivered or duplicated job never writes a fact twice; no stored content
can forge that pair (memory.facts.gate). Saved facts may name their turns too
(``> source: session=s1 turns=7 via=memory_save``); those never count as flushed, and
ranked search reads a fact together with the turns its section names. Ledger days and
header times use one configured zone (the reference mixed local dates with UTC headers).
This module is the one owner of the section header and ``> source:`` line formats.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent_harness.clock import iso
from agent_harness.errors import ModelOutputError

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime
    from zoneinfo import ZoneInfo

    from agent_harness.ids import User

__all__ = [
    "BY_FIELD",
    "NO_REPLY",
    "Source",
    "by_field",
    "by_writer",
    "clean_bullets",
    "covered_turns",
    "day_of",
    "is_heading",
    "is_structure",
    "new_facts",
    "parse_header",
    "parse_source",
    "render_section",
    "saved_by",
    "source_fields",
    "source_of",
    "writer_named",
]

NO_REPLY = "NO_REPLY"
SOURCE_PREFIX = "> source:"
_SOURCE_LINE = re.compile(r"^> source: (.*)$", re.MULTILINE)
_HEADER = re.compile(r"^## (.+?) — (\S+)\s*$")
_STRUCTURE = re.compile(r"^\s*(?:#{1,6}\s|> source:)")
_FIELD = re.compile(r"(\w+)=(\S+)")
_BULLET = re.compile(r"^\s*(?:[-*•+]|\d{1,3}[.)])\s+(.*\S)\s*$")
_TAG = re.compile(r"^\[[a-z]+(?::[\w.\-]+)?\]\s+")
MAX_BULLETS = 50
MAX_BULLET_CHARS = 600


@dataclass(frozen=True)
class Source:
    """Where a section came from: the session, its turns, and the model that wrote it
    or the tool that saved it (the time is the section header's). A section without
    ``via`` is a flush of those turns."""

    session_id: str
    turns: tuple[int, ...]
    model: str | None = None
    via: str | None = None

    def fields(self) -> str:
        """What follows ``> source:``."""
        line = f"session={self.session_id} turns={format_turns(self.turns)}"
        if self.model:
            line += " model=" + "".join(self.model.split())
        if self.via:
            line += f" via={self.via}"
        return line

    def render(self) -> str:
        return f"{SOURCE_PREFIX} {self.fields()}"


def is_heading(line: str) -> bool:
    return line.startswith("#")


def is_structure(line: str) -> bool:
    """A Markdown heading or a ``> source:`` line: the frame of a section, not a fact."""
    return _STRUCTURE.match(line) is not None


def parse_header(line: str) -> tuple[str, str] | None:
    """(kind, time) of a section header ``## Flush — 2026-11-30T09:12:44Z``."""
    match = _HEADER.match(line)
    return (match.group(1), match.group(2)) if match else None


def source_fields(line: str) -> str | None:
    """The raw fields of a ``> source:`` line (``session=s1 turns=3-5 model=...``)."""
    match = _SOURCE_LINE.match(line)
    return match.group(1) if match else None


#: a source line's field naming who wrote into a shared scope (``by=<user key>``)
BY_FIELD = re.compile(r"\bby=\S+")


def by_field(user: User) -> str:
    """The source-line field naming the member who wrote into a shared scope."""
    return f"by={user.key}"


def by_writer(user: User) -> str:
    """The same member in a version's writer label (``api: memory_save by <key>``)."""
    return f"by {user.key}"


def writer_named(user: User) -> re.Pattern[str]:
    """Where a source line or a writer label names ``user`` (``by_field``,
    ``by_writer``), their key whole: what forgetting them looks for."""
    return re.compile(rf"(?<=\bby[= ]){re.escape(user.key)}(?![A-Za-z0-9_%-])")


def saved_by(origin: str, via: str) -> str:
    """The source line of a save that names no turns: who saved it and through what."""
    return f"{SOURCE_PREFIX} {origin} via={via}"


def parse_source(line: str) -> Source | None:
    """The session and turns a ``> source:`` line names (``turn=`` is the older spelling
    of saves); ``None`` for lines that name none (``> source: api via=memory_save``)."""
    match = _SOURCE_LINE.match(line)
    return source_of(match.group(1)) if match else None


def source_of(fields: str) -> Source | None:
    """The ``key=value`` fields after ``> source:`` as a Source (if they name turns)."""
    found: dict[str, str] = dict(_FIELD.findall(fields))
    session, turns = found.get("session"), parse_turns(found.get("turns", found.get("turn", "")))
    if not session or not turns:
        return None
    return Source(session, tuple(sorted(turns)), found.get("model"), found.get("via"))


def day_of(moment: datetime, zone: ZoneInfo) -> str:
    return moment.astimezone(zone).date().isoformat()


def format_turns(turns: tuple[int, ...] | list[int]) -> str:
    """``[1, 2, 3, 5]`` -> ``1-3,5``."""
    ordered = sorted(set(turns))
    runs: list[str] = []
    start = prev = ordered[0]
    for n in [*ordered[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        runs.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ",".join(runs)


MAX_RANGE = 10_000


def parse_turns(text: str) -> set[int]:
    """``1-3,5`` -> ``{1, 2, 3, 5}``; malformed parts and ranges wider than ``MAX_RANGE``
    (a hand-edited ledger) are ignored."""
    out: set[int] = set()
    for part in text.split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        if low.isascii() and low.isdigit() and (not high or (high.isascii() and high.isdigit())):
            first, last = int(low), int(high or low)
            if 0 <= last - first <= MAX_RANGE:
                out.update(range(first, last + 1))
    return out


_FLUSH_SOURCE = re.compile(r"^## Flush — \S+\n> source: (.*)$", re.MULTILINE)


def covered_turns(ledger: str, session_id: str) -> set[int]:
    """Turns of ``session_id`` that flush sections in ``ledger`` already cover: only a
    source line right under a ``## Flush`` header, with no ``via``. No stored content can
    produce that pair (every fact line starts with its bullet and tag:
    memory.facts.gate), so a saved ``> source: ... turns=1-99`` line suppresses nothing."""
    covered: set[int] = set()
    for match in _FLUSH_SOURCE.finditer(ledger):
        source = source_of(match.group(1))
        if source is not None and source.session_id == session_id and source.via is None:
            covered.update(source.turns)
    return covered


def render_section(
    kind: str, at: datetime, zone: ZoneInfo, bullets: list[str], provenance: str | None = None
) -> str:
    lines = ["", f"## {kind} — {iso(at.astimezone(zone))}"]
    if provenance is not None:
        lines.append(provenance)
    lines.extend(bullets)
    return "\n".join(lines) + "\n"


def clean_bullets(output: str) -> list[str]:
    """Turn a memory model's answer into ledger bullets.

    ``NO_REPLY`` or blank -> ``[]``. Bullet lines are kept (normalised to ``- ``);
    preamble, headings and chatter are dropped. An answer with text but no bullet at
    all is malformed and raises ``ModelOutputError``, so nothing is written.
    """
    text = output.strip()
    if not text or text == NO_REPLY:
        return []
    bullets: list[str] = []
    stray = False
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("```") or stripped == NO_REPLY:
            continue
        match = _BULLET.match(line)
        if match is None:
            stray = True
            continue
        body = " ".join(match.group(1).split())
        if body.startswith(("#", ">")):
            continue
        if len(body) > MAX_BULLET_CHARS:
            body = body[: MAX_BULLET_CHARS - 1].rstrip() + "…"
        bullets.append(f"- {body}")
    if not bullets and stray:
        raise ModelOutputError("the memory model answered without a bullet list or NO_REPLY")
    return bullets[:MAX_BULLETS]


def _fact_key(bullet: str, words: Callable[[str], str] | None = None) -> str:
    """A fact's words, its bullet and tag aside (the same statement twice is one);
    ``words`` maps the rest to the words compared (the flush: its lifecycle marks aside)."""
    body = _TAG.sub("", bullet.removeprefix("- "), count=1)
    if words is not None:
        body = words(body)
    return " ".join(body.casefold().split()).rstrip(".!")


def new_facts(
    bullets: list[str], ledger: str, *, words: Callable[[str], str] | None = None
) -> list[str]:
    """``bullets`` without those the day's ledger already holds verbatim (case and
    spacing aside; ``words``: compared on what it keeps of each line, tag aside) and
    without repeats among themselves: the same statement made twice (a retried call, a
    message sent again) lands once."""
    seen = {_fact_key(line, words) for line in ledger.splitlines() if line.startswith("- ")}
    kept: list[str] = []
    for bullet in bullets:
        key = _fact_key(bullet, words)
        if key not in seen:
            seen.add(key)
            kept.append(bullet)
    return kept
