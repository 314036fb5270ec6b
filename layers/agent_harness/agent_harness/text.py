"""Text normalisation shared by search and the offline model: one definition of a word."""

from __future__ import annotations

import re
import unicodedata
from itertools import pairwise

__all__ = ["CJK", "STOPWORDS", "WORD", "fold", "tokens"]

WORD = re.compile(r"[^\W_]+", re.UNICODE)
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
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


def tokens(text: str) -> list[str]:
    """Words for matching and ranking: folded, stopwords dropped, a plural ``s`` stripped,
    runs of CJK characters as overlapping bigrams (there are no spaces to split on)."""
    out: list[str] = []
    for word in WORD.findall(fold(text)):
        if CJK.search(word):
            chars = [c for c in word if not c.isspace()]
            out.extend(chars if len(chars) == 1 else (a + b for a, b in pairwise(chars)))
            continue
        if word in STOPWORDS:
            continue
        plural = len(word) > 3 and word.endswith("s") and not word.endswith("ss")
        out.append(word[:-1] if plural else word)
    return out
