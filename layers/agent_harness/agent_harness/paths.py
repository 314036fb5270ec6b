"""Every key of a user's workspace, relative to the user's root (``users/<user key>/``).

The one owner of the workspace layout (see docs/design.md#workspace-layout): services build
and recognise paths only through these names, so a layout change is one edit here.

    MEMORY.md                                curated memory (layer 2), ETag-guarded
    AGENTS.md                                the user's persona, read with MEMORY.md
    memory/YYYY-MM-DD.md                     daily ledgers (layer 1), append-only
    memory/archive/YYYY-MM-DD.md             ledgers past the retention, still searchable
    sessions/<s>/turns/<n>.json              a turn's messages, create-only (the thread log)
    sessions/<s>/context.json                a session's compacted context
    sessions/<s>/conversation.json           a session served as an OpenAI conversation
    tool-results/<s>/<call>-<sha>.txt        an evicted tool result, content-addressed
    index/threads/YYYY-MM.jsonl              derived thread-search segments, rebuildable
    index/ranked/<files>-YYYY-MM.json        derived ranked-index snapshots, rebuildable
    index/vectors/<model>/memory.json        derived vectors of memory lines, rebuildable
    index/vectors/<model>/threads-YYYY-MM.json   derived vectors of a month's messages
    review/queue.jsonl                       lines the gate held for a person's review
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datetime import datetime

__all__ = [
    "AGENTS_FILE",
    "LEDGER_DIR",
    "MEMORY_FILE",
    "REVIEW_FILE",
    "SCOPE_ROOT",
    "SEGMENT_DIR",
    "SNAPSHOT_DIR",
    "USER_ROOT",
    "VECTOR_DIR",
    "archive_day",
    "archive_path",
    "context_path",
    "conversation_path",
    "ledger_date",
    "ledger_day",
    "ledger_path",
    "segment_path",
    "snapshot_path",
    "snapshot_sources",
    "tool_result_path",
    "turn_path",
    "turns_prefix",
    "user_root",
]

USER_ROOT = "users/"
#: shared memory scopes' roots: ``scopes/<kind>/<name>/``, ``scopes/org/`` (``scopes``)
SCOPE_ROOT = "scopes/"
MEMORY_FILE = "MEMORY.md"
AGENTS_FILE = "AGENTS.md"
LEDGER_DIR = "memory/"
SEGMENT_DIR = "index/threads"
SNAPSHOT_DIR = "index/ranked/"
#: vectors of memory lines, one object per embedding model (memory.engine.vectors)
VECTOR_DIR = "index/vectors/"
#: outside memory/ and index/: nothing held for review is searched or injected
REVIEW_FILE = "review/queue.jsonl"
_LEDGER_FILE = re.compile(r"memory/(\d{4}-\d{2}-\d{2})\.md")
_ARCHIVE_FILE = re.compile(r"memory/archive/(\d{4}-\d{2}-\d{2})\.md")
_ANY_LEDGER = re.compile(r"(\d{4})-(\d{2})-(\d{2})\.md$")


def user_root(user_key: str) -> str:
    """The S3 prefix of one user's workspace; keys never contain ``/``, so no user's
    root is a prefix of another's. A shared scope's key (``project.apollo``: a ``.``,
    which a user's key never holds) roots under ``scopes/``: ``scopes/project/apollo/``."""
    if "." in user_key:
        kind, _, name = user_key.partition(".")
        return f"{SCOPE_ROOT}{kind}/{name}/" if name else f"{SCOPE_ROOT}{kind}/"
    return f"{USER_ROOT}{user_key}/"


def ledger_path(day: str) -> str:
    return f"{LEDGER_DIR}{day}.md"


def archive_path(day: str) -> str:
    return f"{LEDGER_DIR}archive/{day}.md"


def ledger_day(path: str) -> str | None:
    """The day of an active ledger's path (``memory/2026-11-30.md``); None otherwise."""
    match = _LEDGER_FILE.fullmatch(path)
    return match.group(1) if match else None


def archive_day(path: str) -> str | None:
    """The day of an archived ledger's path (``memory/archive/2026-08-01.md``)."""
    match = _ARCHIVE_FILE.fullmatch(path)
    return match.group(1) if match else None


def ledger_date(path: str) -> tuple[int, int, int] | None:
    """(year, month, day) of any ledger's path, archived ones included; None otherwise."""
    match = _ANY_LEDGER.search(path)
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def turns_prefix(session_id: str) -> str:
    return f"sessions/{session_id}/turns"


def turn_path(session_id: str, turn: int) -> str:
    """Zero-padded so a LIST returns turns in order."""
    return f"{turns_prefix(session_id)}/{turn:08d}.json"


def context_path(session_id: str) -> str:
    return f"sessions/{session_id}/context.json"


def conversation_path(session_id: str) -> str:
    return f"sessions/{session_id}/conversation.json"


def tool_result_path(session_id: str, call_id: str, digest: str) -> str:
    return f"tool-results/{session_id}/{call_id}-{digest}.txt"


def segment_path(moment: datetime) -> str:
    """The month segment of thread search holding a message of ``moment`` (already in
    the configured zone)."""
    return f"{SEGMENT_DIR}/{moment:%Y-%m}.jsonl"


#: the files a ranked-index snapshot holds, a month of each: (snapshot name, the files'
#: path pattern, the folder that holds them, not its subfolders)
_SNAPSHOTS = (
    ("memory", re.compile(r"memory/(\d{4}-\d{2})-\d{2}\.md"), LEDGER_DIR),
    ("memory-archive", re.compile(r"memory/archive/(\d{4}-\d{2})-\d{2}\.md"), "memory/archive/"),
    ("threads", re.compile(r"index/threads/(\d{4}-\d{2})\.jsonl"), f"{SEGMENT_DIR}/"),
)
_SNAPSHOT_FILE = re.compile(r"index/ranked/([a-z-]+)-(\d{4}-\d{2})\.json")


def snapshot_path(path: str) -> str | None:
    """The ranked-index snapshot that holds ``path``: a month of active ledgers, of
    archived ledgers, or a month's thread segment; None for any other file."""
    for name, pattern, _ in _SNAPSHOTS:
        if match := pattern.fullmatch(path):
            return f"{SNAPSHOT_DIR}{name}-{match[1]}.json"
    return None


def snapshot_sources(snapshot: str) -> str | None:
    """The folder whose files (not its subfolders') ``snapshot`` holds some of; None:
    not a snapshot path."""
    match = _SNAPSHOT_FILE.fullmatch(snapshot)
    if match is None:
        return None
    return {name: folder for name, _, folder in _SNAPSHOTS}.get(match[1])
