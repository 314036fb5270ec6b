"""Ledger retention: daily ledgers older than ``daily_file_retention_days`` move to
``memory/archive/YYYY-MM-DD.md``. Retention moves files; it never forgets them:
memory_search and memory_get read the archive like any ledger.

Runs inside a user's consolidation, under its lease, after MEMORY.md is written:

    for each ledger day < today - retention (strict, in the configured zone)
        whose bytes are all consolidated (watermark == size):
      archive file += ledger content                  S3 create-only / CAS append
      DELETE ledger If-Match <the ETag read>           S3 conditional delete

A day not yet consolidated stays until it is (imported old history, say). A flush that
appends to the day between the read and the delete makes the delete fail (412): the
day stays and the next run moves it whole. A crash between the two writes is repaired
by the next run, which finds the content already at the archive's end and only
deletes. So the move is idempotent and loses nothing.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from agent_harness.errors import PreconditionFailedError
from agent_harness.memory.owner import Memory
from agent_harness.paths import ledger_path

if TYPE_CHECKING:
    from agent_harness.ids import User
    from agent_harness.runtime import Runtime

__all__ = ["archive_cutoff", "archive_ledgers"]

SECTION = "\n## "

logger = Logger(child=True)


def archive_cutoff(today: date, retention_days: int) -> str:
    """Days strictly before this one are archived: retention 90 on 2026-08-22 keeps
    2026-05-24 and archives 2026-05-23 (the reference's boundary)."""
    return (today - timedelta(days=retention_days)).isoformat()


def archive_ledgers(
    rt: Runtime, user: User, sizes: dict[str, int], consumed: dict[str, int]
) -> list[str]:
    """Move the old, fully consolidated ledgers of ``user`` to the archive; returns the
    days moved (their watermark entries can go)."""
    today = rt.clock.now().astimezone(rt.settings.zone).date()
    cutoff = archive_cutoff(today, rt.settings.daily_file_retention_days)
    moved: list[str] = []
    for day in sorted(d for d in sizes if d < cutoff):
        if consumed.get(day, 0) < sizes[day]:
            continue  # not consolidated yet: it moves after the run that merges it
        if _move(rt, user, day):
            moved.append(day)
    if moved:
        logger.info("archived ledgers", extra={"days": moved})
    return moved


def _move(rt: Runtime, user: User, day: str) -> bool:
    source = rt.store.get(user, ledger_path(day))
    if source is None:
        return False
    content = source.content

    def build(existing: str) -> str | None:
        # an earlier, interrupted move may have copied a first part already
        done = _copied_prefix(existing, content)
        rest = content[done:]
        if not rest:
            return None
        return ("\n" if existing and not existing.endswith("\n") else "") + rest

    memory = Memory(rt, user)
    memory.append_archive(day, build)
    try:
        memory.drop_ledger(day, etag=source.etag)
    except PreconditionFailedError:
        logger.info("ledger changed while archiving; it moves next time", extra={"day": day})
        return False
    return True


def _copied_prefix(archive: str, content: str) -> int:
    """How much of ``content`` (up to a section boundary) already ends the archive."""
    cuts = [len(content)]
    at = content.rfind(SECTION)
    while at > 0:
        cuts.append(at)
        at = content.rfind(SECTION, 0, at)
    for cut in cuts:
        if archive.endswith(content[:cut]):
            return cut
    return 0
