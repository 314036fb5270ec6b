"""The offline model's side of the flush's lifecycle contract: on explicit cues in the
user's own words it answers marks naming the facts it was shown (docs/models.md).

    "I moved to X"                  the fact, ``(supersedes <id>)`` of the shown fact
                                    about where the user lives or is based
    "I no longer X", "I don't X     ``- (retracts <id>) User said: ...`` of the shown
    anymore"                        fact sharing the most words with X
    "forget that X"                 the same, for the shown fact matching X

Shown facts come from the prompt's ``current_facts`` block (``[<id>] <text>`` lines),
best first; ties go to the first. Deterministic; nothing else changes what it answers.

A consolidation's re-check (``recheck_facts``): a fact that names what changed under
it (a word of the retired fact that its replacement does not say, "Lisbon" after a move
to Berlin) is retracted; any other is confirmed. A second look (``left_out_facts``):
every left-out fact is confirmed (the stand-in cannot tell a shortened line from an
untrue one; a real model decides).
"""

from __future__ import annotations

import re

from agent_harness import markup
from agent_harness.memory.facts.lifecycle import FACT_ID
from agent_harness.text import tokens

__all__ = ["Cue", "lifecycle_bullets", "recheck_answer", "second_look_answer", "shown_facts"]

_SHOWN = re.compile(rf"^\[({FACT_ID.pattern})\] (.+)$", re.MULTILINE)
_STOP = re.compile(r"[.!?。！？]+(?=\s|$)|\n")
_MOVED = re.compile(r"\bI(?:'ve|\s+have)?\s+(?:just\s+|recently\s+)?moved\s+to\s+(\S.*)", re.I)
_NO_LONGER = re.compile(
    r"\bI\s+no\s+longer\s+(\S.*)|\bI\s+(?:don't|do\s+not|don’t)\s+(\S.*?)\s+any\s?more\b", re.I
)
_FORGET = re.compile(r"\bforget\s+(?:that\s+|about\s+)?(\S.*)", re.I)
#: a fact about where the user lives or is based
_HOME = re.compile(
    r"\b(?:live[sd]?|living|based|resides?|residing|moved|home(?:town)?|located)\b", re.I
)
#: words that say nothing about which fact is meant
_FILLER = frozenset("i me my user said the a an to in of at that no longer don't do not".split())

Cue = tuple[str, list[str]]  # (the cue sentence, the bullets it answers)


def shown_facts(prompt: str) -> list[tuple[str, str]]:
    """The (id, text) lines of the prompt's ``current_facts`` block, in order."""
    block = markup.extract(prompt, markup.CURRENT_FACTS) or ""
    return [(m.group(1), m.group(2).strip()) for m in _SHOWN.finditer(block)]


def _words(text: str) -> set[str]:
    return {t for t in tokens(text) if t not in _FILLER}


#: words a retraction's object shares with many facts: no evidence of which one is meant
_COMMON = frozenset(
    "live lives living lived use uses using used work works working have has had like "
    "likes go goes drink drinks eat eats anymore any more still now".split()
)


def _closest(about: str, shown: list[tuple[str, str]]) -> str | None:
    """The id of the shown fact sharing the most words with ``about`` (at least one that
    is not a common verb: "I don't live in Porto anymore" is not about "lives in Faro")."""
    wanted = _words(about) - _COMMON
    best: tuple[int, str] | None = None
    for fact_id, text in shown:
        shared = len(wanted & _words(text))
        if shared and (best is None or shared > best[0]):
            best = (shared, fact_id)
    return best[1] if best else None


def _sentence(text: str) -> str:
    text = text.strip().rstrip(",;")
    return text[0].upper() + text[1:] + ("" if text[-1] in ".!?" else ".")


def _cue(sentence: str, shown: list[tuple[str, str]]) -> list[str]:
    moved = _MOVED.search(sentence)
    if moved is not None:
        home = next((i for i, text in shown if _HOME.search(text)), None)
        fact = f"- User said: {_sentence(sentence)}"
        return [f"{fact} (supersedes {home})" if home else fact]
    gone = _NO_LONGER.search(sentence) or _FORGET.search(sentence)
    if gone is not None:
        target = _closest(gone.group(1) or gone.group(2) or "", shown)
        if target is not None:
            return [f"- (retracts {target}) User said: {_sentence(sentence)}"]
    return []


def lifecycle_bullets(conversation: str, shown: list[tuple[str, str]]) -> list[Cue]:
    """The cues of the user's messages in ``conversation``, each with its bullets."""
    cues: list[Cue] = []
    for attrs, body in markup.read_messages(conversation):
        if attrs.get("role") != "user":
            continue
        for raw in _STOP.split(body):
            sentence = raw.strip()
            if len(sentence) < 4:
                continue
            bullets = _cue(sentence, shown)
            if bullets:
                cues.append((sentence, bullets))
    return cues


_RECHECK = re.compile(rf"^\[({FACT_ID.pattern})\] (.+)\n\s+changed under it: (.+)$", re.MULTILINE)


def recheck_answer(prompt: str) -> str | None:
    """The answer to a re-check prompt (None: the prompt is no re-check)."""
    block = markup.extract(prompt, markup.RECHECK_FACTS)
    if block is None:
        return None
    lines = []
    for match in _RECHECK.finditer(block):
        fact_id, text, changes = match.groups()
        gone_words: set[str] = set()
        for change in changes.split("; "):
            before, _, after = change.partition(" -> ")
            gone_words |= _words(before) - _words(after)
        stale = _words(text) & gone_words
        if stale:
            lines.append(f"- (retracts {fact_id}) it depended on {', '.join(sorted(stale))}")
        else:
            lines.append(f"- (confirms {fact_id}) still true after the change")
    return "\n".join(lines) or "NO_REPLY"


def second_look_answer(prompt: str) -> str | None:
    """The answer to a second look (None: the prompt is none): every fact confirmed."""
    block = markup.extract(prompt, markup.LEFT_OUT_FACTS)
    if block is None:
        return None
    lines = [f"- (confirms {m.group(1)}) kept" for m in _SHOWN.finditer(block)]
    return "\n".join(lines) or "NO_REPLY"
