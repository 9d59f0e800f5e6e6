"""Exact nearest neighbours over one contiguous, normalized float32 matrix in memory.

At the scales vaultctx targets (100k blocks: ~6 ms per query with numpy) an exact search is
fast enough and never misses, so there is no approximate index to build or tune.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass

import numpy as np


def dot_rows(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """matrix @ vector without BLAS threads: a multithreaded BLAS spends far longer waking
    its threads than computing when the CPU is shared (an editor, an indexer), while this
    single-threaded loop stays within a few milliseconds at 100k rows."""
    return np.einsum("ij,j->i", matrix, vector.astype(np.float32, copy=False))


@dataclass(frozen=True)
class VectorMatrix:
    generation: str | None
    model: str
    block_ids: np.ndarray  # int64, row -> block id
    note_ids: np.ndarray  # int64, row -> note id
    matrix: np.ndarray  # float32 (n, dim), C-contiguous, unit rows

    @property
    def size(self) -> int:
        return int(self.block_ids.shape[0])

    def search(
        self, query: np.ndarray, k: int, allowed_notes: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-k rows by cosine similarity: (block ids, scores), best first.

        `allowed_notes` (sorted note ids) restricts the search to those notes' blocks.
        """
        if self.size == 0 or k <= 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        scores = dot_rows(self.matrix, query)
        if allowed_notes is not None:
            mask = np.isin(self.note_ids, allowed_notes, assume_unique=False)
            scores = np.where(mask, scores, -np.inf)
            k = min(k, int(mask.sum()))
            if k == 0:
                return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        k = min(k, self.size)
        top = np.argpartition(-scores, k - 1)[:k] if k < self.size else np.arange(self.size)
        # Stable order: score descending, then block id, so ties never reorder between runs.
        order = np.lexsort((self.block_ids[top], -scores[top]))
        top = top[order]
        return self.block_ids[top], scores[top]

    def rows_for_notes(self, note_ids: np.ndarray) -> np.ndarray:
        return np.nonzero(np.isin(self.note_ids, note_ids))[0]


class VectorStore:
    """Loads the matrix from the index once and again only when the index generation moves."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: VectorMatrix | None = None

    def get(self, conn: sqlite3.Connection, generation: str | None, model: str) -> VectorMatrix:
        current = self._current
        if current is not None and current.generation == generation and current.model == model:
            return current
        with self._lock:
            current = self._current
            if current is None or current.generation != generation or current.model != model:
                current = load_matrix(conn, generation, model)
                self._current = current
        return current


def load_matrix(conn: sqlite3.Connection, generation: str | None, model: str) -> VectorMatrix:
    rows = conn.execute(
        "SELECT b.id, b.note_id, e.vector FROM blocks b"
        " JOIN embeddings e ON e.model = ? AND e.hash = b.embed_hash ORDER BY b.id",
        (model,),
    ).fetchall()
    if not rows:
        empty = np.empty(0, dtype=np.int64)
        return VectorMatrix(generation, model, empty, empty, np.zeros((0, 0), np.float32))
    block_ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    note_ids = np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))
    matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32)
    matrix = np.ascontiguousarray(matrix.reshape(len(rows), -1))
    return VectorMatrix(generation, model, block_ids, note_ids, matrix)
