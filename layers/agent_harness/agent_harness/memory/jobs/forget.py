"""Forget a user entirely (DELETE /v1/memory, the operator CLI's ``forget``).

    shared scopes they wrote into (scopes.note_writer's records, in their partition):
        review queue: their pending proposals dropped                 CAS rewrite
        every other object naming them (``by=<key>`` in a source line
        or a version's writer): its current version anonymised        CAS rewrite
        (``by=(forgotten)``, the line's ``session=`` too); derived
        snapshots naming them deleted, rebuilt on the next search
        every older version naming them deleted for good               DeleteObjects
    S3: every version and delete marker under users/<key>/    ListObjectVersions + DeleteObjects
        (MEMORY.md and its snapshots, ledgers, archive, thread logs, working contexts,
         evicted tool results, thread-search segments)
    DynamoDB: every item of the user's partition              Query + BatchWriteItem
        (sessions, leases, cursors, throttle gates, watermark, due marks, memberships,
         the scopes' records)
    SQS: the dead letters naming the user (a failed post-turn or consolidation job names
        its user and session): deleted; every other one put back at once
    S3 again: anything a call already in flight wrote meanwhile

What they promoted and a maintainer accepted stays in the scope: it is the scope's
knowledge now, without their name (docs/design.md#memory-scopes). The scopes go first:
their records live in the partition deleted next, so a forget that fails half-way is
simply run again. Jobs still queued for the user find no session or nothing to merge
and do nothing (a consolidation job removes the user item its own lease created).
Powertools idempotency records hold a job hash and an outcome word, no user data, and
expire within hours.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.errors import PreconditionFailedError, StoreError
from agent_harness.ids import User
from agent_harness.memory.facts.ledger import writer_named
from agent_harness.memory.owner import Memory
from agent_harness.paths import REVIEW_FILE, SNAPSHOT_DIR
from agent_harness.ports import ForgetOutcome, Scrubbed

if TYPE_CHECKING:
    from agent_harness.ports import StoredObject
    from agent_harness.runtime import Runtime

__all__ = ["ANONYMOUS", "ForgetOutcome", "Scrubbed", "erase", "forget_user", "scrub_scope"]

logger = Logger(child=True)
metrics = Metrics()

#: who a forgotten writer becomes: parentheses never occur in a user key
ANONYMOUS = "(forgotten)"
#: S3's clock and this function's may differ: versions this much older than the first
#: record are read too
_SKEW = timedelta(minutes=10)
_ATTEMPTS = 8
_WRITER = "forget: a writer anonymised"
_SESSION = re.compile(r"\bsession=\S+")


def erase(rt: Runtime, user: User) -> ForgetOutcome:
    """Forget ``user`` where the erasure rights are: deployed, the forget function (the
    agent function, which faces the internet, holds none: docs/deploy.md#permissions);
    in tests and the operator's tools, here."""
    if rt.eraser is not None:
        return rt.eraser.forget(user)
    return forget_user(rt, user)


def forget_user(rt: Runtime, user: User) -> ForgetOutcome:
    scrubbed = Scrubbed()
    for scope, since in rt.table.written_by(user).items():
        scrub_scope(rt, user, User.for_scope(scope), since, scrubbed)
    versions = Memory(rt, user).purge()
    items = rt.table.purge_user(user)
    letters = rt.queue.drop_dead_letters(user)
    versions += Memory(rt, user).purge()
    metrics.add_metric("UsersForgotten", MetricUnit.Count, 1)
    logger.info(
        "user forgotten",
        extra={
            "object_versions": versions,
            "items": items,
            "scopes": scrubbed.scopes,
            "dead_letters": letters,
        },
    )
    return ForgetOutcome(versions, items, scrubbed, letters)


def scrub_scope(rt: Runtime, user: User, scope: User, since: str, done: Scrubbed) -> None:
    """Take ``user`` out of ``scope``'s memory, counted into ``done``: every path with a
    version from ``since`` (their first write there) on, current version first, then
    the older ones."""
    from agent_harness.memory.review import drop_where

    mentions = writer_named(user)
    try:
        floor = datetime.fromisoformat(since) - _SKEW
    except ValueError:
        floor = datetime.min.replace(tzinfo=UTC)  # unreadable: every version is read
    done.scopes += 1
    for path in rt.store.changed_since(scope, floor):
        derived = path.startswith(SNAPSHOT_DIR)  # rebuilt by the next search: no rewrite
        if path == REVIEW_FILE:
            done.proposals += drop_where(rt, scope, lambda text: bool(mentions.search(text)))
        elif not derived:
            done.anonymised += _anonymise(rt, scope, path, mentions)
        doomed = [
            v.version_id
            for v in rt.store.list_versions(scope, path)
            if (derived or not v.is_latest)
            and (v.last_modified is None or v.last_modified >= floor)
            and _names(mentions, rt.store.get_version(scope, path, v.version_id))
        ]
        if doomed:
            done.versions += Memory(rt, scope).drop_versions(path, doomed)
    rt.listings.forget(scope.key)  # this container's bound sessions list it again
    logger.info("a forgotten writer taken out of a scope", extra={"scope": scope.id})


def _names(mentions: re.Pattern[str], obj: StoredObject | None) -> bool:
    """Does this version name the writer, in its text or its writer label?"""
    if obj is None:
        return False
    return bool(mentions.search(obj.content) or mentions.search(obj.writer or ""))


def _anonymise(rt: Runtime, scope: User, path: str, mentions: re.Pattern[str]) -> int:
    """Rewrite the current version without the user (If-Match, again after a lost race
    with an append): 1 if it named them, else 0."""
    for _ in range(_ATTEMPTS):
        current = rt.store.get(scope, path)
        if current is None or not _names(mentions, current):
            return 0
        text = "".join(
            _SESSION.sub("session=" + ANONYMOUS, mentions.sub(ANONYMOUS, line))
            if mentions.search(line)
            else line
            for line in current.content.splitlines(keepends=True)
        )
        try:
            Memory(rt, scope).scrub(path, text, etag=current.etag, writer=_WRITER)
            return 1
        except PreconditionFailedError:
            continue
    raise StoreError(f"anonymising {path} failed: too many concurrent writers")
