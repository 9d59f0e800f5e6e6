"""Exact nearest neighbours over one contiguous, normalized float32 matrix in memory.

At the scales vaultctx targets (100k blocks: ~6 ms per query with numpy) an exact search is
fast enough and never misses, so there is no approximate index to build or tune.
"""

from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import numpy as np

SPLIT_ROWS = 40_000  # above this, score the matrix in two halves on two threads


def dot_rows(
    matrix: np.ndarray, vector: np.ndarray, helper: ThreadPoolExecutor | None = None
) -> np.ndarray:
    """matrix @ vector without BLAS threads: a multithreaded BLAS spends far longer waking
    its threads than computing when the CPU is shared (an editor, an indexer), while this
    loop stays within milliseconds. Given a `helper` thread, a large matrix is scored in two
    halves at once (einsum releases the GIL)."""
    vector = vector.astype(np.float32, copy=False)
    n = matrix.shape[0]
    if helper is None or n < SPLIT_ROWS:
        return np.einsum("ij,j->i", matrix, vector)
    half = n // 2
    out = np.empty(n, dtype=np.float32)
    second = helper.submit(np.einsum, "ij,j->i", matrix[half:], vector, out=out[half:])
    np.einsum("ij,j->i", matrix[:half], vector, out=out[:half])
    second.result()
    return out


@dataclass(frozen=True)
class VectorMatrix:
    generation: str | None
    model: str
    block_ids: np.ndarray  # int64, row -> block id
    note_ids: np.ndarray  # int64, row -> note id
    matrix: np.ndarray  # float32 (n, dim), C-contiguous, unit rows
    helper: ThreadPoolExecutor | None = None  # a second thread for large matrices
    note_order: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    sorted_note_ids: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    note_starts: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))

    @property
    def size(self) -> int:
        return int(self.block_ids.shape[0])

    def search(
        self,
        query: np.ndarray,
        k: int,
        allowed_notes: np.ndarray | None = None,
        *,
        rows: np.ndarray | None = None,
        pool: int = 0,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Top-k rows by cosine similarity: (block ids, scores, pool rows), best first.

        `allowed_notes` (sorted note ids) restricts the search to those notes' blocks;
        `rows` scores only those rows (a re-ranking pass). With `pool`, the rows of the best
        `pool` scores are returned too, so a second pass can re-rank them without scoring
        the whole matrix again.
        """
        if self.size == 0 or k <= 0:
            empty = np.empty(0, dtype=np.int64)
            return empty, np.empty(0, dtype=np.float32), empty
        scores = self.scores(query, allowed_notes, rows=rows)
        return self.top_blocks(scores, k, rows=rows, pool=pool)

    def scores(
        self,
        query: np.ndarray,
        allowed_notes: np.ndarray | None = None,
        *,
        rows: np.ndarray | None = None,
    ) -> np.ndarray:
        """Cosine of every row (or of `rows`) with the query; -inf outside `allowed_notes`."""
        candidates = np.arange(self.size) if rows is None else rows
        scores = (
            dot_rows(self.matrix, query, self.helper)
            if rows is None
            else dot_rows(self.matrix[rows], query)
        )
        if allowed_notes is not None:
            scores = np.where(np.isin(self.note_ids[candidates], allowed_notes), scores, -np.inf)
        return scores

    def top_blocks(
        self, scores: np.ndarray, k: int, *, rows: np.ndarray | None = None, pool: int = 0
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The best k of `scores` (one per row, or per row of `rows`) as `search` returns."""
        empty = np.empty(0, dtype=np.int64)
        if scores.size == 0 or k <= 0:
            return empty, np.empty(0, dtype=np.float32), empty
        candidates = np.arange(self.size) if rows is None else rows
        finite = int(np.isfinite(scores).sum())
        best = _top(scores, min(max(k, pool), finite))
        top = best[: min(k, finite)]
        # Stable order: score descending, then block id, so ties never reorder between runs.
        order = np.lexsort((self.block_ids[candidates[top]], -scores[top]))
        top = top[order]
        return self.block_ids[candidates[top]], scores[top], candidates[best]

    def best_notes(self, scores: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The n notes whose best block scores highest (scores: one per row): (note ids,
        best scores), best first, ties by note id. A note's best block speaks for it, so a
        long note is not favoured for having many blocks."""
        if self.size == 0 or n <= 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        notes, best = self.note_maxima(scores)
        finite = int(np.isfinite(best).sum())
        top = _top(best, min(n, finite))
        order = np.lexsort((notes[top], -best[top]))
        return notes[top[order]], best[top[order]]

    def note_maxima(self, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(note ids, sorted; each note's best score) from one score per row."""
        if self.size == 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        best = np.maximum.reduceat(scores[self.note_order], self.note_starts)
        return self.sorted_note_ids[self.note_starts], best

    def rows_for_notes(self, note_ids: np.ndarray) -> np.ndarray:
        """Rows of the given notes' blocks, through the note-sorted order built at load."""
        if self.size == 0 or note_ids.size == 0:
            return np.empty(0, dtype=np.int64)
        starts = np.searchsorted(self.sorted_note_ids, note_ids, side="left")
        ends = np.searchsorted(self.sorted_note_ids, note_ids, side="right")
        spans = [self.note_order[a:b] for a, b in zip(starts, ends, strict=True) if b > a]
        return np.sort(np.concatenate(spans)) if spans else np.empty(0, dtype=np.int64)

    def rows_for_blocks(self, block_ids: np.ndarray) -> np.ndarray:
        """Rows of the given blocks that have vectors (block_ids are sorted by id)."""
        if self.size == 0 or block_ids.size == 0:
            return np.empty(0, dtype=np.int64)
        idx = np.clip(np.searchsorted(self.block_ids, block_ids), 0, self.size - 1)
        return idx[self.block_ids[idx] == block_ids]


def _top(scores: np.ndarray, n: int) -> np.ndarray:
    """Indices of the n highest scores, best first (argpartition, then sort the few)."""
    if n <= 0:
        return np.empty(0, dtype=np.int64)
    part = np.argpartition(-scores, n - 1)[:n] if n < scores.shape[0] else np.arange(n)
    return part[np.argsort(-scores[part], kind="stable")]


class VectorStore:
    """Loads the matrix from the index once and again only when the index generation moves."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: VectorMatrix | None = None
        self._helper: ThreadPoolExecutor | None = None

    def get(self, conn: sqlite3.Connection, generation: str | None, model: str) -> VectorMatrix:
        current = self._current
        if current is not None and current.generation == generation and current.model == model:
            return current
        with self._lock:
            current = self._current
            if current is None or current.generation != generation or current.model != model:
                current = load_matrix(conn, generation, model)
                if current.size >= SPLIT_ROWS:
                    if self._helper is None:
                        self._helper = ThreadPoolExecutor(1, thread_name_prefix="vaultctx-vec")
                    current = replace(current, helper=self._helper)
                self._current = current
        return current

    def close(self) -> None:
        if self._helper is not None:
            self._helper.shutdown(wait=False)
            self._helper = None


def load_matrix(conn: sqlite3.Connection, generation: str | None, model: str) -> VectorMatrix:
    """Fill one preallocated matrix row by row: peak memory stays one matrix, not three."""
    count = conn.execute(
        "SELECT count(*) FROM blocks b JOIN embeddings e ON e.model = ? AND e.hash = b.embed_hash",
        (model,),
    ).fetchone()[0]
    block_ids = np.empty(count, dtype=np.int64)
    note_ids = np.empty(count, dtype=np.int64)
    matrix: np.ndarray | None = None
    rows = conn.execute(
        "SELECT b.id, b.note_id, e.vector FROM blocks b"
        " JOIN embeddings e ON e.model = ? AND e.hash = b.embed_hash ORDER BY b.id",
        (model,),
    )
    n = 0
    for block_id, note_id, blob in rows:
        if n == count:
            break  # a writer added rows since the count: they arrive with the next generation
        vector = np.frombuffer(blob, dtype=np.float32)
        if matrix is None:
            matrix = np.empty((count, vector.shape[0]), dtype=np.float32)
        block_ids[n], note_ids[n] = block_id, note_id
        matrix[n] = vector
        n += 1
    if matrix is None:
        matrix = np.zeros((0, 0), np.float32)
    note_ids = note_ids[:n]
    order = np.argsort(note_ids, kind="stable")
    sorted_notes = note_ids[order]
    starts = np.flatnonzero(np.r_[True, sorted_notes[1:] != sorted_notes[:-1]]) if n else order
    return VectorMatrix(
        generation,
        model,
        block_ids[:n],
        note_ids,
        matrix[:n],
        note_order=order,
        sorted_note_ids=sorted_notes,
        note_starts=starts,
    )
