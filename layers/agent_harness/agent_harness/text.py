"""Text normalisation shared by search and the offline model: one definition of a word."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from itertools import pairwise

__all__ = ["STOPWORDS", "WORD", "fold", "has_cjk", "stem", "terms", "tokens"]

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


#: words that carry no topic in a question ("what kind of ...", "how many ...") and so
#: only add noise to a ranking; matching (phrase/all/any) does not use this list
_RANKING_STOPWORDS = frozenset(
    "kind type sort many much some any ever there their his her he she him its one ones "
    "thing things".split()
)
#: irregular English forms ranked as their base word, so "went" meets "go" and "bought"
#: "buy" the way "painted" meets "paint"; forms that are as often another word ("wound",
#: "rose", "bit", "lay", "let") are not in it
_IRREGULAR = dict(
    pair.split(":")
    for pair in (
        "ate:eat became:become began:begin begun:begin bitten:bite blew:blow blown:blow "
        "broke:break broken:break brought:bring built:build bought:buy came:come "
        "caught:catch children:child chose:choose chosen:choose dealt:deal drawn:draw "
        "dreamt:dream drew:draw driven:drive drove:drive dug:dig eaten:eat fallen:fall "
        "fed:feed feet:foot fell:fall felt:feel flew:fly flown:fly forgot:forget "
        "forgotten:forget fought:fight found:find froze:freeze frozen:freeze gave:give "
        "given:give goes:go gone:go got:get gotten:get grew:grow grown:grow heard:hear "
        "held:hold hid:hide hidden:hide hung:hang kept:keep knew:know known:know led:lead "
        "left:leave "
        "lost:lose made:make meant:mean men:man met:meet mice:mouse paid:pay ran:run "
        "rang:ring ridden:ride risen:rise rode:ride rung:ring said:say sang:sing sank:sink "
        "sat:sit saw:see seen:see sent:send shaken:shake shook:shake shot:shoot sold:sell "
        "slept:sleep slid:slide sought:seek spent:spend spoke:speak spoken:speak spun:spin "
        "sprang:spring sprung:spring stole:steal stolen:steal stood:stand stuck:stick "
        "struck:strike stung:sting sung:sing sunk:sink swam:swim swept:sweep swum:swim "
        "swung:swing taken:take taught:teach teeth:tooth thought:think threw:throw "
        "thrown:throw told:tell took:take tore:tear torn:tear understood:understand "
        "wept:weep went:go withdrew:withdraw woke:wake woken:wake women:woman won:win "
        "wore:wear worn:wear written:write wrote:write"
    ).split()
)
#: (suffix, shortest stem it may leave), tried in order, at most one stripped by ``stem``
_SUFFIXES = (
    ("ingly", 3), ("edly", 3), ("ings", 3), ("ing", 3), ("ed", 3),
    ("ment", 4), ("ness", 4), ("ly", 5),
)  # fmt: skip


def fold(text: str) -> str:
    """NFKC and Unicode case folding: the form every comparison uses."""
    return unicodedata.normalize("NFKC", text).casefold()


def has_cjk(text: str) -> bool:
    if text.isascii():
        return False
    return any(low <= ord(ch) <= high for ch in text for low, high in _CJK_RANGES)


def _cjk_bigrams(word: str) -> list[str]:
    chars = [c for c in word if not c.isspace()]
    return chars if len(chars) == 1 else [a + b for a, b in pairwise(chars)]


def _plural_off(word: str) -> str:
    plural = len(word) > 3 and word.endswith("s") and not word.endswith("ss")
    return word[:-1] if plural else word


def tokens(text: str) -> list[str]:
    """Words for matching and ranking: folded, stopwords dropped, a plural ``s`` stripped,
    runs of CJK characters as overlapping bigrams (there are no spaces to split on)."""
    out: list[str] = []
    for word in WORD.findall(fold(text)):
        if has_cjk(word):
            out.extend(_cjk_bigrams(word))
        elif word not in STOPWORDS:
            out.append(_plural_off(word))
    return out


def stem(word: str) -> str:
    """A light English stemmer for ranking, applied after ``tokens`` took a plural ``s``
    off: one suffix (``-ing``, ``-ed``, ``-ment``, ``-ly``...) if a long enough stem is
    left, a doubled final consonant undone, then a final ``e`` dropped and ``y``/``ie``
    written ``i``. So "running"/"run", "painted"/"painting", "family"/"families",
    "hike"/"hiking" and "happy"/"happiness" meet. Short words, and anything that is not
    plain lower-case ASCII letters, are left alone."""
    if len(word) < 4 or not (word.isascii() and word.isalpha()):
        return word
    for suffix, shortest in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= shortest:
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
        word = word[:-1]
    if word.endswith("ie"):
        return word[:-1]
    if len(word) > 3 and word[-1] in "ey":
        return word[:-1] + ("i" if word[-1] == "y" else "")
    return word


@lru_cache(maxsize=65536)  # a vocabulary repeats: each word is worked out once per container
def _word_terms(word: str) -> tuple[str, ...]:
    """A folded word's ranking terms (none for a stopword), worked out once per container."""
    if has_cjk(word):
        return tuple(_cjk_bigrams(word))
    if word in STOPWORDS:
        return ()
    token = _plural_off(_IRREGULAR.get(word, word))
    return () if token in _RANKING_STOPWORDS else (stem(token),)


def terms(text: str, *, folded: bool = False) -> list[str]:
    """What ranked search scores: ``tokens`` stemmed (an irregular form as its base
    word), without the ranking stopwords.
    ``folded``: the text is already ``fold``-ed (an index keeps its lines folded)."""
    return [t for word in WORD.findall(text if folded else fold(text)) for t in _word_terms(word)]
