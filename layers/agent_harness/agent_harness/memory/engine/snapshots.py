"""The persisted ranked index: the format of its snapshots, one per month of files.

    index/ranked/memory-2026-11.json            memory/2026-11-*.md, indexed
    index/ranked/memory-archive-2025-01.json    memory/archive/2025-01-*.md, indexed
    index/ranked/threads-2026-11.json           index/threads/2026-11.jsonl, indexed

    {"format": 2, "terms": "<how text.terms splits a probe sentence>",
     "files": {"<path>": {"etag": "<the file's ETag when indexed>", "size": <chars>,
                          "lines": "<the lines, joined by newlines>",
                          "own": "<ints>", "before": "<ints>",
                          "after": "<ints>",
                          "postings": "|<term>:<its packed postings>|<term>:...|",
                          "sections": "[[<first line>, [[session, turn], ...] or
                                        <an earlier section naming the same>], ...]",
                          "aligned": "[[<first line>, <above>, <window>,
                                        [[[<record>, ...], <from>, <to>], ...]], ...]",
                          "sessions": [...], "turns": [...], "roles": [...], "at": [...]}}}
                          (the last four: a thread segment's per-message metadata)

    "sections": a section naming the turns an earlier one named refers to it by number
    (a session flushed whole names the same 20 turns in twenty-odd sections), so the
    list is written and read once, and ranking joins it with its turns once.

    "aligned" (a ledger's, optional): the split of its long sections by the turns their
    facts align with (``memory.engine.alignment``), so a cold query does not tokenize a
    session's messages to redo it; keyed by the settings it was made with, each part's
    turns a slice [from, to) of its section's.

    <ints>: base64 of little-endian 32-bit integers, one per line (decoded in C: as JSON
    lists they were a third of the time spent reading a snapshot). The lines are one
    text, not a list: decoded faster, and split only for the files a query shows.

A cold container reads a month's snapshot instead of GETting, parsing and indexing each
of its files: parsing a month of ledgers (about 1 MB of JSON) costs around ten
milliseconds, where building the postings of 90 ledgers cost several hundred (measured
in docs/benchmarks.md). Postings stay one text per file: a query finds each of its terms
with a string search and decodes only those.

Derived and rebuildable: an entry is used only while its ETag is the one the file has
now (anything else is read and indexed as before), and a snapshot written by another
tokenizer (``terms`` fingerprint) or format is ignored whole. ``memory.engine.corpus`` reads
and writes them; this module is pure.
"""

from __future__ import annotations

import base64
import json
import sys
from array import array
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from agent_harness.memory.engine.file_index import Exported, FileIndex, Links
from agent_harness.memory.engine.segments import Segment
from agent_harness.text import terms

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["FORMAT", "Entry", "decode_ledger", "decode_segment", "encode", "read", "render"]

#: bump when an entry's fields or the meaning of postings change (2: postings without
#: newlines and tabs, integer columns as base64, the lines as one text)
FORMAT = 2
#: words that exercise every step of ``terms`` (folding, stopwords, plurals, stemming,
#: irregular forms, CJK bigrams): a change of tokenizer changes their terms, and old
#: snapshots are ignored
_PROBE = "The RUNNING families painted hiking Happiness kinds went 東京タワー Äpfel 2023"

Entry = dict[str, Any]


@lru_cache(maxsize=1)
def fingerprint() -> str:
    return " ".join(terms(_PROBE))


def read(text: str) -> dict[str, Entry]:
    """A snapshot's entries by path; none if it is damaged, another format, or was
    written with another tokenizer."""
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return {}
    if data.get("terms") != fingerprint() or not isinstance(data.get("files"), dict):
        return {}
    files: dict[str, Entry] = data["files"]
    return files


def render(files: dict[str, Entry]) -> str:
    """The snapshot's text, ASCII only (other characters escaped): one em dash in a month
    of ledgers made the whole text two bytes a character, and reading it a fifth slower."""
    body = {"format": FORMAT, "terms": fingerprint(), "files": dict(sorted(files.items()))}
    return json.dumps(body, separators=(",", ":"))


def encode(parsed: FileIndex | Segment, etag: str) -> Entry:
    """The entry of one parsed file (a ledger's index or a thread segment)."""
    index = parsed.index if isinstance(parsed, Segment) else parsed
    exported = index.export()
    entry: Entry = {
        "etag": etag,
        "size": parsed.size,
        "lines": _joined(index.lines),
        "own": _ints_text(exported.own),
        "before": _ints_text(exported.before),
        "after": _ints_text(exported.after),
        "postings": exported.postings,
        "sections": exported.sections,
    }
    if isinstance(parsed, Segment) and index.links is not None:
        sessions, turns = index.links
        entry.update(sessions=sessions, turns=turns, roles=parsed.roles, at=parsed.at)
    elif index.aligned:
        entry["aligned"] = _aligned_text(index)
    return entry


def _joined(lines: list[str]) -> str:
    if any("\n" in line for line in lines):  # a line never holds one (both parsers split)
        raise ValueError("a line holds a newline")
    return "\n".join(lines)


def _ints_text(values: Sequence[int]) -> str:
    packed = array("i", values)
    if sys.byteorder != "little":
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


def _ints(text: object) -> array[int]:
    if not isinstance(text, str):
        raise ValueError("a damaged snapshot entry")
    packed = array("i")
    packed.frombytes(base64.b64decode(text, validate=True))  # binascii.Error is a ValueError
    if sys.byteorder != "little":
        packed.byteswap()
    return packed


def _exported(entry: Entry) -> Exported:
    own, before, after = (_ints(entry[name]) for name in ("own", "before", "after"))
    texts = (entry["lines"], entry["postings"], entry["sections"])
    if len({len(own), len(before), len(after)}) != 1 or not all(isinstance(t, str) for t in texts):
        raise ValueError("a damaged snapshot entry")
    return Exported(own, before, after, entry["postings"], entry["sections"])


def decode_ledger(entry: Entry) -> FileIndex:
    """A ledger's index from its entry, ready to rank (raises KeyError/TypeError/ValueError
    on an entry that is not one)."""
    index = FileIndex.restore(entry["lines"], int(entry["size"]), _exported(entry))
    index.aligned.update(_aligned(index, entry.get("aligned")))
    return index


def _aligned_text(index: FileIndex) -> str:
    return json.dumps([[*key, split] for key, split in sorted(index.aligned.items())])


def _aligned(index: FileIndex, text: object) -> dict[tuple[int, int, int], list[Any]]:
    """The entry's alignment splits; none if absent or damaged (they can be redone)."""
    if not isinstance(text, str):
        return {}
    records = len(index.own_lengths())
    out: dict[tuple[int, int, int], list[Any]] = {}
    try:
        for start, above, window, split in json.loads(text):
            turns = len(index.keys_of(start))
            parts = [(numbers, lo, hi) for numbers, lo, hi in split]
            for numbers, lo, hi in parts:  # records ascending, as the split made them
                if not numbers or numbers[0] < 0 or numbers[-1] >= records:
                    return {}
                if not 0 <= lo < hi <= turns:
                    return {}
            out[(start, above, window)] = parts
    except (TypeError, ValueError):
        return {}
    return out


def decode_segment(entry: Entry) -> Segment:
    """A thread segment from its entry, ready to rank."""
    exported = _exported(entry)
    columns = [entry[name] for name in ("sessions", "turns", "roles", "at")]
    if not all(isinstance(c, list) and len(c) == len(exported.own) for c in columns):
        raise ValueError("a damaged snapshot entry")
    sessions, turns, roles, at = columns
    links = Links(sessions, turns)
    index = FileIndex.restore(entry["lines"], int(entry["size"]), exported, links)
    return Segment(index=index, roles=roles, at=at, size=int(entry["size"]))
