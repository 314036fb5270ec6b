"""What the memory routes answer (docs/api.md): MEMORY.md and its versions, the ledgers,
search, saving, facts and their corrections, consolidation, the review queue, promotion.
The response schemas of the OpenAPI document, as api.answers has the rest (its module
docstring says how a field's default reads); imported only by api.openapi.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "ConsolidationQueued",
    "ConsolidationStatus",
    "Decision",
    "Fact",
    "Ledger",
    "LedgerDays",
    "MemoryDocument",
    "MemorySearch",
    "MemoryVersions",
    "MemoryWrite",
    "Promotion",
    "ReviewQueue",
    "Rollback",
    "SaveAnswer",
    "Supersession",
]


class _Answer(BaseModel):
    model_config = ConfigDict(defer_build=True)


# -- memory -----------------------------------------------------------------------------------
class MemoryDocument(_Answer):
    content: str
    etag: str | None
    scope: str | None = None


class MemoryWrite(_Answer):
    etag: str | None
    content: str
    held: int


class MemoryVersion(_Answer):
    version_id: str
    last_modified: str | None
    etag: str | None
    size: int
    is_latest: bool


class MemoryVersions(_Answer):
    versions: list[MemoryVersion]
    next_cursor: str | None


class Rollback(_Answer):
    etag: str | None
    restored_version_id: str
    held: int


class LedgerDay(_Answer):
    day: str
    size: int
    last_modified: str | None


class LedgerDays(_Answer):
    days: list[LedgerDay]


class Ledger(_Answer):
    day: str
    content: str


class MemoryHit(_Answer):
    path: str
    line: int
    text: str
    authority: str | None
    score: float | None = None
    matched: str | None = None
    match_mode: str | None = None
    fact_id: str | None = None
    state: str | None = None
    by: str | None = None
    at: str | None = None
    recheck: list[str] | None = None


class MemorySearch(_Answer):
    hits: list[MemoryHit]
    match_mode: str | None = None
    message: str | None = None
    scope: str | None = None


class SaveAnswer(_Answer):
    saved: int
    held: int
    scope: str | None = None


class Promotion(_Answer):
    scope: str
    status: Literal["queued", "promoted"]
    promoted: int
    queued: int
    items: list[str]


class FactBrief(_Answer):
    id: str
    text: str
    authority: str | None
    day: str
    recorded: str
    state: str
    by: str | None
    at: str | None


class Fact(_Answer):
    """A ledger fact, where it stands, and its story."""

    id: str
    text: str
    authority: str | None
    day: str
    recorded: str
    state: str
    by: str | None
    at: str | None
    line: int
    valid_from: str | None
    until: str | None
    depends: list[str]
    recheck: list[str]
    history: list[FactBrief]


class Supersession(_Answer):
    """The record written (``id``), the fact it retired, and that fact now."""

    id: str
    retired: str
    state: Literal["superseded", "retracted"]
    fact: Fact


class ConsolidationFailure(_Answer):
    at: str | None
    error: str | None
    failures: int
    retry_at: str | None


class ConsolidationStatus(_Answer):
    due: bool
    last_consolidated_at: str | None
    last_failure: ConsolidationFailure | None


class ConsolidationQueued(_Answer):
    status: Literal["queued"]
    requested_at: str
    consolidation: ConsolidationStatus
    last_failure: ConsolidationFailure | None


class ReviewItem(_Answer):
    id: str
    text: str
    authority: str
    reason: str
    source: str
    writer: str
    day: str
    created_at: str


class ReviewQueue(_Answer):
    items: list[ReviewItem]
    scope: str | None = None


class Decision(_Answer):
    id: str
    action: Literal["approve", "reject"]
    written: list[str]
