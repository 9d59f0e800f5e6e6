"""Exact-scan nearest neighbours over one contiguous matrix of unit vectors in memory.

At the scales vaultctx targets (100k blocks: under 10 ms per query with numpy) a full scan is
fast enough and never misses. Past half a million rows a matrix also keeps a `Sketch`, which
a first pass scans instead (a quarter of the bytes), and only its best rows are scored. The rows
are kept as int8 codes with one scale per row (`Int8Matrix`): a quarter of float32's memory
(38 MB instead of 154 MB at 100k blocks) and scores within about 0.002 of exact ones. einsum
widens the codes to float32 in a cache-sized buffer (64k values; numpy's default of 8k makes
it 1.4x slower), in one call that releases the GIL: on an idle core 100k rows take 9.3 ms
against 9.6 ms for float32, but the widening is arithmetic, and on a shared CPU (load 3 on
this 2-core machine) it costs more: 14.7 ms against 10.3 (`VectorStore("float32")`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

import numpy as np

if TYPE_CHECKING:
    from ..storage.index_reads import IndexReads

SPLIT_ROWS = 40_000  # above this, score the matrix in two halves on two threads
_CAST_BUFFER = 65_536  # int8 codes widened to float32 at a time: 256 KB, within L2 cache
_LOAD_CHUNK = 4096  # rows decoded and quantized at a time while loading
_KEY_CHUNK = 65_536  # block keys read at a time when a matrix follows a new generation
_FOLLOW_MIN = 4096  # new vectors a matrix always reads by content, however small it is
SKETCH_DIMS = 96  # the directions a large matrix's sketch keeps (`Sketch`)
SKETCH_SAMPLE = 20_000  # rows (a strided sample) the sketch's directions are fitted on
_CUT_STRIDE = 16  # one score in this many estimates where the n best begin
STRAY_QUANTILE = 0.99  # a stray leaves out more of itself than this share of the fit's sample
STRAY_SHARE = 0.002  # strays past this share of a sketch's rows: its directions are fitted again

Precision = Literal["int8", "float32"]


class Int8Matrix:
    """Unit vectors as int8 codes times a float32 scale per row (symmetric, max-abs).

    Array-like where the pipeline needs it: `shape`, and indexing returns float32 rows, so
    code that reads a few rows (feedback, graph anchors, refine) sees vectors as before.
    """

    def __init__(self, codes: np.ndarray, scales: np.ndarray) -> None:
        self.codes = codes  # int8 (n, dim), C-contiguous
        self.scales = scales  # float32 (n,)

    @classmethod
    def quantize(cls, vectors: np.ndarray) -> Int8Matrix:
        codes, scales = quantize_rows(vectors)
        return cls(codes, scales)

    @property
    def shape(self) -> tuple[int, int]:
        return self.codes.shape

    @property
    def nbytes(self) -> int:
        return self.codes.nbytes + self.scales.nbytes

    def __len__(self) -> int:
        return self.codes.shape[0]

    def __getitem__(self, rows: np.ndarray | slice) -> np.ndarray:
        return self.codes[rows] * self.scales[rows, None]

    def dot(self, vector: np.ndarray, helper: ThreadPoolExecutor | None = None) -> np.ndarray:
        """Approximate `rows @ vector` for every row."""
        scores = _split(self.codes, vector.astype(np.float32, copy=False), helper, _dot_int8)
        scores *= self.scales
        return scores


def _take(matrix: Int8Matrix | np.ndarray, rows: np.ndarray) -> Int8Matrix | np.ndarray:
    """Some rows, kept as codes when the matrix is int8: scoring them widens a few rows at a
    time, cheaper than building their float32 copy first."""
    if isinstance(matrix, Int8Matrix):
        return Int8Matrix(matrix.codes[rows], matrix.scales[rows])
    return matrix[rows]


def quantize_rows(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 codes and per-row scales with codes * scale ≈ vectors (error ≤ scale / 2)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    peaks = np.abs(vectors).max(axis=1) if vectors.size else np.zeros(len(vectors), np.float32)
    scales = (peaks / 127.0).astype(np.float32)
    scales[scales == 0] = 1.0  # an all-zero row (or one too small to scale): codes of 0
    # A subnormal scale loses precision, so the peak can round to 128: clip, never wrap.
    codes = np.clip(np.rint(vectors / scales[:, None]), -127, 127).astype(np.int8)
    return codes, scales


def dot_rows(
    matrix: np.ndarray | Int8Matrix, vector: np.ndarray, helper: ThreadPoolExecutor | None = None
) -> np.ndarray:
    """matrix @ vector as float32, without BLAS threads: a multithreaded BLAS spends far
    longer waking its threads than computing when the CPU is shared (an editor, an indexer),
    while this loop stays within milliseconds. Given a `helper` thread, a large matrix is
    scored in two halves at once (numpy releases the GIL)."""
    if isinstance(matrix, Int8Matrix):
        return matrix.dot(vector, helper)
    return _split(matrix, vector.astype(np.float32, copy=False), helper, _dot_float32)


_Kernel = Callable[[np.ndarray, np.ndarray, np.ndarray], None]


def _split(
    rows: np.ndarray, vector: np.ndarray, helper: ThreadPoolExecutor | None, kernel: _Kernel
) -> np.ndarray:
    out = np.empty(rows.shape[0], dtype=np.float32)
    if helper is None or rows.shape[0] < SPLIT_ROWS:
        kernel(rows, vector, out)
        return out
    half = rows.shape[0] // 2
    second = helper.submit(kernel, rows[half:], vector, out[half:])
    kernel(rows[:half], vector, out[:half])
    second.result()
    return out


def _dot_float32(rows: np.ndarray, vector: np.ndarray, out: np.ndarray) -> None:
    np.einsum("ij,j->i", rows, vector, out=out)


def _dot_int8(codes: np.ndarray, vector: np.ndarray, out: np.ndarray) -> None:
    previous = np.setbufsize(_CAST_BUFFER)  # numpy keeps it per thread (its errstate)
    try:
        np.einsum("ij,j->i", codes, vector, out=out, dtype=np.float32, casting="unsafe")
    finally:
        np.setbufsize(previous)


class Sketch:
    """A small copy of a large matrix for a first pass: every row projected onto the
    matrix's SKETCH_DIMS main directions (a PCA of a strided sample of its rows), as int8
    codes. Scanning it reads a quarter of what the matrix holds, and the rows it ranks best
    hold the matrix's nearest ones: select scores those again exactly (at a million
    synthetic blocks its best 10,000 held every one of the exact top 10; on real vectors its
    best 1% held 0.988-0.995 of them: `SKETCH_CANDIDATES`). Deterministic: no graph to
    build, no build order to vary with."""

    def __init__(
        self,
        mean: np.ndarray,
        basis: np.ndarray,
        rows: Int8Matrix,
        unfitted: int = 0,
        stray_residual: float = 1.0,
        strays: int = 0,
    ) -> None:
        self.mean = mean  # float32 (dim,): the sample's mean row
        self.basis = basis  # float32 (dim, SKETCH_DIMS): the main directions
        self.rows = rows  # (n, SKETCH_DIMS): each row's coordinates along them
        self.unfitted = unfitted  # rows projected since the directions were fitted
        # The share of a row the directions leave out, above which the fit's sample held
        # only 1 row in 100 (STRAY_QUANTILE); and the rows projected since that left out more.
        self.stray_residual = stray_residual
        self.strays = strays

    @classmethod
    def fit(cls, matrix: Int8Matrix | np.ndarray) -> Sketch:
        """The main directions of `matrix`'s rows (at least one), and every row's coordinates
        along them."""
        n = matrix.shape[0]
        sample = np.asarray(matrix[:: max(1, n // SKETCH_SAMPLE)], dtype=np.float32)
        mean = sample.mean(axis=0)
        _, _, directions = np.linalg.svd(sample - mean, full_matrices=False)
        basis = np.ascontiguousarray(directions[:SKETCH_DIMS].T, dtype=np.float32)
        codes = np.empty((n, basis.shape[1]), np.int8)
        scales = np.empty(n, np.float32)
        sketch = cls(mean.astype(np.float32), basis, Int8Matrix(codes, scales))
        residuals = sketch._residuals(sample, sketch._coordinates(sample))
        sketch.stray_residual = float(np.quantile(residuals, STRAY_QUANTILE))
        for start in range(0, n, _LOAD_CHUNK):
            rows = slice(start, min(n, start + _LOAD_CHUNK))
            codes[rows], scales[rows] = sketch.project(matrix[rows])
        return sketch

    def project(self, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The int8 codes and scales of float32 rows' coordinates along the directions."""
        return quantize_rows(self._coordinates(vectors))

    def _coordinates(self, vectors: np.ndarray) -> np.ndarray:
        return (vectors - self.mean) @ self.basis

    def _residuals(self, vectors: np.ndarray, coordinates: np.ndarray) -> np.ndarray:
        """The share of each row (less the mean) the directions leave out: small for rows
        like those they were fitted on, large for content unlike any of them."""
        whole = np.square(vectors - self.mean).sum(axis=1)
        kept = np.square(coordinates).sum(axis=1)
        return np.divide(whole - kept, whole, out=np.zeros_like(whole), where=whole > 0)

    def follow(self, size: int, held: np.ndarray, source: np.ndarray, new: np.ndarray) -> Sketch:
        """The sketch of a matrix that follows this one's (`_follow`): the `held` rows copy
        their `source` rows' codes, the others are projected from `new` (their float32
        rows, in order), on the same directions (`VectorStore` fits new ones once half the
        rows were not there when these were)."""
        codes = np.empty((size, self.basis.shape[1]), np.int8)
        scales = np.ones(size, np.float32)
        codes[held], scales[held] = self.rows.codes[source], self.rows.scales[source]
        strays = self.strays
        if new.size:
            coordinates = self._coordinates(new)
            codes[~held], scales[~held] = quantize_rows(coordinates)
            residuals = self._residuals(new, coordinates)
            strays += int(np.count_nonzero(residuals > self.stray_residual))
        return Sketch(
            self.mean,
            self.basis,
            Int8Matrix(codes, scales),
            self.unfitted + new.shape[0],
            self.stray_residual,
            strays,
        )

    def best_rows(
        self, query: np.ndarray, n: int, helper: ThreadPoolExecutor | None = None
    ) -> np.ndarray:
        """The rows (sorted) of the n best sketch scores for a query (a large sketch is
        scored in two halves at once given a `helper`, as `dot_rows` does)."""
        if n >= len(self.rows):
            return np.arange(len(self.rows))
        along = (query.astype(np.float32) @ self.basis).astype(np.float32)
        return np.sort(_best_unordered(self.rows.dot(along, helper), n))


def _best_unordered(scores: np.ndarray, n: int) -> np.ndarray:
    """Indices of the n highest scores, in no order. Past a few thousand scores most are
    set aside first by a cut taken from a strided sample (twice its share of them, so the
    cut almost always keeps n): a fifth of the time of partitioning them all (0.7 ms
    against 3.4 for the best 10,000 of 500,000), and the same scores."""
    if n >= scores.size:
        return np.arange(scores.size)
    sampled = scores[::_CUT_STRIDE]
    keep = 2 * n // _CUT_STRIDE
    if 0 < keep < sampled.size and scores.size >= _CUT_STRIDE * _CUT_STRIDE:
        cut = np.partition(sampled, sampled.size - keep)[sampled.size - keep]
        above = np.flatnonzero(scores >= cut)
        if above.size >= n:
            return above[np.argpartition(scores[above], above.size - n)[above.size - n :]]
    return np.argpartition(scores, scores.size - n)[scores.size - n :]


@dataclass(frozen=True)
class VectorMatrix:
    generation: str | None
    model: str
    block_ids: np.ndarray  # int64, row -> block id
    note_ids: np.ndarray  # int64, row -> note id
    matrix: Int8Matrix | np.ndarray  # (n, dim) unit rows; indexing gives float32 rows
    helper: ThreadPoolExecutor | None = None  # a second thread for large matrices
    note_order: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    sorted_note_ids: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    note_starts: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    hashes: np.ndarray = field(default_factory=lambda: np.empty(0, dtype="S1"))  # row -> content
    sketch: Sketch | None = None  # for a first pass over a large matrix (`VectorStore`)

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
        hidden_notes: np.ndarray | None = None,
    ) -> np.ndarray:
        """Cosine of every row (or of `rows`) with the query; -inf outside `allowed_notes`
        and inside `hidden_notes` (sorted note ids, both)."""
        candidates = np.arange(self.size) if rows is None else rows
        scores = (
            dot_rows(self.matrix, query, self.helper)
            if rows is None
            else dot_rows(_take(self.matrix, rows), query)
        )
        if allowed_notes is not None:
            scores = np.where(np.isin(self.note_ids[candidates], allowed_notes), scores, -np.inf)
        if hidden_notes is not None:
            scores = np.where(np.isin(self.note_ids[candidates], hidden_notes), -np.inf, scores)
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

    def note_maxima(
        self, scores: np.ndarray, *, rows: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(note ids, sorted; each note's best score) from one score per row, or per row of
        `rows` (then only those rows' notes)."""
        if self.size == 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        if rows is not None:  # a few rows: group them, not the whole matrix
            notes, owner = np.unique(self.note_ids[rows], return_inverse=True)
            best = np.full(notes.size, -np.inf, dtype=np.float32)
            np.maximum.at(best, owner, scores)
            return notes, best
        best = np.maximum.reduceat(scores[self.note_order], self.note_starts)
        return self.sorted_note_ids[self.note_starts], best

    def block_counts(self, note_ids: np.ndarray) -> np.ndarray:
        """How many rows (blocks with a vector) each of the sorted `note_ids` has."""
        if self.size == 0 or note_ids.size == 0:
            return np.zeros(note_ids.size, dtype=np.int64)
        starts = np.searchsorted(self.sorted_note_ids, note_ids, side="left")
        return np.searchsorted(self.sorted_note_ids, note_ids, side="right") - starts

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


def top_notes(maxima: tuple[np.ndarray, np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """The n best of `note_maxima`'s (note ids, best scores), best first, ties by note id."""
    notes, best = maxima
    if notes.size == 0 or n <= 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
    finite = int(np.isfinite(best).sum())
    top = _top(best, min(n, finite))
    order = np.lexsort((notes[top], -best[top]))
    return notes[top[order]], best[top[order]]


def _top(scores: np.ndarray, n: int) -> np.ndarray:
    """Indices of the n highest scores, best first (argpartition, then sort the few)."""
    if n <= 0:
        return np.empty(0, dtype=np.int64)
    part = np.argpartition(-scores, n - 1)[:n] if n < scores.shape[0] else np.arange(n)
    return part[np.argsort(-scores[part], kind="stable")]


class VectorStore:
    """Loads the matrix from the index once and again only when the index generation moves.

    `precision="float32"` keeps exact vectors (4x the memory), for comparisons."""

    def __init__(self, precision: Precision = "int8", sketch_rows: int | None = None) -> None:
        self.precision = precision
        self.sketch_rows = sketch_rows  # from this many rows a matrix gets its `Sketch`
        self._lock = threading.Lock()
        self._current: VectorMatrix | None = None
        self._helper: ThreadPoolExecutor | None = None

    def get(self, reads: IndexReads, generation: str | None, model: str) -> VectorMatrix:
        current = self._current
        if current is not None and current.generation == generation and current.model == model:
            return current
        with self._lock:
            current = self._current
            if current is None or current.generation != generation or current.model != model:
                # The old matrix gives the new one the vectors it already holds; until then
                # both are in memory.
                previous, self._current = current, None
                current = load_matrix(reads, generation, model, self.precision, previous)
                del previous
                current = self._sketched(current)
                if current.size >= SPLIT_ROWS:
                    if self._helper is None:
                        self._helper = ThreadPoolExecutor(1, thread_name_prefix="vaultctx-vec")
                    current = replace(current, helper=self._helper)
                self._current = current
        return current

    def _sketched(self, matrix: VectorMatrix) -> VectorMatrix:
        """The matrix with a sketch from `sketch_rows` rows on, without one below. A sketch it
        followed is kept until half its rows came after its directions were fitted, or until
        STRAY_SHARE of them are strays (content unlike what they were fitted on, a new
        subject say, which they would rank poorly): then its directions are fitted again."""
        if self.sketch_rows is None or matrix.size < max(self.sketch_rows, 1):
            return replace(matrix, sketch=None)
        sketch = matrix.sketch
        if (
            sketch is None
            or sketch.unfitted > matrix.size // 2
            or sketch.strays > matrix.size * STRAY_SHARE
        ):
            return replace(matrix, sketch=Sketch.fit(matrix.matrix))
        return matrix

    def close(self) -> None:
        if self._helper is not None:
            self._helper.shutdown(wait=False)
            self._helper = None


def load_matrix(
    reads: IndexReads,
    generation: str | None,
    model: str,
    precision: Precision = "int8",
    previous: VectorMatrix | None = None,
) -> VectorMatrix:
    """Fill one preallocated matrix a chunk of rows at a time, then put the rows in block
    order. Rows are read in the order the index gives them (`IndexReads.vector_rows`: for
    SQLite, the embeddings' own key order, which spares sorting every vector first).

    With `previous` (this model's matrix of an earlier generation), only the vectors of
    content it does not hold are read (`_follow`): a publish that changed a few notes costs
    a read of every block's key, not of every vector (at a million blocks on PostgreSQL,
    2.8 s against 18.9)."""
    if previous is not None and previous.model == model and _precision(previous) == precision:
        followed = _follow(reads, generation, previous)
        if followed is not None:
            return followed
    count = reads.vector_count(model)
    block_ids = np.empty(count, dtype=np.int64)
    note_ids = np.empty(count, dtype=np.int64)
    hashes: list[str] = []
    values: np.ndarray | None = None  # float32 rows, or int8 codes
    scales = np.ones(count, dtype=np.float32)
    n = 0
    chunks = reads.vector_rows(model, _LOAD_CHUNK)
    try:
        while n < count:
            # A writer may add rows after the count: they arrive with the next generation.
            rows = next(chunks, [])[: count - n]
            if not rows:
                break
            chunk = np.stack([np.frombuffer(blob, dtype=np.float32) for *_, blob in rows])
            if values is None:
                dtype = np.int8 if precision == "int8" else np.float32
                values = np.empty((count, chunk.shape[1]), dtype=dtype)
            end = n + len(rows)
            block_ids[n:end] = [r[0] for r in rows]
            note_ids[n:end] = [r[1] for r in rows]
            hashes += [r[2] for r in rows]
            _place(values, scales, slice(n, end), chunk)
            n = end
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()  # the backend's cursor, at once
    if values is None:
        values = np.zeros((0, 0), np.int8 if precision == "int8" else np.float32)
    by_block = np.argsort(block_ids[:n], kind="stable")
    return _assemble(
        generation, model, block_ids[by_block], note_ids[by_block],
        _hash_array(hashes)[by_block], values[by_block], scales[by_block], precision,
    )  # fmt: skip


def _follow(
    reads: IndexReads, generation: str | None, previous: VectorMatrix
) -> VectorMatrix | None:
    """The new generation's matrix from `previous`'s rows for the content it holds and the
    index's vectors for the rest; None when most of it is new (a full load reads as fast).
    The keys are put in block order first, so the vectors are copied once, into place."""
    if previous.size == 0 or previous.hashes.size != previous.size:
        return None
    keys = [row for chunk in reads.vector_keys(previous.model, _KEY_CHUNK) for row in chunk]
    count = len(keys)
    block_ids = np.fromiter((key[0] for key in keys), np.int64, count)
    note_ids = np.fromiter((key[1] for key in keys), np.int64, count)
    hashes = _hash_array([key[2] for key in keys])
    del keys
    by_block = np.argsort(block_ids, kind="stable")
    block_ids, note_ids, hashes = block_ids[by_block], note_ids[by_block], hashes[by_block]
    # Each hash's row in `previous`, searched by its first 64 bits, then checked whole.
    numbers = _hash_numbers(previous.hashes)
    order = np.argsort(numbers, kind="stable")
    at = np.searchsorted(numbers[order], _hash_numbers(hashes))
    source = order[np.minimum(at, order.size - 1)]
    held = previous.hashes[source] == hashes
    wanted = np.unique(hashes[~held])
    if wanted.size > max(count // 2, _FOLLOW_MIN):
        return None
    fetched = {
        digest.encode(): vector
        for digest, vector in reads.vectors_of(previous.model, [h.decode() for h in wanted])
    }
    # A vector gone since the keys were read is the next generation's to drop.
    keep = held.copy()
    unheld = np.flatnonzero(~held)
    keep[unheld] = [h in fetched for h in hashes[unheld].tolist()]
    block_ids, note_ids, hashes = block_ids[keep], note_ids[keep], hashes[keep]
    held, source = held[keep], source[held]  # every held row is kept
    new_rows = np.flatnonzero(~held)
    int8 = isinstance(previous.matrix, Int8Matrix)
    dims = previous.matrix.shape[1]
    values = np.empty((block_ids.size, dims), dtype=np.int8 if int8 else np.float32)
    scales = np.ones(block_ids.size, dtype=np.float32)
    if isinstance(previous.matrix, Int8Matrix):
        values[held] = previous.matrix.codes[source]
        scales[held] = previous.matrix.scales[source]
    else:
        values[held] = previous.matrix[source]
    if new_rows.size:
        chunk = np.stack([np.frombuffer(fetched[h], np.float32) for h in hashes[new_rows]])
        if chunk.shape[1] != dims:
            return None
        _place(values, scales, new_rows, chunk)
    sketch = previous.sketch
    if sketch is not None:  # the new rows as the matrix holds them, as a fit projects them
        placed = Int8Matrix(values, scales)[new_rows] if int8 else values[new_rows]
        sketch = sketch.follow(block_ids.size, held, source, placed)
    return _assemble(
        generation, previous.model, block_ids, note_ids, hashes, values, scales,
        "int8" if int8 else "float32", sketch,
    )  # fmt: skip


def _assemble(
    generation: str | None,
    model: str,
    block_ids: np.ndarray,
    note_ids: np.ndarray,
    hashes: np.ndarray,
    values: np.ndarray,
    scales: np.ndarray,
    precision: Precision,
    sketch: Sketch | None = None,
) -> VectorMatrix:
    """The matrix of these rows (in block order), with its notes' index."""
    matrix = Int8Matrix(values, scales) if precision == "int8" else values
    order = np.argsort(note_ids, kind="stable")
    sorted_notes = note_ids[order]
    n = block_ids.size
    starts = np.flatnonzero(np.r_[True, sorted_notes[1:] != sorted_notes[:-1]]) if n else order
    return VectorMatrix(
        generation,
        model,
        block_ids,
        note_ids,
        matrix,
        note_order=order,
        sorted_note_ids=sorted_notes,
        note_starts=starts,
        hashes=hashes,
        sketch=sketch,
    )


def _place(
    values: np.ndarray, scales: np.ndarray, rows: slice | np.ndarray, chunk: np.ndarray
) -> None:
    """Float32 vectors into their rows of a matrix being built: as int8 codes and scales
    when the matrix holds codes, else as they are."""
    if values.dtype == np.int8:
        values[rows], scales[rows] = quantize_rows(chunk)
    else:
        values[rows] = chunk


def _precision(matrix: VectorMatrix) -> Precision:
    return "int8" if isinstance(matrix.matrix, Int8Matrix) else "float32"


def _hash_numbers(hashes: np.ndarray) -> np.ndarray:
    """The first 16 hex digits of each hash as a number (64 bits to sort and search by)."""
    digits = np.frombuffer(hashes.astype("S16").tobytes(), np.uint8).reshape(-1, 16)
    return (_HEX_DIGITS[digits] << _DIGIT_SHIFTS).sum(axis=1, dtype=np.uint64)


_HEX_DIGITS = np.zeros(256, np.uint64)  # a byte's value as a hex digit (0 if it is not one)
_HEX_DIGITS[np.frombuffer(b"0123456789abcdef", np.uint8)] = np.arange(16, dtype=np.uint64)
_HEX_DIGITS[np.frombuffer(b"ABCDEF", np.uint8)] = np.arange(10, 16, dtype=np.uint64)
_DIGIT_SHIFTS = np.arange(60, -1, -4, dtype=np.uint64)


def _hash_array(hashes: list[str]) -> np.ndarray:
    """Content hashes (hex) as fixed-width bytes: a quarter of numpy's text, and sortable."""
    return np.array(hashes, dtype=np.bytes_) if hashes else np.empty(0, dtype="S1")
