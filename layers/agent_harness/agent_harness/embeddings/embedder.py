"""Every embedding call goes through here: batches, size caps, a deadline, usage,
metrics, and the fall back to lexical ranking.

    passages(texts)   indexing, off the request path (the post-turn job, a backfill):
                      batches of HARNESS_EMBEDDING_BATCH texts, each cut to
                      HARNESS_EMBEDDING_MAX_CHARS; a failure raises (the job retries)
    query(text)       the request path, once per turn or search: bounded by
                      HARNESS_EMBEDDING_TIMEOUT_SECONDS and the invocation's deadline; a
                      failure or a slow answer returns None (ranking stays lexical), is
                      logged and counted (``EmbeddingFallbacks``), and the provider is
                      left alone for ``PAUSE_SECONDS`` so a down provider costs one
                      turn its timeout, not every turn

Usage is counted under the ``embedding`` role (tokens estimated with the shipped
tokenizer; no provider bills output): the caller passes where the spend goes (a job's
``record_spend``, a turn's meter). Vectors come back normalised, float32, one row per
text (numpy is imported on first use: a handler's init never pays for it).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.errors import HarnessError
from agent_harness.models.base import Usage

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from agent_harness.embeddings.base import EmbeddingModel, Kind
    from agent_harness.tokens import TokenCounter

__all__ = ["PAUSE_SECONDS", "Embedder"]

logger = Logger(child=True)
metrics = Metrics()

#: after a failed query embedding, queries skip the provider this long
PAUSE_SECONDS = 30.0


class Embedder:
    def __init__(
        self,
        model: EmbeddingModel,
        *,
        batch: int = 64,
        max_chars: int = 2000,
        timeout_seconds: float = 3.0,
        counter: TokenCounter | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.model = model
        self.name = model.name
        self.batch = batch
        self.max_chars = max_chars
        self.timeout_seconds = timeout_seconds
        self._counter = counter
        self._clock = clock
        self._paused_until = 0.0
        self.calls = 0
        #: a model trained with a prefix per side embeds each line twice, as a passage
        #: and as a query (memory.engine.vectors: two views)
        self.views = 2 if getattr(model, "asymmetric", False) else 1

    def lines(self, texts: Sequence[str], spend: Callable[[Usage], None] | None = None) -> Any:
        """The stored vectors of memory lines: one row per text, ``views`` normalised
        vectors side by side (the passage view, then the query view)."""
        import numpy as np

        rows = self.passages(texts, spend)
        if self.views == 1 or not len(texts):
            return rows
        as_queries = np.concatenate(
            [
                self._call([t[: self.max_chars] for t in texts[i : i + self.batch]], "query", spend)
                for i in range(0, len(texts), self.batch)
            ]
        )
        return np.concatenate([rows, as_queries], axis=1)

    def passages(self, texts: Sequence[str], spend: Callable[[Usage], None] | None = None) -> Any:
        """One normalised row per text (a ``numpy`` float32 matrix). Raises the
        provider's ``ModelError`` (or a ``HarnessError``) when a batch fails."""
        import numpy as np

        rows = [
            self._call([t[: self.max_chars] for t in texts[i : i + self.batch]], "passage", spend)
            for i in range(0, len(texts), self.batch)
        ]
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        return np.concatenate(rows)

    def query(
        self,
        text: str,
        spend: Callable[[Usage], None] | None = None,
        *,
        seconds_left: float | None = None,
    ) -> Any:
        """The query's normalised vector, or None: the provider failed, was too slow, is
        paused after a failure, or there is no time left."""
        now = self._clock()
        if now < self._paused_until or (seconds_left is not None and seconds_left <= 0):
            metrics.add_metric("EmbeddingFallbacks", MetricUnit.Count, 1)
            return None
        try:
            row = self._call([text[: self.max_chars]], "query", spend)[0]
        except HarnessError as exc:
            self._paused_until = self._clock() + PAUSE_SECONDS
            metrics.add_metric("EmbeddingFallbacks", MetricUnit.Count, 1)
            logger.warning(
                "query embedding failed: ranking stays lexical",
                extra={"model": self.name, "error": str(exc)},
            )
            return None
        took = self._clock() - now
        limit = (
            self.timeout_seconds
            if seconds_left is None
            else min(self.timeout_seconds, seconds_left)
        )
        if took > limit:
            # too slow to wait for next time: its vector is used, the provider is paused
            self._paused_until = self._clock() + PAUSE_SECONDS
            metrics.add_metric("EmbeddingSlowQueries", MetricUnit.Count, 1)
        return row

    def queries(self, texts: Sequence[str], spend: Callable[[Usage], None] | None = None) -> Any:
        """Several queries at once (a job's: the messages of a flush window), one row
        each, or None when the provider fails (logged and counted, as ``query``)."""
        import numpy as np

        if not texts:
            return None
        try:
            return np.concatenate(
                [
                    self._call(
                        [t[: self.max_chars] for t in texts[i : i + self.batch]], "query", spend
                    )
                    for i in range(0, len(texts), self.batch)
                ]
            )
        except HarnessError as exc:
            metrics.add_metric("EmbeddingFallbacks", MetricUnit.Count, 1)
            logger.warning(
                "query embedding failed: ranking stays lexical",
                extra={"model": self.name, "error": str(exc)},
            )
            return None

    def _call(self, texts: list[str], kind: Kind, spend: Callable[[Usage], None] | None) -> Any:
        import numpy as np

        started = self._clock()
        raw = self.model.embed(texts, kind)
        matrix = np.asarray(raw, dtype=np.float32).reshape(len(texts), -1)
        if matrix.shape[1] == 0 or not np.all(np.isfinite(matrix)):
            from agent_harness.errors import ModelOutputError

            raise ModelOutputError(f"embedding model {self.name} answered no usable vectors")
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = (matrix / np.where(norms == 0, 1.0, norms)).astype(np.float32)
        self.calls += 1
        tokens = sum(self._tokens(t) for t in texts)
        metrics.add_metric("EmbeddingCalls", MetricUnit.Count, 1)
        metrics.add_metric("EmbeddingTexts", MetricUnit.Count, len(texts))
        metrics.add_metric("EmbeddingTokens", MetricUnit.Count, tokens)
        logger.debug(
            "embedding call",
            extra={
                "model": self.name,
                "kind": kind,
                "texts": len(texts),
                "ms": round((self._clock() - started) * 1000, 1),
            },
        )
        if spend is not None:
            spend(Usage(input_tokens=tokens, output_tokens=0))
        return matrix

    def _tokens(self, text: str) -> int:
        if self._counter is None:
            return max(1, len(text) // 4)
        return self._counter.count(text)
