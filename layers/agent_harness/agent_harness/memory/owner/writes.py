"""The storage writes of a memory (a user's, or a shared scope's): the only code in the
package that writes its files (tests/unit/test_memory_writers.py). The pipelines above
them are the owner's (``memory.owner.Memory``, which has these verbs too): every writer
goes through it but the derived indexes (memory.vectors, memory.engine.corpus,
memory.threads) and the review queue's own file format (memory.review_queue), which
call these directly.

    MEMORY.md              replace_memory (conditional), append_memory
    memory/YYYY-MM-DD.md   append_ledger (CAS append); append_archive, drop_ledger (a
                           consolidated day moved to memory/archive/)
    review/queue.jsonl     write_review (conditional)
    index/...              append_index, write_index, drop_index: what derives from them
                           (thread-search segments, ranked-index snapshots, vectors)
    every version          scrub (a rewrite without a forgotten writer), drop_versions,
                           purge (forgetting)

Each verb is one storage write under the store's own conditions (If-Match, create-only,
CAS append).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent_harness.paths import MEMORY_FILE, REVIEW_FILE, archive_path, ledger_path

if TYPE_CHECKING:
    from agent_harness.ids import User
    from agent_harness.ports import AppendBuilder
    from agent_harness.runtime import Runtime

__all__ = ["Writes"]


@dataclass(frozen=True)
class Writes:
    """The storage writes of ``owner``'s memory (a user, or ``User.for_scope``)."""

    rt: Runtime
    owner: User

    # -- MEMORY.md ---------------------------------------------------------------------
    def replace_memory(self, document: str, *, etag: str | None, writer: str) -> str:
        """MEMORY.md as ``document``: in place of the version ``etag`` names (412 when
        another was written since), or created (``etag`` None: 412 when one exists)."""
        store = self.rt.store
        if etag is None:
            return store.put(self.owner, MEMORY_FILE, document, create_only=True, writer=writer)
        return store.put(self.owner, MEMORY_FILE, document, if_match=etag, writer=writer)

    def append_memory(self, build: AppendBuilder, *, writer: str) -> str | None:
        """MEMORY.md with what ``build`` adds to the version it is given (CAS)."""
        return self.rt.store.append(self.owner, MEMORY_FILE, build, writer=writer)

    # -- ledgers -----------------------------------------------------------------------
    def append_ledger(self, day: str, build: AppendBuilder) -> str | None:
        """The day's ledger with what ``build`` adds to it (CAS; None: nothing added)."""
        return self.rt.store.append(self.owner, ledger_path(day), build)

    def append_archive(self, day: str, build: AppendBuilder) -> str | None:
        """A consolidated day's ledger copied to memory/archive/ (CAS append)."""
        return self.rt.store.append(self.owner, archive_path(day), build)

    def drop_ledger(self, day: str, *, etag: str) -> None:
        """The active ledger of an archived day deleted, if still the version ``etag``
        names (412 otherwise: it moves next time)."""
        self.rt.store.delete(self.owner, ledger_path(day), if_match=etag)

    # -- the review queue --------------------------------------------------------------
    def write_review(self, text: str, *, etag: str | None) -> str:
        """The review queue as ``text``, in place of the version ``etag`` names (None:
        created)."""
        store = self.rt.store
        if etag is None:
            return store.put(self.owner, REVIEW_FILE, text, create_only=True)
        return store.put(self.owner, REVIEW_FILE, text, if_match=etag)

    # -- what derives from them --------------------------------------------------------
    def append_index(self, path: str, build: AppendBuilder) -> str | None:
        return self.rt.store.append(self.owner, path, build)

    def write_index(self, path: str, text: str, *, etag: str | None) -> str:
        store = self.rt.store
        if etag is None:
            return store.put(self.owner, path, text, create_only=True)
        return store.put(self.owner, path, text, if_match=etag)

    def drop_index(self, path: str, *, etag: str) -> None:
        self.rt.store.delete(self.owner, path, if_match=etag)

    # -- forgetting --------------------------------------------------------------------
    def scrub(self, path: str, text: str, *, etag: str, writer: str) -> str:
        """A file rewritten without what a forgotten writer put there (conditional)."""
        return self.rt.store.put(self.owner, path, text, if_match=etag, writer=writer)

    def drop_versions(self, path: str, version_ids: list[str]) -> int:
        """Older versions of a file deleted for good (they named a forgotten writer)."""
        return self.rt.store.delete_versions(self.owner, path, version_ids)

    def purge(self) -> int:
        """Every object version and delete marker of the memory's owner, gone."""
        return self.rt.store.purge(self.owner)
