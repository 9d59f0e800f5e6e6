"""Select's vector run when the index has a nearest-neighbour index: the first pass scores
only the blocks it returns (or the allowed notes' blocks, exactly), and answers as the scan
of every vector does wherever those blocks hold the scan's best ones."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from vaultctx.pipeline.note_ranking import FEEDBACK_POOL, NEAREST_POOL
from vaultctx.pipeline.retrievers import Run, feedback, vector_run
from vaultctx.search.vectors import VectorMatrix, load_matrix

ROWS, NOTES, DIM = 3000, 300, 16


class MatrixReads:
    """The two reads `load_matrix` makes, over arrays."""

    def __init__(self, vectors: np.ndarray, notes: np.ndarray) -> None:
        self.vectors, self.notes = vectors, notes

    def vector_count(self, model: str) -> int:
        return len(self.vectors)

    def vector_rows(self, model: str, chunk: int) -> Iterator[list[tuple[int, int, str, bytes]]]:
        rows = [
            (i + 1, int(n), f"{i:032x}", v.tobytes())
            for i, (n, v) in enumerate(zip(self.notes, self.vectors, strict=True))
        ]
        for start in range(0, len(rows), chunk):
            yield rows[start : start + chunk]


@pytest.fixture(scope="module")
def matrix() -> VectorMatrix:
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((ROWS, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    notes = rng.integers(1, NOTES + 1, ROWS)
    return load_matrix(MatrixReads(vectors, notes), "g", "m", "float32")


def query(seed: int) -> np.ndarray:
    vector = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return vector / np.linalg.norm(vector)


def run_of(matrix: VectorMatrix, vector: np.ndarray, nearest=None, **kwargs) -> Run:
    options = {"allowed": None, "hidden": frozenset(), **kwargs}
    return vector_run(lambda: matrix, lambda: vector, out_vector=[None], nearest=nearest, **options)


def best_blocks(matrix: VectorMatrix, vector: np.ndarray, n: int) -> list[int]:
    """What a perfect index returns: the n nearest blocks, in no particular order."""
    scores = np.asarray(matrix.matrix) @ vector
    found = matrix.block_ids[np.argsort(-scores)[:n]].tolist()
    np.random.default_rng(0).shuffle(found)
    return found


def owners(matrix: VectorMatrix) -> dict[int, int]:
    return dict(zip(matrix.block_ids.tolist(), matrix.note_ids.tolist(), strict=True))


def hits(run: Run) -> list[tuple[str, float]]:
    return [(h.key, round(h.score, 6)) for h in run.hits]


@pytest.mark.parametrize("seed", range(5))
def test_the_nearest_blocks_give_the_scan_s_hits_spread_and_notes(matrix, seed):
    vector = query(seed)
    asked: list[int] = []

    def nearest(v: np.ndarray, n: int) -> list[int]:
        asked.append(n)
        return best_blocks(matrix, v, n)

    scan, approximate = run_of(matrix, vector), run_of(matrix, vector, nearest)
    assert asked == [NEAREST_POOL] and approximate.approximate and not scan.approximate
    assert hits(approximate) == hits(scan)
    assert approximate.spread == pytest.approx(scan.spread)  # over the whole matrix, not the pool
    assert sorted(approximate.pool.tolist()) == sorted(scan.pool.tolist())
    for run in (scan, approximate):
        feedback(Run(), run, vector, matrix, 60, allowed=None, hidden=frozenset())
    assert hits(approximate) == hits(scan)
    assert [(h.key, round(h.score, 6)) for h in approximate.notes] == [
        (h.key, round(h.score, 6)) for h in scan.notes
    ]


def test_without_an_index_every_vector_is_scanned(matrix):
    vector = query(11)
    run = run_of(matrix, vector, lambda v, n: None)
    assert not run.approximate and run.rows is None
    assert hits(run) == hits(run_of(matrix, vector))


def test_filters_score_the_allowed_notes_exactly_without_asking_the_index(matrix):
    def nearest(v: np.ndarray, n: int) -> list[int]:
        raise AssertionError("the allowed notes' blocks are scored exactly")

    allowed = set(range(1, 40))
    vector = query(12)
    narrowed = run_of(matrix, vector, nearest, allowed=allowed)
    assert not narrowed.approximate
    assert hits(narrowed) == hits(run_of(matrix, vector, allowed=allowed))
    assert {int(matrix.note_ids[r]) for r in narrowed.rows} <= allowed


def test_a_hidden_note_the_index_returns_never_comes_back(matrix):
    vector = query(13)
    found = best_blocks(matrix, vector, FEEDBACK_POOL)
    owner = owners(matrix)
    hidden = frozenset(owner[b] for b in found[:50])
    run = run_of(matrix, vector, lambda v, n: found, hidden=hidden)
    assert run.hits and not {owner[int(h.key[6:])] for h in run.hits} & hidden
    assert hits(run) == hits(run_of(matrix, vector, hidden=hidden))[: len(run.hits)]


def test_an_index_whose_every_block_is_hidden_leaves_no_vector_notes(matrix):
    """A person's policy may hide every block nearest their question: select answers from
    the other lists, the vector side empty (it used to fail on a short score array)."""
    vector = query(14)
    found = best_blocks(matrix, vector, 20)
    owner = owners(matrix)
    hidden = frozenset(owner[b] for b in found)
    run = run_of(matrix, vector, lambda v, n: found, hidden=hidden)
    assert run.hits == []
    feedback(Run(), run, vector, matrix, 60, allowed=None, hidden=hidden)
    assert run.notes == [] and run.feedback == 0


def test_a_failed_read_of_the_vectors_is_not_the_model_s_error(matrix):
    """The index's database failing under the vector run (`read_errors`) is reported as a
    read of the vectors; anything else there is the model's."""

    class DatabaseDown(Exception):
        pass

    def nearest(v: np.ndarray, n: int) -> list[int]:
        raise DatabaseDown("server closed the connection")

    def broken_model() -> np.ndarray:
        raise RuntimeError("cannot encode")

    options = {"allowed": None, "hidden": frozenset(), "read_errors": (DatabaseDown,)}
    vector = query(0)
    failed = vector_run(
        lambda: matrix, lambda: vector, out_vector=[None], nearest=nearest, **options
    )
    assert failed.error == "vectors: server closed the connection"
    assert failed.hits == []
    no_model = vector_run(lambda: matrix, broken_model, out_vector=[None], **options)
    assert no_model.error == "embed: RuntimeError: cannot encode"
