"""Writing memories: embed drafts and write them to the database of their tier, now (`add`,
import) or in the background (`persist_turn`, access refreshes).

A failing model never loses a memory: it is written without a vector and found by token
recall. Background failures are logged and counted, never raised to a turn.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .background import BackgroundWriter
from .derive import Pending, TurnDeriver, TurnJob
from .merging import MemoryDraft
from .models import Memory
from .places import MemoryPlaces

if TYPE_CHECKING:
    from ..storage.embeddings import Embedder

log = logging.getLogger(__name__)

Drafts = list[tuple[MemoryDraft, np.ndarray | None]]


@dataclass(frozen=True)
class TouchJob:
    """Memories a search returned: their recency restarts at `at`."""

    ids: tuple[str, ...]
    at: float


class Counters:
    """Fallbacks taken (a model failed, the memory layer carried on), for `stats`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.values = {"extract_errors": 0, "embed_errors": 0}

    def count(self, counter: str, exc: Exception) -> None:
        log.warning("memory %s: %s: %s", counter.replace("_", " "), type(exc).__name__, exc)
        with self._lock:
            self.values[counter] += 1


class MemoryWrites:
    """Every write to memory goes through here: drafts are embedded in one call, grouped by
    database and written in one transaction each (merging near-duplicates)."""

    def __init__(
        self,
        places: MemoryPlaces,
        deriver: TurnDeriver,
        embedder: Embedder | None,
        counters: Counters,
    ) -> None:
        self.places = places
        self.deriver = deriver
        self.embedder = embedder
        self.counters = counters
        self.on_write: Callable[[], None] | None = None  # after every write
        self._background: BackgroundWriter[TurnJob | TouchJob, Drafts | TouchJob] = (
            BackgroundWriter(self._prepare, self._commit)
        )

    def embed(self, texts: Sequence[str]) -> list[np.ndarray | None]:
        """Vectors for texts, or None each when there is no model or it fails."""
        if self.embedder is None or not texts:
            return [None] * len(texts)
        try:
            return list(self.embedder.encode(list(texts)))
        except Exception as exc:
            self.counters.count("embed_errors", exc)
            return [None] * len(texts)

    def write(self, drafts: Sequence[MemoryDraft]) -> list[Memory]:
        """Embed and write drafts now; the memories written (or merged into), in order."""
        return self._write(list(zip(drafts, self.embed([d.text for d in drafts]), strict=True)))

    def _write(self, drafts: Drafts) -> list[Memory]:
        written: dict[int, Memory] = {}
        for account in (False, True):
            group = [
                (i, d) for i, d in enumerate(drafts) if self.places.is_private(d[0].tier) == account
            ]
            if group:
                repo = self.places.account(create=True) if account else self.places.repo
                assert repo is not None  # create=True always answers a repository
                results = repo.save([d for _, d in group])
                written |= {i: r.memory for (i, _), r in zip(group, results, strict=True)}
        if self.on_write is not None:
            self.on_write()
        return [written[i] for i in range(len(drafts))]

    # --- in the background ---------------------------------------------------------------

    def submit_turn(self, job: TurnJob) -> bool:
        return self._background.submit(job)

    def submit_touch(self, ids: Sequence[str], at: float) -> None:
        if ids:
            self._background.submit(TouchJob(tuple(ids), at))

    def _prepare(self, jobs: list[TurnJob | TouchJob]) -> list[Drafts | TouchJob]:
        """Derive every turn of the batch, then embed all their texts in one call."""
        pending = Pending()
        derived = [job if isinstance(job, TouchJob) else self.deriver.derive(job, pending)
                   for job in jobs]  # fmt: skip
        texts = [d.text for item in derived if isinstance(item, list) for d in item]
        vectors = iter(self.embed(texts))
        return [
            item if isinstance(item, TouchJob) else [(d, next(vectors)) for d in item]
            for item in derived
        ]

    def _commit(self, item: Drafts | TouchJob) -> None:
        if isinstance(item, TouchJob):
            for repo in self.places.repos():
                repo.touch(item.ids, item.at)
        else:
            self._write(item)

    def flush(self, timeout: float | None = None) -> bool:
        return self._background.flush(timeout)

    @property
    def stats(self) -> dict[str, Any]:
        s = self._background.stats
        return {
            "submitted": s.submitted,
            "written": s.written,
            "errors": s.errors,
            "pending": s.pending,
            "last_error": s.last_error,
            **self.counters.values,
        }

    def close(self, timeout: float | None) -> None:
        self._background.close(timeout)
