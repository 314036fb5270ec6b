"""A deterministic embedding stand-in for unit tests: each stemmed word (and each
character trigram of it, so "peanut" and "peanuts" meet) hashed into 64 dimensions. It
knows no meaning, so it finds nothing a lexical search would not; it is never the
default of anything, and says so in its name."""

from __future__ import annotations

import hashlib
import math
from typing import TYPE_CHECKING

from agent_harness.text import terms

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agent_harness.embeddings.base import Kind

__all__ = ["StandInEmbeddingModel"]

DIMENSIONS = 64


class StandInEmbeddingModel:
    name = "stand-in"

    def __init__(self) -> None:
        self.calls: list[tuple[Kind, list[str]]] = []

    def embed(self, texts: Sequence[str], kind: Kind) -> list[list[float]]:
        self.calls.append((kind, list(texts)))
        return [_vector(text) for text in texts]


def _vector(text: str) -> list[float]:
    out = [0.0] * DIMENSIONS
    for word in terms(text):
        grams = [word] + [word[i : i + 3] for i in range(max(0, len(word) - 2))]
        for gram in grams:
            digest = hashlib.blake2b(gram.encode(), digest_size=4).digest()
            value = int.from_bytes(digest, "little")
            out[value % DIMENSIONS] += 1.0 if value & 1 << 31 else -1.0
    norm = math.sqrt(sum(v * v for v in out)) or 1.0
    return [v / norm for v in out]
