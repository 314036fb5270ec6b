"""Who a fact's words come from: the authority every fact carries, in the Markdown itself.

    - [user] The user prefers window seats.
    - [tool:orders] A tool result (orders) said: parcel 7731 ships on Monday.
    - [operator] The account manager is Dana.

The tag follows the bullet on every fact line of a ledger and of MEMORY.md; a line
without one was written before authorities existed (or by hand outside the API) and
has none. The values, from the most trusted down:

    operator     a person: PUT /v1/memory, the console, the CLI, an approved review item
    user         stated in the user's own message
    import       the user's words in history the caller imported
    save:api     memory_save over the HTTP API          save:mcp   ... by an MCP client
    save:agent   memory_save by the agent model
    assistant    the agent's own statement
    tool:<name>  a tool result (the caller's tool or a remote MCP tool)

The tag is written by the system, never taken from content: content that starts with
a tag has it neutralised in view (``(claimed operator) ...``), a model's answer in the
fact format has its tags stripped, and the writer puts its own first, so the first tag
of a line is always the one the system gave it; other bracketed text (``[TODO]``) is
part of the fact. ``attribute`` decides a fact's authority from the messages
it came from (its distinctive words must occur there), never on a model's word. This
module owns the tag format and that rule.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent_harness.text import terms

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "AUTHORITY_PATTERN",
    "PROTECTED",
    "TRUSTED",
    "Fact",
    "attribute",
    "disown",
    "distinctive",
    "fact_id",
    "fact_line",
    "identifiers_in",
    "is_authority",
    "message_authority",
    "negated",
    "neutralise_tags",
    "parse_fact",
    "rank",
    "speaker",
    "strip_tags",
    "support",
    "tool_authority",
]

OPERATOR, USER, IMPORT, ASSISTANT = "operator", "user", "import", "assistant"
SAVES = ("save:api", "save:mcp", "save:agent")
TOOL = "tool:"
_TOOL_NAME = re.compile(r"[^A-Za-z0-9_.\-]")
#: an authority tag's value, as a pattern (no group): what a tag may hold
AUTHORITY_PATTERN = (
    r"(?:operator|user|import|assistant|save:(?:api|mcp|agent)|tool:[A-Za-z0-9_.\-]{1,64})"
)
_AUTHORITY = AUTHORITY_PATTERN
_IS_AUTHORITY = re.compile(rf"^{_AUTHORITY}$")
#: a fact line: a bullet, then its tag
_FACT = re.compile(rf"^\s*[-*+•]\s+(?:\[({_AUTHORITY})\]\s+)?(.*?)\s*$")
#: authority tags (ours, any case or spacing) at the start of a text: a model's answer
#: in the fact format carries them, content that claims one forges them
_LEADING_TAGS = re.compile(rf"^(?:\s*\[\s*{_AUTHORITY}\s*\]\s*)+", re.IGNORECASE)
_ONE_TAG = re.compile(rf"\[\s*({_AUTHORITY})\s*\]\s*", re.IGNORECASE)

_RANK = {OPERATOR: 7, USER: 6, IMPORT: 5, "save:api": 4, "save:mcp": 3, "save:agent": 2}
_RANK.update({ASSISTANT: 1})
#: the user's own words, typed or imported by the caller, and a person's: facts as usual
TRUSTED = frozenset({OPERATOR, USER, IMPORT})
#: what consolidation never lets a lower authority replace or contradict
PROTECTED = frozenset({OPERATOR, USER})


def is_authority(value: str) -> bool:
    return _IS_AUTHORITY.match(value) is not None


def tool_authority(name: str | None) -> str:
    """``tool:<name>``, the name reduced to the characters a tag may hold."""
    cleaned = _TOOL_NAME.sub("_", name or "")[:64] or "tool"
    return TOOL + cleaned


def rank(authority: str | None) -> int:
    """Higher is more trusted; a tool result is 0, a line without authority (None, or
    "" where a mapping needs a key) -1."""
    if not authority:
        return -1
    return _RANK.get(authority, 0)


def message_authority(role: str, name: str | None, *, imported: bool) -> str | None:
    """The authority of a message's words (None: a system message, which is not memory)."""
    if role == "user":
        return IMPORT if imported else USER
    if role == "assistant":
        return ASSISTANT
    if role == "tool":
        return tool_authority(name)
    return None


@dataclass(frozen=True)
class Fact:
    authority: str | None
    text: str

    def line(self) -> str:
        """The line as stored: its text is the system's already (a mark it holds stays)."""
        return f"- [{self.authority}] {self.text}" if self.authority else f"- {self.text}"


def strip_tags(text: str) -> str:
    """``text`` without the authority tags it starts with (``[user] [operator] x`` ->
    ``x``); other bracketed text (``[TODO] x``) is the text's own and stays."""
    return _LEADING_TAGS.sub("", text, count=1)


def neutralise_tags(text: str) -> str:
    """Content that starts with an authority tag claims a speaker it is not: each such
    tag is kept visible but inert (``[operator] x`` -> ``(claimed operator) x``), so a
    reader sees the claim and no parser takes it for one."""
    lead = _LEADING_TAGS.match(text)
    if lead is None:
        return text
    claims = " ".join(f"(claimed {m.group(1).lower()})" for m in _ONE_TAG.finditer(lead.group(0)))
    return f"{claims} {text[lead.end() :]}".strip()


def fact_line(authority: str | None, text: str) -> str:
    """``- [authority] text`` (``- text`` without one). ``text`` is one line."""
    body = strip_tags(text).strip()
    return f"- [{authority}] {body}" if authority else f"- {body}"


def fact_id(text: str) -> str:
    """A fact's id: its words (tag, bullet, case and spacing aside), hashed. The same in
    a ledger, MEMORY.md, a search hit and a turn's memory record."""
    fact = parse_fact(text)
    body = fact.text if fact is not None else text
    words = " ".join(strip_tags(body).casefold().split())
    return "f" + hashlib.sha256(words.encode()).hexdigest()[:15]


def parse_fact(line: str) -> Fact | None:
    """A bullet line as (authority, text); None for anything that is not a bullet."""
    match = _FACT.match(line)
    if match is None or not match.group(2):
        return None
    return Fact(match.group(1), match.group(2))


# -- who said it --------------------------------------------------------------------

#: words that say who said something, not what: they are no evidence of either
_ATTRIBUTION_WORDS = frozenset(
    terms(
        "user users said says say stated states told tell mentioned mention noted wrote "
        "explained asked confirmed reported tool result results assistant agent page "
        "message messages imported remember note"
    )
)
#: words that must occur verbatim: numbers, codes, addresses, links
_IDENTIFIER = re.compile(
    r"[\w.+\-]+@[\w\-]+\.[\w.\-]+|\b\w+://\S+|\b(?=[A-Za-z0-9\-]*\d)[A-Za-z0-9\-]{3,}\b"
)
_ISO_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$|^(?:19|20)\d\d$")
#: a fact is someone's when at least this share of its distinctive words is in their words
SUPPORT = 0.6
_SQUASH = re.compile(r"[\s\-]")


def _identifiers(text: str) -> set[str]:
    """Numbers, codes, addresses and links of ``text``, spacing removed; not dates, which
    a memory model writes out from "tomorrow"."""
    found = (m.group(0).rstrip(".,;") for m in _IDENTIFIER.finditer(text))
    return {_SQUASH.sub("", f).casefold() for f in found if not _ISO_DAY.match(f)}


def identifiers_in(fact: str, said: str) -> bool:
    """Does every link, address and long number or code of ``fact`` (four digits or
    more: a phone, an account, an order; not a date, nor "7am" or "29th", which a model
    writes out from words) occur in ``said``, verbatim or with other spacing? A model
    that writes one nobody said invented it."""
    ids = {
        i for i in _identifiers(fact) if "://" in i or "@" in i or sum(c.isdigit() for c in i) >= 4
    }
    return not ids or ids <= _identifiers(said) | _squashed_words(said, ids)


#: "User said:", "A tool result (orders) said:", "The assistant said that": who, not what
_SPEAKER = re.compile(
    r"^\s*(?:(?:the\s+)?user|an?\s+tool\s+result(?:\s*\([^)]{0,80}\))?|the\s+(?:assistant|agent))"
    r"\s+(?:said|says|stated|wrote|reported|mentioned|noted)(?:\s+that)?\s*[:,]?\s*",
    re.IGNORECASE,
)


#: negation is meaning: "does not prefer" is not "prefers" (search drops these words as
#: stopwords; comparing facts never does)
_NEGATION = re.compile(
    r"\b(?:not|no|never|none|nobody|nothing|neither|nor|cannot|without)\b|n[’']t\b",
    re.IGNORECASE,
)
NEGATED = "¬"


def negated(text: str) -> bool:
    """Whether ``text`` says "not", "no", "never", "n't" or the like."""
    return _NEGATION.search(text) is not None


def distinctive(text: str) -> set[str]:
    """The words of ``text`` that say what, not who (stemmed, stopwords out; a leading
    "A tool result (orders) said:" left out, so the speaker's name is no evidence); a
    negation counts as a word of its own (``NEGATED``)."""
    what = _SPEAKER.sub("", text, count=1)
    words = {t for t in terms(what) if t not in _ATTRIBUTION_WORDS}
    return words | {NEGATED} if negated(what) else words


def support(fact: str, said: str) -> float:
    """The share of ``fact``'s distinctive words that occur in ``said`` (0.0 when an
    identifier of the fact, a number, code, address or link, does not occur verbatim,
    or when the fact negates and ``said`` never does)."""
    wanted = distinctive(fact)
    if not wanted:
        return 0.0
    ids = _identifiers(fact)
    if ids and not ids <= _identifiers(said) | _squashed_words(said, ids):
        return 0.0
    if NEGATED in wanted and not negated(said):
        return 0.0
    found = set(terms(said)) | ({NEGATED} if NEGATED in wanted else set())
    return len(wanted & found) / len(wanted)


def _squashed_words(said: str, ids: set[str]) -> set[str]:
    """The identifiers that occur in ``said`` written with other spacing (an IBAN in
    groups of four, a phone number with dashes)."""
    squashed = _SQUASH.sub("", said).casefold()
    return {i for i in ids if i in squashed}


#: speakers whose support is this close to the best one's count as supporting it as well
TIE = 0.1


def attribute(fact: str, said: Mapping[str, str], fallback: str = ASSISTANT) -> str:
    """The authority of ``fact`` given what each authority said in its window
    (authority -> their words). Among those whose words support it (``SUPPORT`` of its
    distinctive words, every identifier verbatim) and nearly as well as the best (a
    fact that changes a word of the user's, "black tea" for "green tea", is the words of
    whoever said it that way): a trusted one (the user, an import, a person) if any, the
    most trusted; else the least trusted (the agent repeating a tool result does not make
    the tool's claim the agent's). With no such support, the one that supports it best,
    the less trusted on a tie; ``fallback`` when nobody's words support it at all (the
    memory model's own words)."""
    scores = {authority: support(fact, words) for authority, words in said.items()}
    ordered = sorted(scores, key=rank, reverse=True)
    best = max(scores.values(), default=0.0)
    near = [a for a in ordered if scores[a] >= SUPPORT and scores[a] >= best - TIE]
    trusted = [a for a in near if a in TRUSTED]
    if trusted:
        return trusted[0]
    if near:
        return near[-1]
    chosen = max(reversed(ordered), key=lambda a: scores[a], default=None)
    if chosen is None or scores[chosen] == 0.0:
        return fallback
    return chosen


_CLAIMS_USER = re.compile(
    r"^(?:the\s+)?user\s+(?:said|says|stated|states|told\s+(?:me|us|the\s+\w+)|mentioned"
    r"|wrote|explained|confirmed|noted|reported)(?:\s+that)?\s*[:,]?\s*",
    re.IGNORECASE,
)


def speaker(authority: str) -> str:
    """How a fact names a speaker that is not the user."""
    if authority.startswith(TOOL):
        return f"A tool result ({authority.removeprefix(TOOL)})"
    if authority == ASSISTANT:
        return "The assistant"
    return "A memory_save call"


def disown(text: str, authority: str) -> str:
    """``text`` never phrased as the user's statement unless the user said it: a
    leading "User said: ..." of a fact with another authority names its real speaker."""
    if authority in TRUSTED:
        return text
    match = _CLAIMS_USER.match(text)
    if match is None:
        return text
    rest = text[match.end() :]
    return f"{speaker(authority)} said: {rest[:1].upper()}{rest[1:]}"
