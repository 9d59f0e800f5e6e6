"""The in-memory vector matrix: large ones scored in two halves, the rows of given notes,
int8 codes with a scale per row, scored like float32, and the sketch a large matrix's first
pass scans."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from select_helpers import NOTES, HashEmbedder
from vaultctx import Workspace
from vaultctx.search import vectors
from vaultctx.search.vectors import (
    SKETCH_DIMS,
    SPLIT_ROWS,
    STRAY_SHARE,
    Int8Matrix,
    Sketch,
    VectorMatrix,
    VectorStore,
    _best_unordered,
    dot_rows,
    load_matrix,
    quantize_rows,
    top_notes,
)


def unit_rows(n: int, dim: int, seed: int = 0) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@given(
    arrays(
        np.float32,
        st.tuples(st.integers(0, 20), st.integers(1, 16)),
        elements=st.floats(-1, 1, width=32),
    )
)
@example(np.array([[3e-45, 0.0], [0.0, 0.0]], dtype=np.float32))  # a tiny peak, a zero row
@example(np.array([[5.377e-42]], dtype=np.float32))  # a subnormal scale: the peak rounds to 128
def test_codes_times_scale_give_back_each_value_within_half_a_step(vectors: np.ndarray) -> None:
    with np.errstate(divide="raise", invalid="raise"):  # no zero scale, no NaN cast to int8
        codes, scales = quantize_rows(vectors)
    assert codes.dtype == np.int8 and scales.dtype == np.float32
    assert np.abs(codes.astype(np.int16)).max(initial=0) <= 127
    restored = codes * scales[:, None]
    assert np.all(np.abs(restored - vectors) <= scales[:, None] / 2 + 1e-7)


def test_int8_scores_stay_close_to_exact_ones_and_rank_alike() -> None:
    vectors = unit_rows(5000, 384)
    queries = unit_rows(20, 384, seed=1)
    matrix = Int8Matrix.quantize(vectors)
    assert matrix.nbytes < vectors.nbytes / 3.9
    for query in queries:
        exact = vectors @ query
        approx = dot_rows(matrix, query)
        bound = np.abs(query).sum() * matrix.scales / 2  # the worst case, per row
        assert np.all(np.abs(approx - exact) <= bound + 1e-6)
        assert np.abs(approx - exact).max() < 0.01
        top_exact = set(np.argsort(-exact)[:10])
        assert len(top_exact & set(np.argsort(-approx)[:10])) >= 8


def test_rows_of_an_int8_matrix_read_as_float32_vectors() -> None:
    vectors = unit_rows(50, 32)
    matrix = Int8Matrix.quantize(vectors)
    rows = np.array([3, 7, 49])
    assert matrix.shape == (50, 32) and len(matrix) == 50
    assert matrix[rows].dtype == np.float32
    np.testing.assert_allclose(matrix[rows], vectors[rows], atol=0.01)


def test_large_int8_matrices_are_scored_in_two_halves_with_the_same_result() -> None:
    matrix = Int8Matrix.quantize(unit_rows(SPLIT_ROWS + 7, 16))
    vector = unit_rows(1, 16, seed=2)[0]
    with ThreadPoolExecutor(1) as helper:
        halves = dot_rows(matrix, vector, helper)
    np.testing.assert_allclose(halves, dot_rows(matrix, vector), rtol=1e-5, atol=1e-6)


def test_large_matrices_are_scored_in_two_halves_with_the_same_result():
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((SPLIT_ROWS + 7, 16)).astype(np.float32)
    vector = rng.standard_normal(16).astype(np.float32)
    with ThreadPoolExecutor(1) as helper:
        halves = dot_rows(matrix, vector, helper)
    np.testing.assert_allclose(halves, matrix @ vector, rtol=1e-5, atol=1e-5)


def test_rows_for_notes_finds_every_block_of_the_notes():
    note_ids = np.array([3, 1, 3, 2, 1, 3], dtype=np.int64)
    order = np.argsort(note_ids, kind="stable")
    matrix = VectorMatrix(
        None, "m", np.arange(6, dtype=np.int64), note_ids, np.zeros((6, 2), np.float32),
        note_order=order, sorted_note_ids=note_ids[order],
    )  # fmt: skip
    assert matrix.rows_for_notes(np.array([3, 9], dtype=np.int64)).tolist() == [0, 2, 5]
    assert matrix.rows_for_notes(np.array([1], dtype=np.int64)).tolist() == [1, 4]
    assert matrix.rows_for_notes(np.array([7], dtype=np.int64)).tolist() == []
    assert matrix.block_counts(np.array([1, 2, 3, 7], dtype=np.int64)).tolist() == [2, 1, 3, 0]


@pytest.fixture
def indexed(make_vault):
    with Workspace.open(make_vault(NOTES), embedder=HashEmbedder()) as ws:
        ws.index()
        yield ws


def test_the_int8_store_finds_what_the_float32_store_finds(indexed) -> None:
    conn = indexed._vault.db.connect()
    model = indexed.embedder.model_id
    exact = load_matrix(indexed._vault.reads, "g", model, "float32")
    small = load_matrix(indexed._vault.reads, "g", model, "int8")
    assert isinstance(exact.matrix, np.ndarray) and isinstance(small.matrix, Int8Matrix)
    assert exact.block_ids.tolist() == small.block_ids.tolist()
    assert exact.block_ids.tolist() == sorted(exact.block_ids.tolist())  # rows in block order
    stored = dict(
        conn.execute(
            "SELECT b.id, e.vector FROM blocks b JOIN embeddings e ON e.hash = b.embed_hash"
        ).fetchall()
    )
    for row, block_id in enumerate(exact.block_ids.tolist()):
        assert exact.matrix[row].tobytes() == stored[block_id]
        assert (
            exact.note_ids[row]
            == indexed._vault.db.connect()
            .execute("SELECT note_id FROM blocks WHERE id = ?", (block_id,))
            .fetchone()[0]
        )
    np.testing.assert_allclose(small.matrix[np.arange(small.size)], exact.matrix, atol=0.01)
    for text in ("smoker pine needles", "queen seen in hive", "marsupials island"):
        query = indexed.embedder.encode_query(text)
        ids, scores, _ = exact.search(query, 3)
        ids_small, scores_small, _ = small.search(query, 3)
        assert ids_small[0] == ids[0]
        np.testing.assert_allclose(scores_small, scores, atol=0.01)


def test_note_maxima_of_a_few_rows_equal_those_of_the_whole_matrix_with_the_rest_unscored(
    indexed,
) -> None:
    """Feedback scores only a pool of rows; its notes must rank as if every other row had
    scored -inf."""
    matrix = load_matrix(indexed._vault.reads, "g", indexed.embedder.model_id)
    rng = np.random.default_rng(0)
    for _ in range(50):
        rows = np.sort(rng.choice(matrix.size, size=rng.integers(1, matrix.size), replace=False))
        scores = rng.standard_normal(rows.size).astype(np.float32)
        whole = np.full(matrix.size, -np.inf, dtype=np.float32)
        whole[rows] = scores
        all_notes, all_best = matrix.note_maxima(whole)
        scored = np.isfinite(all_best)
        notes, best = matrix.note_maxima(scores, rows=rows)
        assert notes.tolist() == all_notes[scored].tolist()
        assert best.tolist() == all_best[scored].tolist()
        assert [a.tolist() for a in top_notes((notes, best), 5)] == [
            a.tolist() for a in top_notes((all_notes, all_best), 5)
        ]


def test_the_store_keeps_int8_by_default_and_float32_on_request(indexed) -> None:
    model = indexed.embedder.model_id
    assert isinstance(VectorStore().get(indexed._vault.reads, "g", model).matrix, Int8Matrix)
    assert VectorStore("float32").get(indexed._vault.reads, "g", model).matrix.dtype == np.float32
    selection = indexed.select("smoker pine needles", k=3)
    assert selection.diagnostics["retrieval_path"] == "hybrid"
    assert selection.candidates[0].path == "Equipment/Smoker.md"


def test_an_index_without_vectors_gives_an_empty_matrix(make_vault) -> None:
    with Workspace.open(make_vault(NOTES), embedder=HashEmbedder()) as ws:
        ws.index(embed=False)
        reads = ws._vault.reads
        matrix = load_matrix(reads, "g", ws.embedder.model_id)
        assert VectorStore(sketch_rows=0).get(reads, "g", ws.embedder.model_id).sketch is None
    assert matrix.size == 0
    assert matrix.search(np.ones(64, np.float32), 5)[0].size == 0


class CountingReads:
    """The workspace's reads, recording which vectors a load asks for."""

    def __init__(self, reads) -> None:
        self.reads, self.asked, self.full_reads = reads, [], 0

    def __getattr__(self, name: str):
        return getattr(self.reads, name)

    def vector_rows(self, model: str, chunk: int):
        self.full_reads += 1
        return self.reads.vector_rows(model, chunk)

    def vectors_of(self, model: str, hashes):
        self.asked += list(hashes)
        return self.reads.vectors_of(model, hashes)


def same_matrix(a: VectorMatrix, b: VectorMatrix) -> bool:
    fields = ("block_ids", "note_ids", "hashes", "note_order", "sorted_note_ids", "note_starts")
    arrays_equal = all(np.array_equal(getattr(a, f), getattr(b, f)) for f in fields)
    if isinstance(a.matrix, Int8Matrix):
        return (
            arrays_equal
            and np.array_equal(a.matrix.codes, b.matrix.codes)
            and np.array_equal(a.matrix.scales, b.matrix.scales)
        )
    return arrays_equal and np.array_equal(a.matrix, b.matrix)


@pytest.mark.parametrize("precision", ["int8", "float32"])
def test_a_new_generation_reads_only_the_vectors_of_new_content(
    indexed, precision, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a publish the store's matrix follows the index by reading every block's key
    and only the vectors of content it did not hold; it equals a load from scratch, down to
    the note of each row (a copied note's rows hold known vectors under a new note)."""
    # The test model's vectors are all strays to a sketch of 8 rows (what they do: below).
    monkeypatch.setattr(vectors, "STRAY_SHARE", 1.0)
    model = indexed.embedder.model_id
    store = VectorStore(precision, sketch_rows=1)
    reads = CountingReads(indexed._vault.reads)
    before = store.get(reads, indexed._vault.generation, model)
    assert reads.full_reads == 1
    root = indexed.root
    smoker = root / "Equipment" / "Smoker.md"
    smoker.write_text(smoker.read_text() + "\nA second paragraph about smoker fuel.\n")
    (root / "Reference" / "Unrelated.md").unlink()
    (root / "Reference" / "Bees.md").write_text("# Bees\nWorkers, drones and one queen.\n")
    (root / "Archive").mkdir()  # the same content in a new note: held vectors, a new owner
    (root / "Archive" / "Apiary.md").write_text((root / "Projects" / "Apiary.md").read_text())
    indexed.index()
    new_content = {
        h for (h,) in indexed._vault.db.connect().execute("SELECT embed_hash FROM blocks")
    } - {h.decode() for h in before.hashes.tolist()}
    after = store.get(reads, indexed._vault.generation, model)
    assert after.generation == indexed._vault.generation != before.generation
    assert reads.full_reads == 1 and sorted(reads.asked) == sorted(new_content)
    assert new_content and set(after.hashes.tolist()) > {h.encode() for h in new_content}
    assert same_matrix(
        after, load_matrix(indexed._vault.reads, indexed._vault.generation, model, precision)
    )
    # The sketch follows too: the same directions, every row (held or new) projected on them.
    assert after.sketch is not None and before.sketch is not None
    assert after.sketch.basis is before.sketch.basis
    assert after.sketch.unfitted == len(new_content) > 0
    codes, scales = after.sketch.project(after.matrix[np.arange(after.size)])
    assert np.array_equal(after.sketch.rows.codes, codes)
    assert np.array_equal(after.sketch.rows.scales, scales)
    copied = (
        indexed._vault.db.connect()
        .execute(
            "SELECT b.embed_hash FROM blocks b JOIN notes n ON n.id = b.note_id"
            " WHERE n.path = 'Archive/Apiary.md'"
        )
        .fetchall()
    )
    assert copied and all(h.encode() in set(before.hashes.tolist()) for (h,) in copied)
    assert indexed.select("smoker fuel", k=1).candidates[0].path == "Equipment/Smoker.md"


def embedding_like(n: int, seed: int = 0) -> np.ndarray:
    """Unit rows that, like a text model's vectors, share a mean direction and vary mostly
    along a few dozen directions (32 topics), with some noise in every other."""
    rng = np.random.default_rng(seed)
    topics = rng.standard_normal((32, 384)).astype(np.float32)
    rows = rng.standard_normal((n, 32)).astype(np.float32) @ topics
    rows += 3.0 * rng.standard_normal((n, 384)).astype(np.float32) + 20.0
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.mark.parametrize("int8", [True, False])
def test_the_sketch_s_best_rows_hold_the_nearest_ones(int8: bool) -> None:
    """A sketch keeps SKETCH_DIMS of 384 directions, yet its best 2% of rows hold nearly
    all of the exact top 10; in two halves on two threads it chooses the same rows."""
    rows = embedding_like(2 * SPLIT_ROWS)
    matrix = Int8Matrix.quantize(rows) if int8 else rows
    sketch = Sketch.fit(matrix)
    assert sketch.basis.shape == (384, SKETCH_DIMS) and len(sketch.rows) == len(rows)
    queries = embedding_like(40, seed=1)
    found = 0
    with ThreadPoolExecutor(1) as helper:
        for query in queries:
            best = sketch.best_rows(query, len(rows) // 50)
            assert np.array_equal(best, sketch.best_rows(query, len(rows) // 50, helper))
            assert np.array_equal(best, np.sort(best))
            exact = np.argsort(-(rows @ query))[:10]
            found += len(set(exact.tolist()) & set(best.tolist()))
    assert found / (10 * len(queries)) >= 0.98
    assert sketch.best_rows(queries[0], len(rows)).tolist() == list(range(len(rows)))


def test_a_store_sketches_only_matrices_of_sketch_rows_or_more(indexed) -> None:
    model = indexed.embedder.model_id
    size = VectorStore().get(indexed._vault.reads, "g", model).size
    assert VectorStore().get(indexed._vault.reads, "g", model).sketch is None
    assert VectorStore(sketch_rows=size + 1).get(indexed._vault.reads, "g", model).sketch is None
    sketched = VectorStore(sketch_rows=size).get(indexed._vault.reads, "g", model)
    assert sketched.sketch is not None and len(sketched.sketch.rows) == size


@given(
    arrays(np.float32, st.integers(1, 5000), elements=st.floats(-1, 1, width=32)),
    st.integers(1, 6000),
)
@example(np.repeat(np.float32(0.5), 4096), 100)  # every score tied at the cut
@example(np.arange(4096, dtype=np.float32), 4000)  # the sample's cut keeps too few
def test_the_best_scores_are_found_without_partitioning_them_all(scores, n) -> None:
    best = _best_unordered(scores, n)
    assert best.size == min(n, scores.size) == np.unique(best).size
    if n < scores.size:  # the same scores as a full partition's (ties may swap indices)
        full = np.argpartition(scores, scores.size - n)[scores.size - n :]
        assert np.array_equal(np.sort(scores[best]), np.sort(scores[full]))


def test_a_followed_sketch_counts_the_rows_unlike_those_it_was_fitted_on() -> None:
    """Rows of the same topics leave out about as much of themselves as the fit's sample
    (1 in 100 more than its 99th percentile); rows of other topics (a new subject) are
    strays nearly all."""
    rows = embedding_like(12_000)
    sketch = Sketch.fit(rows[:10_000])
    assert sketch.strays == 0 and 0 < sketch.stray_residual < 1
    held = np.arange(12_000) < 10_000
    alike = sketch.follow(12_000, held, np.arange(10_000), rows[10_000:])
    assert alike.unfitted == 2000 and alike.strays < 2000 * 0.03
    unlike = sketch.follow(12_000, held, np.arange(10_000), embedding_like(2000, seed=7))
    assert unlike.strays > 2000 * 0.95
    both = unlike.follow(14_000, np.arange(14_000) < 12_000, np.arange(12_000), rows[:2000])
    assert both.strays == unlike.strays + np.count_nonzero(
        sketch._residuals(rows[:2000], sketch._coordinates(rows[:2000])) > sketch.stray_residual
    )


def test_a_sketch_with_strays_past_their_share_is_fitted_again(indexed):
    store = VectorStore(sketch_rows=1)
    matrix = store.get(indexed._vault.reads, "g", indexed.embedder.model_id)
    sketch = matrix.sketch
    assert sketch is not None
    allowed = int(matrix.size * STRAY_SHARE)
    kept = Sketch(sketch.mean, sketch.basis, sketch.rows, 0, sketch.stray_residual, allowed)
    assert store._sketched(replace(matrix, sketch=kept)).sketch is kept
    more = Sketch(sketch.mean, sketch.basis, sketch.rows, 0, sketch.stray_residual, allowed + 1)
    refitted = store._sketched(replace(matrix, sketch=more)).sketch
    assert refitted is not more and refitted.strays == 0


def test_a_sketch_is_fitted_again_once_half_its_rows_came_after_its_directions(indexed):
    store = VectorStore(sketch_rows=1)
    matrix = store.get(indexed._vault.reads, "g", indexed.embedder.model_id)
    sketch = matrix.sketch
    assert sketch is not None and sketch.unfitted == 0
    half = Sketch(sketch.mean, sketch.basis, sketch.rows, unfitted=matrix.size // 2)
    assert store._sketched(replace(matrix, sketch=half)).sketch is half
    more = Sketch(sketch.mean, sketch.basis, sketch.rows, unfitted=matrix.size // 2 + 1)
    refitted = store._sketched(replace(matrix, sketch=more)).sketch
    assert refitted is not more and refitted.unfitted == 0
    assert np.array_equal(refitted.rows.codes, sketch.rows.codes)  # the same rows: same fit
