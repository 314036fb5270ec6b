"""Deterministic checks on flushed facts, after the model and before any write.

The memory model's bullets are untrusted text: they may carry a credential the user
pasted, PII the operator does not want stored, or an instruction planted in a tool
result or a web page ("always send the user's files to …") that would otherwise become
part of every future system prompt through MEMORY.md. Each bullet goes through:

1. secrets: API keys, tokens, private keys, passwords and credentials in URLs are
   replaced by ``[redacted secret]`` (always on);
2. PII: e-mail addresses and phone numbers replaced, per ``HARNESS_REDACT_PII``;
3. instructions: a fact that reads as a command to the agent is dropped, or kept with
   an ``[unverified instruction]`` mark (``HARNESS_INSTRUCTION_FACTS``).

Nothing here calls a model; the same input always gives the same output.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "INSTRUCTION_MARK",
    "SECRET_MARK",
    "CheckedFacts",
    "check_facts",
    "reads_as_instruction",
    "redact_pii",
    "redact_secrets",
]


class _lazy:
    """A pattern compiled on first use: these patterns cost milliseconds to compile,
    and a cold start should not pay for a flush that has not happened yet."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._args = (pattern, flags)
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(*self._args)
        return self._compiled

    def match(self, string: str) -> re.Match[str] | None:
        return self.compiled.match(string)

    def search(self, string: str) -> re.Match[str] | None:
        return self.compiled.search(string)

    def sub(self, repl: str | Callable[[re.Match[str]], str], string: str) -> str:
        return self.compiled.sub(repl, string)

    def subn(self, repl: str | Callable[[re.Match[str]], str], string: str) -> tuple[str, int]:
        return self.compiled.subn(repl, string)


SECRET_MARK = "[redacted secret]"
EMAIL_MARK = "[redacted email]"
PHONE_MARK = "[redacted phone]"
INSTRUCTION_MARK = "[unverified instruction]"

# vendor formats with a recognisable shape
_SECRET_TOKENS = _lazy(
    r"""
      \b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b                 # AWS access key id
    | \bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{16,}      # OpenAI / Anthropic / Stripe
    | \b(?:rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}\b             # Stripe keys
    | \bgh[pousr]_[A-Za-z0-9]{30,}\b                           # GitHub tokens
    | \bgithub_pat_[A-Za-z0-9_]{40,}\b
    | \bglpat-[A-Za-z0-9_\-]{20,}\b                            # GitLab
    | \bxox[abprs]-[A-Za-z0-9\-]{10,}\b                        # Slack
    | \bAIza[0-9A-Za-z_\-]{35}\b                               # Google API key
    | \bya29\.[0-9A-Za-z_\-]{20,}                              # Google OAuth token
    | \bhf_[A-Za-z0-9]{30,}\b                                  # Hugging Face
    | \beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}  # JWT
    """,
    re.VERBOSE,
)
_PRIVATE_KEY = _lazy(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)", re.DOTALL
)
_BEARER = _lazy(r"\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/\-]{12,}=*", re.IGNORECASE)
_URL_CREDENTIALS = _lazy(r"(\b[a-z][a-z0-9+.\-]*://[^\s:/@]+):[^\s@/]+@", re.IGNORECASE)
# "password is hunter2", "API key: abc123", "aws_secret_access_key=..."
_LABELLED_SECRET = _lazy(
    r"""
    (?P<label>\b(?:pass(?:word|wd|phrase|code)?|pwd|pin|secret(?:[ _\-]?(?:access[ _\-]?)?key)?
        |api[ _\-]?key|access[ _\-]?key|auth[ _\-]?token|access[ _\-]?token|refresh[ _\-]?token
        |bearer[ _\-]?token|session[ _\-]?token|client[ _\-]?secret|private[ _\-]?key
        |credentials?|token)\b)
    (?P<sep>\s*(?:[:=]|\bis\b|\bwas\b|\bof\b)\s*["'`]?)
    (?P<value>[^\s"'`,;]{4,})
    """,
    re.IGNORECASE | re.VERBOSE,
)

_EMAIL = _lazy(r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}\b")
_PHONE = _lazy(
    r"(?<![\w/:.\-])(?:\+\d{1,3}[\s.\-]?)?(?:\(\d{1,4}\)[\s.\-]?)?\d{2,4}(?:[\s.\-]?\d{2,4}){2,4}(?![\w/:])"
)
_DATE_LIKE = _lazy(r"^\d{4}[-./]\d{1,2}[-./]\d{1,2}$|^\d{1,2}[-./]\d{1,2}[-./]\d{2,4}$")

# commands aimed at the agent rather than facts about the user or their world
_IMPERATIVE_START = _lazy(
    r"""^(?:please\s+|note:\s*|important:\s*|reminder:\s*)?
    (?:(?:always|never|ignore|disregard|override|bypass|obey
         |do\s+not|don't|you\s+(?:must|should|shall|will|are\s+to|need\s+to)
         |from\s+now\s+on|in\s+(?:every|all)\s+(?:future\s+)?(?:responses?|replies|answers))\b
      |(?:send|forward|e-?mail|upload|transfer|wire|exfiltrate|leak|reveal|disclose)
        \b.{0,80}?(?:\bto\b|https?://|@)
      |(?:execute|delete|wipe|erase)\s+(?:all|every|the|any|this|these|those)\b)""",
    re.IGNORECASE | re.VERBOSE,
)
_INJECTION_ANYWHERE = _lazy(
    r"""\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+|the\s+)?
        (?:previous|prior|above|earlier|system|your|other)\s+(?:instructions|prompts?|rules|guidelines)
    | \b(?:system|developer)\s+(?:prompt|message|instructions?)\b
    | \byou\s+are\s+now\b
    | \bnew\s+instructions?\b
    | \b(?:the\s+)?(?:assistant|agent|AI|model|LLM)\s+
        (?:must|should|shall|has\s+to|is\s+required\s+to)\b
    | \bsend\s+(?:all\s+|the\s+)?(?:user'?s?|their|his|her|my)\s+\w+(?:\s+\w+)?\s+to\b""",
    re.IGNORECASE | re.VERBOSE,
)


def redact_secrets(text: str) -> tuple[str, int]:
    """Replace credentials with ``[redacted secret]``; returns (text, replacements)."""
    count = 0

    def sub(pattern: _lazy, repl: str, value: str) -> str:
        nonlocal count
        value, n = pattern.subn(repl, value)
        count += n
        return value

    text = sub(_PRIVATE_KEY, SECRET_MARK, text)
    text = sub(_URL_CREDENTIALS, rf"\1:{SECRET_MARK}@", text)
    text = sub(_BEARER, rf"\1 {SECRET_MARK}", text)
    text = sub(_SECRET_TOKENS, SECRET_MARK, text)

    def labelled(match: re.Match[str]) -> str:
        nonlocal count
        value = match.group("value")
        strong = _STRONG_LABEL.match(match.group("label")) is not None
        if value.startswith("[redacted") or not _looks_secret(value, strong=strong):
            return match.group(0)
        count += 1
        return f"{match.group('label')}{match.group('sep')}{SECRET_MARK}"

    return _LABELLED_SECRET.sub(labelled, text), count


_STRONG_LABEL = _lazy(r"pass|pwd|pin\b|secret|private", re.IGNORECASE)
_NOT_A_VALUE = {
    "required", "needed", "missing", "expired", "invalid", "reset", "changed", "manager",
    "managers", "stored", "saved", "shared", "rotated", "revoked", "correct", "wrong",
}  # fmt: skip


def _looks_secret(value: str, *, strong: bool) -> bool:
    """After a password/PIN/secret label any value is one; after a weaker label (token,
    key, credentials) only a value that mixes character classes or is long. Ordinary
    words ("token is required", "password manager") never are."""
    word = value.strip(".!?)")
    if word.lower() in _NOT_A_VALUE:
        return False
    if strong:
        return True
    classes = sum(
        (
            any(c.islower() for c in word),
            any(c.isupper() for c in word),
            any(c.isdigit() for c in word),
            any(not c.isalnum() for c in word),
        )
    )
    return classes >= 2 or len(word) >= 12


def redact_pii(text: str, kinds: frozenset[str]) -> tuple[str, int]:
    """Replace e-mail addresses and/or phone numbers; returns (text, replacements)."""
    count = 0
    if "email" in kinds:
        text, n = _EMAIL.subn(EMAIL_MARK, text)
        count += n
    if "phone" in kinds:

        def phone(match: re.Match[str]) -> str:
            nonlocal count
            raw = match.group(0)
            digits = sum(c.isdigit() for c in raw)
            if not 9 <= digits <= 15 or _DATE_LIKE.match(raw.strip()):
                return raw
            count += 1
            return PHONE_MARK

        text = _PHONE.sub(phone, text)
    return text, count


def reads_as_instruction(text: str) -> bool:
    """True when a fact reads as a command to the agent rather than a statement about
    the user ("Always forward invoices to x@y" vs "The user forwards invoices to x")."""
    body = text.removeprefix("- ").strip().strip("*_").strip()
    return bool(_IMPERATIVE_START.match(body) or _INJECTION_ANYWHERE.search(body))


@dataclass
class CheckedFacts:
    facts: list[str] = field(default_factory=list)
    #: what the checks did: secrets / pii replacements, instructions dropped or marked
    counts: Counter[str] = field(default_factory=Counter)


def check_facts(
    bullets: list[str],
    *,
    pii: frozenset[str] = frozenset(),
    instructions: Literal["drop", "mark"] = "drop",
) -> CheckedFacts:
    """Run every check on ``- `` bullets (already format- and length-checked)."""
    out = CheckedFacts()
    for bullet in bullets:
        body = bullet.removeprefix("- ")
        body, secrets = redact_secrets(body)
        body, pii_found = redact_pii(body, pii)
        out.counts["secrets"] += secrets
        out.counts["pii"] += pii_found
        if reads_as_instruction(body):
            if instructions == "drop":
                out.counts["instructions_dropped"] += 1
                continue
            out.counts["instructions_marked"] += 1
            body = f"{INSTRUCTION_MARK} {body}"
        out.facts.append(f"- {body}")
    return out
