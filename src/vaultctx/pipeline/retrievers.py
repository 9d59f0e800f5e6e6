"""Select's retrievers: the built-in lexical, vector and graph runs, and the plug-in contract.

Each retriever fills a `Run`: its hits best first, its time and, if it failed, its error
(a failing retriever never fails select). The lexical run is FTS5 bm25 over blocks
(`IndexReads.bm25_blocks`); the vector run is an exact scan of the block vectors (past
`ann_min_vectors`, of the blocks the matrix's sketch ranks best), refined once by
pseudo-relevance feedback (`feedback`); the graph run is the notes linked to what
the user has open. A plug-in `Retriever` is asked a `RetrievalRequest` and answers with
ranked hits that fusion places beside the built-in lists (see docs/search.md, "Adding a
retriever"): memory plugs in through it (`memory.select_retriever.MemoryRetriever`) without
select knowing memory.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..errors import IndexDatabaseError, IndexUnavailable
from ..search.fusion import Hit, rrf_order
from ..search.hybrid import from_median, model_failure
from ..search.query import QueryTokenizer, build_query
from ..search.vectors import VectorMatrix, top_notes
from ..storage.lexical import LexicalQuery
from .candidates import block_notes
from .graphwalk import LinkGraph, context_seeds, proximity
from .models import Filters
from .note_ranking import (
    COLUMN_WEIGHTS,
    FEEDBACK_DOCS,
    FEEDBACK_POOL,
    FEEDBACK_WEIGHT,
    NOTE_DEPTH,
    PLUGIN_WEIGHT,
    SKETCH_CANDIDATES,
    SPREAD_SAMPLE,
    VECTOR_DEPTH,
    cosine_spread,
    length_corrected,
    note_key,
)

if TYPE_CHECKING:
    from ..permissions.view import IndexView
    from ..storage.index_reads import IndexReads
    from .timewindow import TimeWindow

BUILT_IN = ("lexical", "vector", "graph")  # the retrievers select runs itself, in this order
# The vector run's error when the index failed to give it vectors (not the model: `embed`).
VECTOR_READ_ERROR = "vectors"


@dataclass(frozen=True)
class RetrievalRequest:
    """What a plug-in retriever is asked, and all it should read: the query, how many hits,
    the filters and the notes they allow (None: all), and `view`, the index as the reader
    may see it (the policy's hidden notes left out) at index `generation`. Whatever it
    returns, select keeps only the hits inside that view (`within_view`)."""

    query: str
    limit: int
    filters: Filters
    view: IndexView
    generation: str | None
    allowed: set[int] | None = None


class Retriever(Protocol):
    """A source of candidates that fusion can rank beside the built-in ones (e.g. memories).

    `retrieve` returns hits best first; each hit's payload must carry a ready `candidate`
    (a `Candidate`), since select only knows how to build block candidates itself.
    """

    name: str

    def retrieve(self, request: RetrievalRequest) -> Sequence[Hit]: ...


@dataclass(frozen=True)
class Plugged:
    """A registered plug-in retriever: its fusion weight and the candidate kinds its hits
    are (None: any), so a select filtered to other kinds does not ask it."""

    retriever: Retriever
    weight: float = PLUGIN_WEIGHT
    kinds: frozenset[str] | None = None

    def wanted(self, kinds: Collection[str]) -> bool:
        """Whether a select asking for candidates of `kinds` (empty: all) asks this one."""
        return not kinds or self.kinds is None or not self.kinds.isdisjoint(kinds)


@dataclass
class Run:
    """One retriever's answer to one select."""

    hits: list[Hit] = field(default_factory=list)
    ms: float = 0.0
    error: str | None = None
    skipped: bool = False
    feedback: int = 0  # blocks the vector query was refined with
    owners: dict[str, int] = field(default_factory=dict)  # lexical: each hit block's note
    pool: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    notes: list[Hit] = field(default_factory=list)  # vector: notes by their best block
    maxima: tuple[np.ndarray, np.ndarray] | None = None  # vector: every note's best score
    scores: np.ndarray | None = None  # vector: the first pass, one score per row of `rows`
    rows: np.ndarray | None = None  # vector: the rows the first pass scored; None: every row
    approximate: bool = False  # vector: the matrix's sketch chose those rows
    spread: float = 0.0  # vector: the standard deviation of the first pass's scores
    # vector: the median over notes of each note's best cosine in the first pass, when the
    # model's cosines are read from it (`from_median`: `notes` and `maxima` are); else None
    median: float | None = None


@dataclass
class Search:
    """One select's question and what bounds it, read once from the index."""

    text: str
    reads: IndexView  # the index as the reader may see it
    generation: str | None
    store_size: int
    filters: Filters
    unreadable: frozenset[int]  # notes the policy hides
    hidden: frozenset[int]  # those and the note asked about (`related`)
    allowed: set[int] | None  # the notes the filters select; None: every note
    languages: Sequence[str]
    enabled: set[str] | None  # the retrievers asked for; None: all
    open_note: int | None  # the note asked about (`related`)
    shared: IndexView  # the widest view, that the shared vectors and link graph load from
    shared_key: str | None  # what those are cached by
    window: TimeWindow | None = None  # the time the question names (its words not searched)
    in_window: frozenset[int] = frozenset()  # the notes dated in it

    def on(self, name: str) -> bool:
        return self.enabled is None or name in self.enabled


@dataclass
class Retrieved:
    """What the retrievers found for one select."""

    runs: dict[str, Run]
    context: dict[int, float]  # the notes the user has open or touched, by weight
    lexical_query: LexicalQuery | None
    query_vector: np.ndarray | None
    matrix: VectorMatrix | None
    vectors_indexed: bool
    vector_model: str | None = None  # whose vectors the vector list searched


def within_view(run: Run, view: IndexView) -> Run:
    """A plug-in's run with only the hits the reader may see: none that names a hidden
    note's block or note, nor a ready candidate of one (by its note or its path)."""
    if not run.hits:
        return run
    blocks = view.block_notes([int(h.key[6:]) for h in run.hits if h.key.startswith("block:")])

    def shown(hit: Hit) -> bool:
        kind, _, ident = hit.key.partition(":")
        if kind == "note" and ident.isdigit() and int(ident) in view.hidden:
            return False
        if kind == "block" and ident.isdigit() and int(ident) not in blocks:
            return False
        candidate = hit.payload.get("candidate") if hit.payload else None
        if candidate is None:
            return True
        note = getattr(candidate, "note_id", None)
        path = getattr(candidate, "path", None)
        return note not in view.hidden and (path is None or view.readable(path))

    kept = [hit for hit in run.hits if shown(hit)]
    if len(kept) == len(run.hits):
        return run
    return replace(run, hits=kept)


def timed(fn: Callable[[RetrievalRequest], Sequence[Hit]], request: RetrievalRequest) -> Run:
    """A plug-in retriever's run: its hits, or its error."""
    t0 = time.perf_counter()
    try:
        hits = list(fn(request))
    except Exception as exc:  # a plug-in retriever failing must not fail select
        return Run([], (time.perf_counter() - t0) * 1000, f"{type(exc).__name__}: {exc}")
    return Run(hits, (time.perf_counter() - t0) * 1000)


def lexical_run(
    reads: IndexReads,
    text: str,
    df_cache: dict[str, int],
    store_size: int,
    languages: Sequence[str],
    limit: int,
    *,
    allowed: set[int] | None,
    hidden: frozenset[int],
) -> tuple[LexicalQuery | None, Run]:
    """FTS5 bm25 over blocks, within `allowed` notes and outside `hidden` ones; also each hit
    block's note. `df_cache` keeps the terms' document frequencies of this index generation."""
    t0 = time.perf_counter()
    try:
        tokenizer = QueryTokenizer(reads, df_cache=df_cache)
        built = build_query(text, tokenizer, store_size, languages)
        found = reads.bm25_blocks(built, COLUMN_WEIGHTS, limit, allowed=allowed, hidden=hidden)
        hits = [Hit(f"block:{rowid}", score) for rowid, score in found]
        # Read while the model still encodes the query: ranking needs it right after.
        owners = block_notes(reads, [h.key for h in hits])
    except IndexDatabaseError as exc:
        return None, Run([], (time.perf_counter() - t0) * 1000, f"fts: {exc.detail}")
    return built, Run(hits, (time.perf_counter() - t0) * 1000, owners=owners)


def graph_run(
    reads: IndexReads,
    link_graph: Callable[[], LinkGraph],
    *,
    unreadable: frozenset[int],
    hidden: frozenset[int],
    allowed: set[int] | None,
    open_note: int | None,
    half_life_hours: float,
) -> tuple[dict[int, float], Run]:
    """The context (recently opened and edited notes, and the open one, by weight) and the
    notes near it in the link graph, by nearness."""
    t0 = time.perf_counter()
    graph = link_graph()
    context = context_seeds(reads, graph.size, half_life_hours)
    context = {n: w for n, w in context.items() if n not in unreadable}
    if open_note is not None:
        context[open_note] = max(context.get(open_note, 0.0), 1.0)
    hits = near_hits(graph, context, hidden=hidden, allowed=allowed)
    return context, Run(hits, (time.perf_counter() - t0) * 1000)


def near_hits(
    graph: LinkGraph,
    context: dict[int, float],
    *,
    hidden: frozenset[int],
    allowed: set[int] | None,
) -> list[Hit]:
    """The notes near the context that a select may return, nearest first."""
    near = proximity(graph, context)
    if allowed is not None or hidden:
        near = {
            n: v for n, v in near.items() if n not in hidden and (allowed is None or n in allowed)
        }
    ordered = sorted(near.items(), key=lambda kv: (-kv[1], kv[0]))
    return [Hit(note_key(n), v) for n, v in ordered]


def on_topic(context: dict[int, float], vector: Run, open_note: int | None) -> dict[int, float]:
    """The context, each note's weight scaled by how well the note itself matches the
    question: how far its best cosine stands above the vault's median note's, as a share of
    how far the best note's does, squared (0 at the median or below, a quarter halfway, 1 at
    the best). A note about something else says nothing about what the question means, and
    a random note of the vault sits near the median. The note asked about (`related`) keeps
    its weight; without the vector scan, all do. Scores read from the first pass's median
    (`Run.median`) have that median at 0."""
    if vector.maxima is None or not context:
        return context
    note_ids, best = vector.maxima
    if note_ids.size == 0:
        return context
    top = float(np.max(best))
    median = 0.0 if vector.median is not None else float(np.median(best))
    if top <= median:
        return context
    ids = np.fromiter(context, dtype=np.int64, count=len(context))
    idx = np.clip(np.searchsorted(note_ids, ids), 0, note_ids.size - 1)
    found = note_ids[idx] == ids
    out = {}
    for note, i, known in zip(ids.tolist(), idx.tolist(), found.tolist(), strict=True):
        share = min(1.0, max(0.0, (float(best[i]) - median) / (top - median))) if known else 0.0
        out[note] = context[note] if note == open_note else context[note] * share**2
    return out


def vector_run(
    matrix: Callable[[], VectorMatrix],
    embed: Callable[[], np.ndarray],
    *,
    allowed: set[int] | None,
    hidden: frozenset[int],
    out_vector: list[np.ndarray | None],
    cosine_from_median: bool = False,
) -> Run:
    """The first pass of vector search: every block scored against the query's embedding
    (`embed`, which it stores in `out_vector`), the best blocks, and the pool of rows
    feedback scores again. A broken model, or a failed read of the vectors (the index's
    database failing, or out of reach), is the run's error, not select's; each says which.
    `cosine_from_median` (the model's declaration): the notes' cosines are then read from
    the median note's in this pass (`Run.median`).

    A matrix with a sketch (too large to score whole at every query) has only the
    SKETCH_CANDIDATES rows its sketch ranks best scored, or the allowed notes' blocks when
    filters narrow the search; the spread then comes from a strided sample of the whole
    matrix, as it would from a full pass, and so does the median note's cosine."""
    t0 = time.perf_counter()
    try:
        vectors = matrix()
        vector = out_vector[0] if out_vector[0] is not None else embed()
        out_vector[0] = vector
        notes_allowed, notes_hidden = _sorted_ids(allowed), _sorted_ids(hidden or None)
        rows, approximate = _candidate_rows(vectors, vector, notes_allowed)
        scores = vectors.scores(vector, notes_allowed, rows=rows, hidden_notes=notes_hidden)
        spread_scores, spread_rows = scores, rows
        if rows is not None:
            spread_rows = np.arange(0, vectors.size, max(1, vectors.size // SPREAD_SAMPLE))
            spread_scores = vectors.scores(
                vector, notes_allowed, rows=spread_rows, hidden_notes=notes_hidden
            )
    except (IndexDatabaseError, IndexUnavailable) as exc:
        detail = exc.detail if isinstance(exc, IndexDatabaseError) else str(exc)
        return Run([], (time.perf_counter() - t0) * 1000, f"{VECTOR_READ_ERROR}: {detail}")
    except Exception as exc:  # a broken model must not take select down with it
        return Run([], (time.perf_counter() - t0) * 1000, f"embed: {model_failure(exc)}")
    run = Run(
        scores=scores, rows=rows, approximate=approximate, spread=cosine_spread(spread_scores)
    )
    if cosine_from_median:
        run.median = median_note(vectors, spread_scores, spread_rows)
    _fill_block_hits(run, vectors, scores, rows=rows, pool=FEEDBACK_POOL)
    run.ms = (time.perf_counter() - t0) * 1000
    return run


def median_note(matrix: VectorMatrix, scores: np.ndarray, rows: np.ndarray | None) -> float | None:
    """The median over notes of each note's best score (one per row, or per row of `rows`),
    masked notes left out; None when no note has one."""
    _, best = matrix.note_maxima(scores, rows=rows)
    best = best[np.isfinite(best)]
    return float(np.median(best)) if best.size else None


def _candidate_rows(
    vectors: VectorMatrix, vector: np.ndarray, allowed: np.ndarray | None
) -> tuple[np.ndarray | None, bool]:
    """The rows a first pass scores, and whether the sketch chose them: the allowed notes'
    (exact within the filters), else the rows the matrix's sketch ranks best; None (every
    row) for a matrix without a sketch."""
    if vectors.sketch is None:
        return None, False
    if allowed is not None:
        return vectors.rows_for_notes(allowed), False
    return vectors.sketch.best_rows(vector, SKETCH_CANDIDATES, vectors.helper), True


def feedback(
    lexical: Run,
    run: Run,
    query_vector: np.ndarray,
    matrix: VectorMatrix,
    rrf_k: int,
    *,
    allowed: set[int] | None,
    hidden: frozenset[int],
) -> None:
    """Pseudo-relevance feedback (Rocchio): move the query vector towards the blocks that
    lexical and vector search agree on best, and score again. Lexical evidence thus
    reaches the vector side: on Cranfield it lifts fused nDCG@10 by two points, and it
    costs nothing on SciFact or the question sets (see the evaluation suite).

    The second pass scores the first pass's best FEEDBACK_POOL rows and the lexical
    hits, not the whole matrix: feedback moves the query a little, so what it promotes
    comes from there. Either way the run's notes are ranked here, once: from the pool's
    new scores, or from the first pass when there is nothing to learn from."""
    t0 = time.perf_counter()
    top = rrf_order({"lexical": lexical.hits, "vector": run.hits}, k=rrf_k)
    rows = matrix.rows_for_blocks(np.sort(_block_ids(top[:FEEDBACK_DOCS])))
    if rows.size == 0:
        if run.scores is not None:
            _fill_notes(run, matrix, run.scores, rows=run.rows)
        return
    refined = query_vector + FEEDBACK_WEIGHT * matrix.matrix[rows].mean(axis=0)
    refined /= np.linalg.norm(refined) or 1.0
    lexical_rows = matrix.rows_for_blocks(np.sort(_block_ids([h.key for h in lexical.hits])))
    pool = np.union1d(run.pool, lexical_rows)
    scores = matrix.scores(
        refined.astype(np.float32),
        _sorted_ids(allowed),
        rows=pool,
        hidden_notes=_sorted_ids(hidden or None),
    )
    _fill_block_hits(run, matrix, scores, rows=pool)
    _fill_notes(run, matrix, scores, rows=pool)
    run.ms += (time.perf_counter() - t0) * 1000
    run.feedback = int(rows.size)


def block_owners(matrix: VectorMatrix, hits: Sequence[Hit]) -> dict[str, int]:
    """The note of each block hit, read off the matrix: no query to the index."""
    rows = matrix.rows_for_blocks(np.sort(_block_ids([h.key for h in hits])))
    blocks, notes = matrix.block_ids[rows].tolist(), matrix.note_ids[rows].tolist()
    return {f"block:{b}": n for b, n in zip(blocks, notes, strict=True)}


def _sorted_ids(notes: Collection[int] | None) -> np.ndarray | None:
    """Note ids as the sorted array the vector matrix masks with; None for no set."""
    if notes is None:
        return None
    return np.fromiter(sorted(notes), np.int64, count=len(notes))


def _fill_block_hits(
    run: Run, matrix: Any, scores: np.ndarray, *, rows: np.ndarray | None = None, pool: int = 0
) -> None:
    """The best blocks (and the `pool` best rows, to score again) from one score per row, or
    per row of `rows`."""
    block_ids, top, pool_rows = matrix.top_blocks(scores, VECTOR_DEPTH, rows=rows, pool=pool)
    run.hits = [Hit(f"block:{int(i)}", float(s)) for i, s in zip(block_ids, top, strict=True)]
    if pool:
        run.pool = pool_rows


def _fill_notes(
    run: Run, matrix: Any, scores: np.ndarray, *, rows: np.ndarray | None = None
) -> None:
    """Every scored note's best score, corrected for the note's length (and read from the
    median note's, when the run has one), and the best notes, from the same scores."""
    notes, best = matrix.note_maxima(scores, rows=rows)
    best = length_corrected(best, matrix.block_counts(notes), run.spread)
    run.maxima = notes, best if run.median is None else from_median(best, run.median)
    note_ids, note_scores = top_notes(run.maxima, NOTE_DEPTH)
    run.notes = [
        Hit(note_key(int(n)), float(s)) for n, s in zip(note_ids, note_scores, strict=True)
    ]


def _block_ids(keys: Sequence[str]) -> np.ndarray:
    """Block ids of `block:<id>` keys; other kinds are skipped."""
    return np.asarray([int(key[6:]) for key in keys if key.startswith("block:")], np.int64)
