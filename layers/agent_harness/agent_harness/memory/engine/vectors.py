"""The persisted vectors of a memory's lines: their format, keys and scoring.

    index/vectors/<model>/memory.json          every current ledger fact and MEMORY.md line
    index/vectors/<model>/threads-2026-11.json every message of a month's thread segment

    {"format": 1, "model": "local:multilingual-e5-small", "dims": 768, "views": 2,
     "keys": "<key><key>...",                16 hex characters per line
     "scales": "<base64 float32, one per line>",
     "codes": "<base64 int8, dims per line>"}

A model trained with a prefix for each side (e5: "query: ", "passage: ") gives each line
two views: the line embedded as a passage and as a query, side by side in one row
(``views`` 2). A question is scored against both, ``QUERY_VIEW_WEIGHT`` on the second:
a question is often closer to a fact read as a question than as a document (measured on
the paraphrase set's tuning half: top-5 recall 0.88 with the passage view alone, 0.94
with both). A line is keyed by its fact text (authority tag and marks aside, case and spacing
folded), so the same fact written on two days, or copied into MEMORY.md, is embedded
once, and a line that moves keeps its vector. Each vector is stored as int8 codes with
its own scale (about dims + 4 bytes a line; cosine within 0.01 of float32), decoded
into one float32 matrix on read, so a query is one matrix product.

Derived and rebuildable (``memory.vectors`` writes them off the request path): a file
of another model or format is ignored, a line without a vector is ranked by its words
alone until the next refresh embeds it. Pure: no AWS, no Runtime.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_harness.memory.facts.authority import parse_fact
from agent_harness.memory.facts.lifecycle import split_marks
from agent_harness.paths import VECTOR_DIR
from agent_harness.text import fold

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_harness.memory.engine.file_index import FileIndex

__all__ = [
    "FORMAT",
    "VectorSet",
    "decode",
    "encode",
    "fact_body",
    "line_key",
    "line_keys",
    "message_body",
    "normalised",
    "row_scores",
    "thread_vector_path",
    "vector_path",
]

FORMAT = 1
#: the query view's share of a two-view line's score (chosen on the tuning half)
QUERY_VIEW_WEIGHT = 2 / 3
_KEY_CHARS = 16
_SPACE = re.compile(r"\s+")


def vector_path(model: str) -> str:
    """Where a memory's vectors of ``model`` live (one object per model)."""
    return f"{VECTOR_DIR}{re.sub(r'[^A-Za-z0-9.-]+', '-', model).strip('-')}/memory.json"


def thread_vector_path(model: str, segment: str) -> str:
    """Where the vectors of a month segment's messages live (``index/threads/2026-11.jsonl``
    -> ``index/vectors/<model>/threads-2026-11.json``)."""
    month = segment.rsplit("/", 1)[-1].removesuffix(".jsonl")
    return vector_path(model).removesuffix("memory.json") + f"threads-{month}.json"


def message_body(line: str) -> str | None:
    """The words of a thread-index row that are embedded: the message as indexed."""
    return line if line.strip() else None


def fact_body(line: str) -> str | None:
    """The words of a searchable line that are embedded: a bullet's text without its
    authority tag and marks; None for anything else (headings, provenance, blanks)."""
    parsed = parse_fact(line)
    if parsed is None:
        return None
    body = parsed.text
    if "(" in body:  # a mark is in parentheses: most lines have none (a cold container
        body = split_marks(body)[0]  # keys every line of a memory once)
    return body.strip() or None


def line_key(body: str) -> str:
    folded = _SPACE.sub(" ", fold(body)).strip()
    return hashlib.blake2b(folded.encode(), digest_size=_KEY_CHARS // 2).hexdigest()


@dataclass
class VectorSet:
    """One model's vectors, a row per key (float32, normalised)."""

    model: str
    keys: list[str]
    matrix: Any  # numpy float32 (len(keys), dims * views), each view normalised
    views: int = 1
    _rows: dict[str, int] | None = field(default=None, repr=False)

    @property
    def rows(self) -> dict[str, int]:
        if self._rows is None:
            self._rows = {k: n for n, k in enumerate(self.keys)}
        return self._rows

    @classmethod
    def empty(cls, model: str) -> VectorSet:
        import numpy as np

        return cls(model, [], np.zeros((0, 0), dtype=np.float32))

    def scores(self, query: Any) -> dict[str, float]:
        """Each key's score with the normalised ``query`` vector (``row_scores``)."""
        if not self.keys:
            return {}
        found = row_scores(self.matrix, query, self.views)
        return {} if found is None else dict(zip(self.keys, found.tolist(), strict=True))


def row_scores(matrix: Any, query: Any, views: int) -> Any:
    """Each row's cosine with ``query`` (two views: the weighted mean of both); None
    when the rows are of another size (another model's, or other dimensions)."""
    dims = len(query)
    if matrix.ndim != 2 or matrix.shape[1] != dims * views:
        return None
    if views == 1:
        return matrix @ query
    weight = QUERY_VIEW_WEIGHT
    return (1 - weight) * (matrix[:, :dims] @ query) + weight * (matrix[:, dims:] @ query)


def encode(vectors: VectorSet) -> str:
    import numpy as np

    matrix = np.asarray(vectors.matrix, dtype=np.float32)
    dims = int(matrix.shape[1]) if matrix.size else 0
    scales = (np.abs(matrix).max(axis=1) / 127.0) if matrix.size else np.zeros(0)
    scales = np.where(scales == 0, 1.0, scales).astype("<f4")
    codes = np.rint(matrix / scales[:, None]).astype(np.int8) if matrix.size else np.zeros(0)
    return json.dumps(
        {
            "format": FORMAT,
            "model": vectors.model,
            "dims": dims,
            "views": vectors.views,
            "keys": "".join(vectors.keys),
            "scales": base64.b64encode(scales.tobytes()).decode(),
            "codes": base64.b64encode(np.asarray(codes, dtype=np.int8).tobytes()).decode(),
        },
        separators=(",", ":"),
    )


def decode(text: str, model: str) -> VectorSet | None:
    """The vectors of ``text`` if written for ``model`` in this format; None otherwise
    (another model's, an older format, or damaged: rebuilt by the next refresh)."""
    import numpy as np

    try:
        data = json.loads(text)
        if data.get("format") != FORMAT or data.get("model") != model:
            return None
        joined, dims, views = str(data["keys"]), int(data["dims"]), int(data.get("views", 1))
        keys = [joined[i : i + _KEY_CHARS] for i in range(0, len(joined), _KEY_CHARS)]
        scales = np.frombuffer(base64.b64decode(data["scales"]), dtype="<f4")
        codes = np.frombuffer(base64.b64decode(data["codes"]), dtype=np.int8)
        if not keys:
            return VectorSet.empty(model)
        matrix = codes.reshape(len(keys), dims).astype(np.float32) * scales[:, None]
        if views < 1 or dims % views:
            return None
    except (ValueError, KeyError, TypeError):
        return None
    return VectorSet(model, keys, normalised(matrix, views), views)


def normalised(matrix: Any, views: int) -> Any:
    """Each view of each row scaled to unit length."""
    import numpy as np

    parts = np.split(np.asarray(matrix, dtype=np.float32), views, axis=1)
    out = []
    for part in parts:
        norms = np.linalg.norm(part, axis=1, keepdims=True)
        out.append(part / np.where(norms == 0, 1.0, norms))
    return np.concatenate(out, axis=1) if views > 1 else out[0]


def line_keys(
    index: FileIndex, body_of: Callable[[str], str | None] = fact_body
) -> list[str | None]:
    """Each line's key (None: not searchable), derived once per index: a warm query
    over thousands of lines does not parse and hash them again."""
    name = f"line_keys:{body_of.__name__}"
    found: list[str | None] | None = index.memo.get(name)
    if found is None:
        found = [line_key(b) if (b := body_of(line)) is not None else None for line in index.lines]
        index.memo[name] = found
    return found


def keyed_lines(
    files: list[tuple[str, FileIndex]], body_of: Callable[[str], str | None] = fact_body
) -> dict[str, list[tuple[str, int]]]:
    """Each searchable line's key -> where it is: (path, 1-based line); ``body_of``: what
    of a line is embedded (a fact's text, a message as indexed)."""
    out: dict[str, list[tuple[str, int]]] = {}
    for path, index in files:
        for number, key in enumerate(line_keys(index, body_of), start=1):
            if key is not None:
                out.setdefault(key, []).append((path, number))
    return out
