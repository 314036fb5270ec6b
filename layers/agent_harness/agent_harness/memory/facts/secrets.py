"""Credentials found in a fact and replaced by ``[redacted secret]`` (facts.checks).

Best effort and deterministic: vendor token shapes, private keys, credentials in URLs,
labelled values ("password is …", "API key: …", "pw hunter2"), PINs and entry codes
("door code 1234 opens the side entrance"), card verification codes, payment card
numbers (by their check digit), US social security numbers and seed phrases. Only the
value is replaced; the words around it stay, so the fact still says what it was about
("The user's PIN is [redacted secret]").

The same redaction runs on what search and recall show (``without_secrets``): a thread
segment row as it is indexed, and every memory_search / thread_search hit and recalled
line as it leaves the service, so a segment indexed or a line written before a pattern
existed is shown redacted too.

What is deliberately *not* a secret: a code that identifies rather than unlocks (zip,
postal, area, country, error or status codes, "code review"), a label with no value
("the user forgot their PIN", "PIN reset needed", "password manager") and a count
("12 words").
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["SECRET_MARK", "redact_secrets", "without_secrets"]


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
_URL_CREDENTIALS = _lazy(r"((?<![\w+.\-])[a-z][a-z0-9+.\-]*://[^\s:/@]+):[^\s@/]+@", re.IGNORECASE)

# a seed / recovery phrase: 12-24 lowercase words of 3-8 letters (the BIP-39 shape) right
# after its label. Prose almost never runs 12 such words without a 1-2 letter word ("a",
# "in", "of", "is") breaking the run; the longer function words below end it too.
_SEED_PHRASE = _lazy(
    r"""(?P<label>(?i:\b(?:
          (?:seed|recovery|backup|secret|wallet|mnemonic)[ \-](?:phrase|words|seed)
        | mnemonic(?:[ \-]phrase)?
        | (?:12|15|18|21|24|twelve|twenty[ \-]four)[ \-]word
          (?:[ \-](?:seed|recovery|backup|secret|wallet))?[ \-](?:phrase|seed|mnemonic|list)
        )\b))
    (?P<sep>\s*(?:[:=\-–—]|(?i:\b(?:is|are|was|were)\b))?\s*["'`(]?)
    (?P<value>[a-z]{3,8}(?:[ ,]+[a-z]{3,8}){11,23})\b""",
    re.VERBOSE,
)
_PROSE_WORDS = frozenset(
    "the and for are was were with that this from have has had her his its our you your "
    "they them their kept written stored saved but not which where when then than also into "
    "onto will can should would safe paper card drawer somewhere".split()
)

# PINs, entry codes, card verification codes and combinations: the value is a code
# (digits, or a short code with a digit in it), directly after the label or after ":"/"is".
# Not labels: zip / postal / area / country codes (they locate, they do not unlock),
# error / status codes (diagnostics: "error code 404" stays), "code review", "dress code".
_CODE_SECRET = _lazy(
    r"""(?P<label>(?:
        \bpin(?:[ \-]?(?:number|code|no\.?))?
      | \bpass[ \-]?codes?
      | \b(?:door|alarm|gate|garage(?:[ \-]door)?|safe|lock|locker|padlock|entry|entrance
          |access|keypad|security|unlock|intercom|buzzer|verification|2fa|mfa|otp
          |one[ \-]time|backup|recovery|bike[ \-]lock|vault)[ \-](?:codes?|pins?|combination|combo)
      | \b(?:cvv2?|cvc2?|csc|otp)
      | \bcombination[ ]+(?:to|for|of)[ ]+(?:(?:the|my|his|her|their|our)[ ]+)?
          (?:safe|lock|locker|padlock|vault)
      )\b)
    (?P<sep>\s*(?:[:=\#]|\bis\b|\bwas\b|\bof\b|\bare\b)?\s*)
    (?P<value>\d{1,3}(?:[\-–/.]\d{1,3}){2,3}(?![\w\-])
      | \d{3,12}[\#*]?(?![\w\-/]|\.\d)
      | (?=[A-Za-z\-]*\d)[A-Za-z0-9][A-Za-z0-9\-]{3,15}(?![\w\-]))""",
    re.IGNORECASE | re.VERBOSE,
)

# recovery and backup codes, often a list: every code after the label ("1234-5678
# 8765-4321", "ABCD-EFGH-IJKL"), not only the first
_CODE_LIST = _lazy(
    r"""(?P<label>\b(?:recovery|backup|2fa|mfa|otp|one[ \-]time|verification|login)[ \-]codes?\b)
    (?P<sep>\s*(?:[:=]|\bare\b|\bis\b|\bwere\b|\bwas\b)?\s*)
    (?P<value>(?:(?=[\w\-]*\d)[A-Za-z0-9][A-Za-z0-9\-]{3,24}|[A-Za-z0-9]{3,8}(?:-[A-Za-z0-9]{3,8})+)
      (?:(?:\s*,\s*|\s+(?:and\s+)?)
         (?:(?=[\w\-]*\d)[A-Za-z0-9][A-Za-z0-9\-]{3,24}|[A-Za-z0-9]{3,8}(?:-[A-Za-z0-9]{3,8})+))*)""",
    re.IGNORECASE | re.VERBOSE,
)
# a payment card number: 13-19 digits, in groups or not, that pass the Luhn check
_CARD_NUMBER = _lazy(r"(?<![\d\-])\d(?:[ \-]?\d){12,18}(?![\d\-])")

# a US social security number: after its label ("SSN", "social security number", "my
# social is") any nine digits, grouped 3-2-4 or not; without a label only the dashed
# 3-2-4 shape, in the ranges the SSA issues (no 000, 666 or 9xx area, no 00 group, no
# 0000 serial). No date (4-2-2, 2-2-4), phone number (3-3-4) or zip+4 (5-4) has it.
_SSN_LABELLED = _lazy(
    r"""(?P<label>\b(?:ssn|social[ \-]security(?:[ \-](?:number|num|no))?|social)\b\.?)
    (?P<sep>\s*(?:[:=\#]|\bis\b|\bwas\b|\bof\b)?\s*)
    (?P<value>\d{3}(?P<gap>[ \-.]?)\d{2}(?P=gap)\d{4}(?![\w\-]|\.\d))""",
    re.IGNORECASE | re.VERBOSE,
)
_SSN_SHAPE = _lazy(r"(?<![\w\-.])(?!000|666|9)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\w\-]|\.\d)")

# "password is hunter2", "API key: abc123", "aws_secret_access_key=...", "the password for
# the staging db is ..."
_LABELLED_SECRET = _lazy(
    r"""
    (?P<label>\b(?:pass(?:word|wd|phrase|code)?|pwd|pw|pin|secret(?:[ _\-]?(?:access[ _\-]?)?key)?
        |api[ _\-]?key|access[ _\-]?key|auth[ _\-]?token|access[ _\-]?token|refresh[ _\-]?token
        |bearer[ _\-]?token|session[ _\-]?token|client[ _\-]?secret|private[ _\-]?key
        |credentials?|token)\b)
    (?P<qualifier>\s+(?:for|to|of|on)\s+(?:(?:the|my|his|her|their|our|this|that)\s+)?
        [\w\-.'’]+(?:\s+[\w\-.'’]+)?(?=\s*(?::|\bis\b|\bwas\b)))?
    (?P<sep>\s*(?:[:=]|\bis\b|\bwas\b|\bof\b)\s*["'`]?)
    (?P<value>[^\s"'`,;]{4,})
    """,
    re.IGNORECASE | re.VERBOSE,
)
#: labels a "for the staging db" qualifier may follow (not "secret", "pass": "the secret
#: to good bread is patience", "the pass for the museum is valid")
_QUALIFIED_LABEL = _lazy(r"pass(?:word|wd|phrase|code)|pwd|pw|pin|api|access|auth|token|cred", re.I)
# "pw hunter2", "password s3cret!": a password label, a space, a password-shaped value
_BARE_PASSWORD = _lazy(
    r"(?P<label>\b(?:pw|pwd|passwd|password|pass)\b)(?P<sep>[ \t]+)(?P<value>[^\s\"'`,;]{4,64})",
    re.IGNORECASE,
)
# a pass that is a ticket, not a password ("boarding pass LH454")
_TICKET_PASS = _lazy(
    r"\b(?:boarding|ski|bus|train|rail|day|season|hall|press|backstage|museum|gym|transit|metro"
    r"|annual|weekly|monthly|travel|visitor|guest|parking|festival|event|mountain|park)\s*$",
    re.IGNORECASE,
)
_TIME_OR_DATE = _lazy(r"^\d{1,2}[:.h]\d{2}|^\d{4}[-./]\d{1,2}|^\d{1,2}[-./]\d{1,2}[-./]\d{2,4}")

_STRONG_LABEL = _lazy(r"pass|pwd|pw\b|pin\b|secret|private", re.IGNORECASE)
_NOT_A_VALUE = {
    "required", "needed", "missing", "expired", "invalid", "reset", "changed", "manager",
    "managers", "stored", "saved", "shared", "rotated", "revoked", "correct", "wrong",
    "written", "unknown", "same", "different", "kept", "here", "there", "below", "above",
    "attached", "unchanged", "weak", "strong", "long", "short", "secure", "insecure",
    "temporary", "default", "blank", "empty", "expiring", "encrypted", "hashed", "lost",
    "forgotten", "compromised", "leaked", "known", "valid", "active", "pending", "protected",
    "2fa", "mfa", "policy", "rules", "hint", "hints", "length", "vault", "field", "prompt",
}  # fmt: skip


def redact_secrets(text: str) -> tuple[str, int]:
    """Replace credentials with ``[redacted secret]``; returns (text, replacements)."""
    count = 0
    for pattern, repl in (
        (_PRIVATE_KEY, SECRET_MARK),
        (_URL_CREDENTIALS, rf"\1:{SECRET_MARK}@"),
        (_BEARER, rf"\1 {SECRET_MARK}"),
        (_SECRET_TOKENS, SECRET_MARK),
    ):
        text, n = pattern.subn(repl, text)
        count += n

    def redacted(match: re.Match[str], keep: str = "") -> str:
        nonlocal count
        count += 1
        label, sep = match.group("label"), match.group("sep")
        return f"{label}{match.groupdict().get('qualifier') or ''}{sep}{SECRET_MARK}{keep}"

    def seed(match: re.Match[str]) -> str:
        words = re.split(r"[ ,]+", match.group("value"))
        run = next((i for i, w in enumerate(words) if w in _PROSE_WORDS), len(words))
        if run < 12:
            return match.group(0)
        return redacted(match, "".join(f" {w}" for w in words[run:]))

    def labelled(match: re.Match[str]) -> str:
        value, label = match.group("value"), match.group("label")
        if match.group("qualifier") and not _QUALIFIED_LABEL.match(label):
            return match.group(0)
        strong = _STRONG_LABEL.match(label) is not None
        if label.lower() == "pass" and match.group("sep").strip()[:1] not in (":", "="):
            strong = any(not c.isalpha() for c in value.strip(".!?)"))  # "pass is valid"
        if value.startswith("[redacted") or not _looks_secret(value, strong=strong):
            return match.group(0)
        return redacted(match)

    def bare(match: re.Match[str]) -> str:
        value, label = match.group("value").rstrip(".!?)"), match.group("label").lower()
        if (
            value.startswith("[redacted")
            or value.lower() in _NOT_A_VALUE
            or _TIME_OR_DATE.match(value)
            or value.isalpha()  # "password manager", "pass the salt"
            or (label == "pass" and not any(c.isalpha() for c in value))
            or (label == "pass" and _TICKET_PASS.search(match.string[: match.start()]))
        ):
            return match.group(0)
        return redacted(match)

    def card(match: re.Match[str]) -> str:
        nonlocal count
        digits = [int(c) for c in match.group(0) if c.isdigit()]
        if not _luhn(digits):
            return match.group(0)
        count += 1
        return SECRET_MARK

    text = _SEED_PHRASE.sub(seed, text)
    text = _CARD_NUMBER.sub(card, text)
    text = _SSN_LABELLED.sub(redacted, text)
    text, n = _SSN_SHAPE.subn(SECRET_MARK, text)
    count += n
    text = _CODE_LIST.sub(redacted, text)
    text = _CODE_SECRET.sub(redacted, text)
    text = _LABELLED_SECRET.sub(labelled, text)
    text = _BARE_PASSWORD.sub(bare, text)
    return text, count


def without_secrets(text: str) -> str:
    """``text`` as search and recall show it: every secret the gate would redact in a
    fact, redacted (one function for every result path: memory_search, thread_search,
    their HTTP, MCP and agent tools, automatic recall, and the segment rows indexed)."""
    return redact_secrets(text)[0]


def _luhn(digits: list[int]) -> bool:
    """The payment-card check digit holds (and the number is not all one digit)."""
    total = 0
    for n, d in enumerate(reversed(digits)):
        if n % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0 and len(set(digits)) > 1


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
