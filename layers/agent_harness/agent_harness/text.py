"""Text normalisation shared by search and the offline model: one definition of a word."""

from __future__ import annotations

import re
import unicodedata
from itertools import pairwise

__all__ = ["STOPWORDS", "WORD", "fold", "has_cjk", "tokens"]

WORD = re.compile(r"[^\W_]+", re.UNICODE)
#: kana, CJK ideographs (with extension A), Hangul syllables. A range test, not a regex
#: class: compiling that class costs 3 ms of every cold start.
_CJK_RANGES = ((0x3040, 0x30FF), (0x3400, 0x9FFF), (0xAC00, 0xD7AF))
STOPWORDS = frozenset(
    (
        "a an the and or but if of to in on at for with from by about as is are was were "
        "be been do does did i me my we our you your it they them this that these those "
        "what which who when where why how can could would should will have has had not "
        "no so than then also too am "
    ).split()
)


def fold(text: str) -> str:
    """NFKC and Unicode case folding: the form every comparison uses."""
    return unicodedata.normalize("NFKC", text).casefold()


def has_cjk(text: str) -> bool:
    if text.isascii():
        return False
    return any(low <= ord(ch) <= high for ch in text for low, high in _CJK_RANGES)


def tokens(text: str) -> list[str]:
    """Words for matching and ranking: folded, stopwords dropped, a plural ``s`` stripped,
    runs of CJK characters as overlapping bigrams (there are no spaces to split on)."""
    out: list[str] = []
    for word in WORD.findall(fold(text)):
        if has_cjk(word):
            chars = [c for c in word if not c.isspace()]
            out.extend(chars if len(chars) == 1 else (a + b for a, b in pairwise(chars)))
            continue
        if word in STOPWORDS:
            continue
        plural = len(word) > 3 and word.endswith("s") and not word.endswith("ss")
        out.append(word[:-1] if plural else word)
    return out
