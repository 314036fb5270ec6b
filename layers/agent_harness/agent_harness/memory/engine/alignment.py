"""Which turns of a long section each of its facts most likely came from, for ranking.

A flush of an imported session (or a throttled flush of many turns) writes one section
whose source names every turn it read: the provenance is honest, but ranking that reads
each fact with all those turns' messages (``index``: facts with their source turns, and
messages with the facts naming their turn) blurs a fact about pottery with the talk of
hiking two hours before. Ranking reads such a fact with a window of turns instead: the
turn of the section whose messages share the most of the fact's words (weighted by how
rare each word is among the section's turns), and its neighbours.

Only ranking uses this: the ledger, its source line and provenance keep every turn.
The post-turn job works the split out when it writes a ledger's ranked-index snapshot,
so a cold query reads it instead of tokenizing the session's messages again.
Sections naming at most ``ALIGN_ABOVE`` turns are left whole, and so is a fact that
shares no word with any turn, or a section some of whose turns have no indexed messages.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from agent_harness.text import terms

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agent_harness.memory.engine.file_index import FileIndex, Turns

__all__ = [
    "ALIGN_ABOVE",
    "WINDOW",
    "Part",
    "TurnWords",
    "aligned_sections",
    "unaligned",
]

#: turns each side of a fact's best turn that it is read with too (2 was best on
#: LoCoMo's tuning conversations, against 0 and 1)
WINDOW = 2
#: a section naming more turns than a window holds has its facts aligned (a very large
#: number turns alignment off)
ALIGN_ABOVE = 2 * WINDOW + 1

_Key = tuple[str, int]


class TurnWords:
    """The terms of each turn's messages, from thread segment indexes (each record linked
    to its turn), worked out per turn when first asked."""

    def __init__(self, segments: Sequence[FileIndex]) -> None:
        self._segments = [s for s in segments if s.links is not None]
        self._records: dict[_Key, list[tuple[FileIndex, int]]] | None = None
        self._words: dict[_Key, frozenset[str]] = {}

    def get(self, key: _Key) -> frozenset[str] | None:
        """The turn's terms (None: no message of it is indexed)."""
        known = self._words.get(key)
        if known is not None:
            return known
        if self._records is None:
            records: dict[_Key, list[tuple[FileIndex, int]]] = {}
            for segment in self._segments:
                for numbers, (turn,) in segment.linked_groups():
                    records.setdefault(turn, []).extend((segment, n) for n in numbers)
            self._records = records
        found = self._records.get(key)
        if found is None:
            return None
        words = frozenset(t for s, n in found for t in terms(s.lines[n]))  # only these folded
        self._words[key] = words
        return words


#: a part of a section: its records, and the slice [from, to) of the section's turns
Part = tuple[list[int], int, int]


def aligned_sections(f: FileIndex, words: TurnWords | None) -> list[tuple[Turns, list[Part]]]:
    """``f``'s linked sections, each with its parts: the whole section as one part, or,
    for a section naming more than ``ALIGN_ABOVE`` turns, its records grouped by the
    window of its turns they align with (a record aligned with nothing keeps the whole
    section). Remembered per section in ``f``."""
    out: list[tuple[Turns, list[Part]]] = []
    for records, turns in f.linked_groups():
        whole: list[Part] = [(records, 0, len(turns))]
        key = _key(f, records, turns)
        if words is None or key is None:
            out.append((turns, whole))
            continue
        split = f.aligned.get(key)
        if split is None:
            split = _split(f, records, turns, words)
            if split is None:  # a turn's messages are not indexed (yet): not remembered
                out.append((turns, whole))
                continue
            f.aligned[key] = split
        out.append((turns, split))
    return out


def unaligned(f: FileIndex) -> bool:
    """Whether ``f`` has a long section whose split is not worked out yet."""
    keys = (_key(f, records, turns) for records, turns in f.linked_groups())
    return any(key is not None and key not in f.aligned for key in keys)


def _key(f: FileIndex, records: list[int], turns: Turns) -> tuple[int, int, int] | None:
    """Where ``f`` keeps a section's split (its first record, the settings), or None for a
    section that is read whole: short, or a thread segment's turn."""
    if f.links is not None or len(turns) <= ALIGN_ABOVE:
        return None
    return (records[0], ALIGN_ABOVE, WINDOW)


def _split(f: FileIndex, records: list[int], turns: Turns, words: TurnWords) -> list[Part] | None:
    per_turn = [words.get(key) for key in turns]
    if any(w is None for w in per_turn):
        return None
    sets = [w or frozenset() for w in per_turn]
    df: dict[str, int] = {}
    for w in sets:
        for t in w:
            df[t] = df.get(t, 0) + 1
    k = len(turns)
    idf = {t: math.log(1 + (k - n + 0.5) / (n + 0.5)) for t, n in df.items()}
    by_window: dict[tuple[int, int], list[int]] = {}
    for number in records:
        mine = set(terms(f.lines[number]))
        scores = [math.fsum(idf[t] for t in mine & w) for w in sets]  # any set order
        best = max(range(k), key=lambda i: (scores[i], -i))  # ties: the earlier turn
        window = (max(0, best - WINDOW), min(k, best + WINDOW + 1)) if scores[best] else (0, k)
        by_window.setdefault(window, []).append(number)
    return [(numbers, lo, hi) for (lo, hi), numbers in by_window.items()]
