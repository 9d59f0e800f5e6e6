"""Select's vector run over a matrix with a sketch: the first pass scores only the rows the
sketch ranks best (or the allowed notes' blocks, exactly), and answers as the scan of every
vector does wherever those rows hold the scan's best ones."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest

from vaultctx.errors import IndexDatabaseError
from vaultctx.pipeline import retrievers
from vaultctx.pipeline.note_ranking import FEEDBACK_POOL
from vaultctx.pipeline.retrievers import Run, feedback, vector_run
from vaultctx.search.vectors import Sketch, VectorMatrix, load_matrix

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


@pytest.fixture(scope="module")
def sketched(matrix: VectorMatrix) -> VectorMatrix:
    return replace(matrix, sketch=Sketch.fit(matrix.matrix))


@pytest.fixture
def candidates(monkeypatch) -> Iterator[None]:
    """Half the rows, so the sketch chooses: still more than feedback's pool."""
    monkeypatch.setattr(retrievers, "SKETCH_CANDIDATES", ROWS // 2)
    assert FEEDBACK_POOL < ROWS // 2
    yield


def run_of(matrix: VectorMatrix, vector: np.ndarray, **kwargs) -> Run:
    options = {"allowed": None, "hidden": frozenset(), **kwargs}
    return vector_run(lambda: matrix, lambda: vector, out_vector=[None], **options)


def owners(matrix: VectorMatrix) -> dict[int, int]:
    return dict(zip(matrix.block_ids.tolist(), matrix.note_ids.tolist(), strict=True))


def hits(run: Run) -> list[tuple[str, float]]:
    return [(h.key, round(h.score, 6)) for h in run.hits]


@pytest.mark.parametrize("seed", range(5))
def test_the_sketch_s_best_rows_give_the_scan_s_hits_spread_and_notes(
    matrix, sketched, candidates, seed
):
    vector = query(seed)
    scan, approximate = run_of(matrix, vector), run_of(sketched, vector)
    assert approximate.approximate and not scan.approximate
    assert approximate.rows is not None and approximate.rows.size == ROWS // 2
    assert hits(approximate) == hits(scan)
    assert approximate.spread == pytest.approx(scan.spread)  # over the whole matrix, not the pool
    assert sorted(approximate.pool.tolist()) == sorted(scan.pool.tolist())
    for run, over in ((scan, matrix), (approximate, sketched)):
        feedback(Run(), run, vector, over, 60, allowed=None, hidden=frozenset())
    assert hits(approximate) == hits(scan)
    assert [(h.key, round(h.score, 6)) for h in approximate.notes] == [
        (h.key, round(h.score, 6)) for h in scan.notes
    ]


def test_without_a_sketch_every_vector_is_scanned(matrix):
    run = run_of(matrix, query(11))
    assert not run.approximate and run.rows is None


class Unasked(Sketch):
    def best_rows(self, *args, **kwargs) -> np.ndarray:
        raise AssertionError("the allowed notes' blocks are scored exactly")


def test_filters_score_the_allowed_notes_exactly_without_asking_the_sketch(matrix, sketched):
    unasked = replace(sketched, sketch=Unasked(sketched.sketch.mean, sketched.sketch.basis, None))
    allowed = set(range(1, 40))
    vector = query(12)
    narrowed = run_of(unasked, vector, allowed=allowed)
    assert not narrowed.approximate
    assert hits(narrowed) == hits(run_of(matrix, vector, allowed=allowed))
    assert {int(matrix.note_ids[r]) for r in narrowed.rows} <= allowed


def test_a_hidden_note_the_sketch_ranks_best_never_comes_back(matrix, sketched, candidates):
    vector = query(13)
    best = sketched.sketch.best_rows(vector, 50)
    hidden = frozenset(int(n) for n in sketched.note_ids[best])
    run = run_of(sketched, vector, hidden=hidden)
    owner = owners(matrix)
    assert run.approximate and run.hits and not {owner[int(h.key[6:])] for h in run.hits} & hidden
    assert hits(run) == hits(run_of(matrix, vector, hidden=hidden))[: len(run.hits)]


def test_a_sketch_whose_every_best_row_is_hidden_leaves_no_vector_notes(sketched, monkeypatch):
    """A person's policy may hide every block nearest their question: select answers from
    the other lists, the vector side empty (it used to fail on a short score array)."""
    monkeypatch.setattr(retrievers, "SKETCH_CANDIDATES", 20)
    vector = query(14)
    hidden = frozenset(int(n) for n in sketched.note_ids[sketched.sketch.best_rows(vector, 20)])
    run = run_of(sketched, vector, hidden=hidden)
    assert run.approximate and run.hits == []
    feedback(Run(), run, vector, sketched, 60, allowed=None, hidden=hidden)
    assert run.notes == [] and run.feedback == 0


def test_a_failed_read_of_the_vectors_is_not_the_model_s_error(matrix):
    """The index's database failing under the vector run (the storage layer's
    `IndexDatabaseError`) is reported as a read of the vectors; anything else there is the
    model's."""

    def matrix_of_a_database_gone() -> VectorMatrix:
        raise IndexDatabaseError("server closed the connection")

    def broken_model() -> np.ndarray:
        raise RuntimeError("cannot encode")

    options = {"allowed": None, "hidden": frozenset()}
    vector = query(0)
    failed = vector_run(matrix_of_a_database_gone, lambda: vector, out_vector=[None], **options)
    assert failed.error == "vectors: server closed the connection"
    assert failed.hits == []
    no_model = vector_run(lambda: matrix, broken_model, out_vector=[None], **options)
    assert no_model.error == "embed: RuntimeError: cannot encode"


def note_scores(run: Run) -> dict[int, float]:
    notes, best = run.maxima
    return dict(zip(notes.tolist(), best.tolist(), strict=True))


@pytest.mark.parametrize("seed", range(3))
def test_a_model_asking_for_it_has_its_note_cosines_read_from_the_median_note(matrix, seed):
    """The first pass's median note cosine (each note's best block, over every note) is
    where the notes' scores start; the blocks' cosines, and so every rank feedback and the
    candidates' blocks follow, stay as they are."""
    vector = query(20 + seed)
    plain, read = run_of(matrix, vector), run_of(matrix, vector, cosine_from_median=True)
    _, best = matrix.note_maxima(matrix.scores(vector))
    assert plain.median is None
    assert read.median == pytest.approx(float(np.median(best)))
    assert hits(read) == hits(plain)
    for run in (plain, read):
        feedback(Run(), run, vector, matrix, 60, allowed=None, hidden=frozenset())
    assert hits(read) == hits(plain)
    raw, calibrated = note_scores(plain), note_scores(read)
    assert calibrated.keys() == raw.keys()
    assert min(raw.values()) < read.median  # the plain run's scores were not touched
    for note, score in raw.items():
        assert calibrated[note] == pytest.approx(
            max(0.0, (score - read.median) / (1 - read.median))
        )
    assert [h.key for h in read.notes if h.score > 0] == [h.key for h in plain.notes][
        : sum(h.score > 0 for h in read.notes)
    ]


def test_a_hidden_note_read_from_the_median_stays_out_rather_than_scoring_zero(matrix):
    vector = query(30)
    hidden = frozenset(range(1, 150))
    run = run_of(matrix, vector, hidden=hidden, cosine_from_median=True)
    feedback(Run(), run, vector, matrix, 60, allowed=None, hidden=hidden)
    scores = note_scores(run)
    assert all(scores[n] == -np.inf for n in hidden if n in scores)
    assert not {int(h.key[5:]) for h in run.notes} & hidden
    _, best = matrix.note_maxima(matrix.scores(vector, hidden_notes=np.array(sorted(hidden))))
    assert run.median == pytest.approx(float(np.median(best[np.isfinite(best)])))


def test_past_the_sketch_the_median_note_comes_from_the_sample_the_spread_does(
    matrix, sketched, candidates, monkeypatch
):
    monkeypatch.setattr(retrievers, "SPREAD_SAMPLE", 500)
    vector = query(31)
    run = run_of(sketched, vector, cosine_from_median=True)
    assert run.approximate
    sample = np.arange(0, sketched.size, max(1, sketched.size // retrievers.SPREAD_SAMPLE))
    _, best = sketched.note_maxima(sketched.scores(vector, rows=sample), rows=sample)
    assert run.median == pytest.approx(float(np.median(best)))
