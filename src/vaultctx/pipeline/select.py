"""Select: lexical, vector and graph retrieval run side by side, fused by weighted RRF.

Deterministic and token-free. The query embedding (~10 ms) is the floor; the FTS5 search
runs in the calling thread while the model encodes in a worker thread (both release the
GIL), and the graph walk, which seeds from their best hits, takes a millisecond after them.
Any retriever can fail alone: select still answers and says which path it took.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..errors import EmbeddingUnavailable, InvalidQuery
from . import lexical
from .filters import allowed_notes
from .fusion import Hit, rrf_fuse
from .graphwalk import LinkGraphStore, context_seeds, walk
from .models import Candidate, Filters, Selection, Source
from .vectors import VectorStore, dot_rows

if TYPE_CHECKING:
    from ..workspace.core import Workspace

LEXICAL_DEPTH = 50
VECTOR_DEPTH = 50
GRAPH_DEPTH = 20
MAX_QUERY_CHARS = 2000
DEFAULT_MAX_PER_NOTE = 3
FEEDBACK_DOCS = 3
FEEDBACK_WEIGHT = 1.0
FEEDBACK_POOL = 1000


@dataclass
class RetrievalRequest:
    """What a pluggable retriever is asked: the query, how many hits, which notes are
    allowed (None: all), and the query vector when one was computed."""

    query: str
    limit: int
    filters: Filters
    allowed: set[int] | None = None
    query_vector: np.ndarray | None = None


class Retriever(Protocol):
    """A source of candidates that fusion can rank beside the built-in ones (e.g. memories).

    `retrieve` returns hits best first; each hit's payload must carry a ready `candidate`
    (a `Candidate`), since select only knows how to build block candidates itself.
    """

    name: str

    def retrieve(self, request: RetrievalRequest) -> Sequence[Hit]: ...


@dataclass
class _Run:
    hits: list[Hit] = field(default_factory=list)
    ms: float = 0.0
    error: str | None = None
    skipped: bool = False
    feedback: int = 0  # blocks the vector query was refined with
    pool: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))


class Selector:
    """Holds the warm state of select for one workspace: vectors, the link graph, threads."""

    def __init__(self, workspace: Workspace) -> None:
        self.ws = workspace
        self.vectors = VectorStore()
        self.graph = LinkGraphStore()
        self.retrievers: dict[str, Retriever] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._query_vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._sizes: tuple[str | None, int] | None = None
        self._dfs: tuple[str | None, dict[str, int]] = (None, {})
        self._query_vectors_lock = threading.Lock()  # selects run from many threads

    # --- plumbing ------------------------------------------------------------------------

    def add_retriever(self, retriever: Retriever) -> None:
        """Register an extra retriever; its fusion weight is `weight_<name>` in the config."""
        self.retrievers[retriever.name] = retriever

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="vaultctx-select")
            return self._pool

    def close(self) -> None:
        with self._pool_lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
        self.vectors.close()

    def _df_cache(self, generation: str | None) -> dict[str, int]:
        """Document frequencies of query terms, valid for one index generation."""
        if self._dfs[0] != generation:
            self._dfs = (generation, {})
        return self._dfs[1]

    def _store_size(self, conn: sqlite3.Connection, generation: str | None) -> int:
        """Blocks in the index, counted once per index generation (a scan at 100k blocks)."""
        cached = self._sizes
        if cached is None or cached[0] != generation:
            cached = (generation, int(conn.execute("SELECT count(*) FROM blocks").fetchone()[0]))
            self._sizes = cached
        return cached[1]

    def weights(self) -> dict[str, float]:
        cfg = self.ws.config
        weights = {
            "lexical": cfg.weight_lexical,
            "vector": cfg.weight_vector,
            "graph": cfg.weight_graph,
        }
        for name in self.retrievers:
            weights[name] = float(getattr(cfg, f"weight_{name}", 1.0))
        return weights

    def embed_query(self, text: str) -> np.ndarray:
        with self._query_vectors_lock:
            cached = self._query_vectors.get(text)
            if cached is not None:
                self._query_vectors.move_to_end(text)
                return cached
        vector = self.ws.embedder.encode_query(text)
        with self._query_vectors_lock:
            self._query_vectors[text] = vector
            if len(self._query_vectors) > 128:
                self._query_vectors.popitem(last=False)
        return vector

    # --- select --------------------------------------------------------------------------

    def select(
        self,
        query: str,
        *,
        k: int = 10,
        filters: Filters | None = None,
        use_vectors: bool = True,
        explain: bool = False,
        max_per_note: int = DEFAULT_MAX_PER_NOTE,
        retrievers: Collection[str] | None = None,
    ) -> Selection:
        """See `Workspace.select`. `retrievers` limits which retrievers run (default: all);
        `max_per_note` caps the blocks of one note in the result (0: no cap)."""
        started = time.perf_counter()
        enabled = set(retrievers) if retrievers is not None else None

        def on(name: str) -> bool:
            return enabled is None or name in enabled

        text = " ".join(query.split())[:MAX_QUERY_CHARS]
        if not text:
            raise InvalidQuery("the query is empty: type some words to search for")
        if k < 1:
            raise InvalidQuery("k must be at least 1")
        filters = filters or Filters()
        ws = self.ws
        conn = ws.db.connect()
        generation = ws.generation
        store_size = self._store_size(conn, generation)

        allowed = allowed_notes(conn, filters) if filters.restricts_notes else None
        model = ws.db.get_meta("embedding_model")
        vectors_indexed = model is not None and model == ws.embedder.model_id
        want_vectors = use_vectors and on("vector") and vectors_indexed and store_size > 0
        runs: dict[str, _Run] = {}
        query_vector: list[np.ndarray | None] = [None]

        # Vector search in a worker thread: the model releases the GIL while encoding.
        vector_future: Future[_Run] | None = None
        if want_vectors and allowed != set():
            vector_future = self._executor().submit(
                self._vector_search, text, generation, model or "", allowed, query_vector
            )
        extra_futures: dict[str, Future[_Run]] = {}
        for name, retriever in self.retrievers.items():
            if not on(name) or (filters.kinds and name not in filters.kinds and name == "memory"):
                continue
            request = RetrievalRequest(text, LEXICAL_DEPTH, filters, allowed)
            extra_futures[name] = self._executor().submit(self._timed, retriever.retrieve, request)

        if on("lexical"):
            lexical_query, runs["lexical"] = self._lexical_search(
                conn, text, store_size, allowed, generation
            )
        else:
            lexical_query, runs["lexical"] = None, _Run(skipped=True)
        link_graph = self.graph.get(conn, generation)
        context = context_seeds(conn, link_graph.size)

        if vector_future is not None:
            runs["vector"] = vector_future.result()
            if query_vector[0] is not None and not runs["vector"].error:
                self._feedback(runs, query_vector[0], generation, model or "", allowed)
        else:
            runs["vector"] = _Run(skipped=True)
        for name, future in extra_futures.items():
            runs[name] = future.result()

        # Graph walk seeded by context and by the notes of the best lexical/vector hits.
        t0 = time.perf_counter()
        block_notes = self._block_notes(
            conn, [h.key for name in ("lexical", "vector") for h in runs[name].hits]
        )
        hit_notes = _interleave_notes([runs["lexical"].hits, runs["vector"].hits], block_notes)
        walked, graph_explain = (
            walk(link_graph, context, hit_notes, GRAPH_DEPTH, allowed)
            if on("graph")
            else ([], {"context_seeds": [], "hit_seeds": []})
        )
        graph_hits = self._anchor_graph_hits(
            conn, walked, runs, block_notes, query_vector[0], generation, model
        )
        runs["graph"] = _Run(graph_hits, (time.perf_counter() - t0) * 1000)

        ranked = {name: run.hits for name, run in runs.items() if run.hits}
        fused = rrf_fuse(ranked, self.weights(), k=ws.config.rrf_k)
        candidates = self._materialize(conn, fused, runs, k, max_per_note, filters)

        diagnostics: dict[str, Any] = {
            "select_ms": round((time.perf_counter() - started) * 1000, 3)
        }
        for name in ("lexical", "vector", "graph", *self.retrievers):
            run = runs.get(name, _Run(skipped=True))
            diagnostics[f"{name}_ms"] = round(run.ms, 3)
            diagnostics[f"{name}_hits"] = len(run.hits)
        diagnostics["vector_feedback"] = runs["vector"].feedback
        diagnostics["store_size"] = store_size
        diagnostics["retrieval_path"] = _retrieval_path(runs, use_vectors, vectors_indexed)
        errors = {name: run.error for name, run in runs.items() if run.error}
        if errors:
            diagnostics["errors"] = errors

        explained = None
        if explain:
            explained = {
                "lexical": lexical_query.explain() if lexical_query else None,
                "graph": {
                    **graph_explain,
                    "context_seeds": self._paths(conn, graph_explain["context_seeds"]),
                    "hit_seeds": self._paths(conn, graph_explain["hit_seeds"][:5]),
                },
                "filters": filters.model_dump(mode="json", exclude_defaults=True),
                "allowed_notes": None if allowed is None else len(allowed),
                "weights": self.weights(),
                "rrf_k": ws.config.rrf_k,
                "ranks": {
                    c.id: {name: s.rank for name, s in c.sources.items()} for c in candidates
                },
            }
        return Selection(
            query=text, candidates=candidates, diagnostics=diagnostics, explain=explained
        )

    # --- retrievers ----------------------------------------------------------------------

    @staticmethod
    def _timed(fn: Callable[[RetrievalRequest], Sequence[Hit]], request: RetrievalRequest) -> _Run:
        t0 = time.perf_counter()
        try:
            hits = list(fn(request))
        except Exception as exc:  # a plug-in retriever failing must not fail select
            return _Run([], (time.perf_counter() - t0) * 1000, f"{type(exc).__name__}: {exc}")
        return _Run(hits, (time.perf_counter() - t0) * 1000)

    def _lexical_search(
        self,
        conn: sqlite3.Connection,
        text: str,
        store_size: int,
        allowed: set[int] | None,
        generation: str | None,
    ) -> tuple[lexical.LexicalQuery | None, _Run]:
        t0 = time.perf_counter()
        try:
            tokenizer = lexical.QueryTokenizer(conn, df_cache=self._df_cache(generation))
            built = lexical.build_query(text, tokenizer, store_size)
            table = None
            if allowed is not None:
                table = "temp.vx_allowed"
                conn.execute(
                    "CREATE TEMP TABLE IF NOT EXISTS vx_allowed (note_id INTEGER PRIMARY KEY)"
                )
                conn.execute("DELETE FROM temp.vx_allowed")
                conn.executemany(
                    "INSERT INTO temp.vx_allowed(note_id) VALUES (?)", ((i,) for i in allowed)
                )
            hits = lexical.search(conn, built, LEXICAL_DEPTH, allowed_table=table)
        except sqlite3.Error as exc:
            return None, _Run([], (time.perf_counter() - t0) * 1000, f"fts: {exc}")
        return built, _Run(hits, (time.perf_counter() - t0) * 1000)

    def _vector_search(
        self,
        text: str,
        generation: str | None,
        model: str,
        allowed: set[int] | None,
        out_vector: list[np.ndarray | None],
    ) -> _Run:
        t0 = time.perf_counter()
        try:
            conn = self.ws.db.connect()
            matrix = self.vectors.get(conn, generation, model)
            vector = self.embed_query(text)
            out_vector[0] = vector
            allowed_arr = None if allowed is None else np.fromiter(sorted(allowed), np.int64)
            ids, scores, pool = matrix.search(vector, VECTOR_DEPTH, allowed_arr, pool=FEEDBACK_POOL)
        except EmbeddingUnavailable as exc:
            return _Run([], (time.perf_counter() - t0) * 1000, f"embed: {exc}")
        except Exception as exc:  # a broken model must not take select down with it
            return _Run(
                [], (time.perf_counter() - t0) * 1000, f"embed: {type(exc).__name__}: {exc}"
            )
        hits = [Hit(f"block:{int(i)}", float(s)) for i, s in zip(ids, scores, strict=True)]
        return _Run(hits, (time.perf_counter() - t0) * 1000, pool=pool)

    def _feedback(
        self,
        runs: dict[str, _Run],
        query_vector: np.ndarray,
        generation: str | None,
        model: str,
        allowed: set[int] | None,
    ) -> None:
        """Pseudo-relevance feedback (Rocchio): move the query vector towards the blocks that
        lexical and vector search agree on best, and search again. Lexical evidence thus
        reaches the vector side; on Cranfield it lifts fused nDCG@10 by about two points.

        The second pass re-ranks the first pass's best FEEDBACK_POOL rows and the lexical
        hits, not the whole matrix: feedback moves the query a little, so what it promotes
        comes from there, and the pass costs microseconds instead of a second full scan."""
        t0 = time.perf_counter()
        top = rrf_fuse({n: runs[n].hits for n in ("lexical", "vector")}, k=self.ws.config.rrf_k)
        matrix = self.vectors.get(self.ws.db.connect(), generation, model)
        rows = matrix.rows_for_blocks(np.sort(_block_ids(top[:FEEDBACK_DOCS])))
        if rows.size == 0:
            return
        refined = query_vector + FEEDBACK_WEIGHT * matrix.matrix[rows].mean(axis=0)
        refined /= np.linalg.norm(refined) or 1.0
        lexical_rows = matrix.rows_for_blocks(np.sort(_block_ids(runs["lexical"].hits)))
        pool = np.union1d(runs["vector"].pool, lexical_rows)
        allowed_arr = None if allowed is None else np.fromiter(sorted(allowed), np.int64)
        block_ids, scores, _ = matrix.search(
            refined.astype(np.float32), VECTOR_DEPTH, allowed_arr, rows=pool
        )
        run = runs["vector"]
        run.hits = [
            Hit(f"block:{int(i)}", float(s)) for i, s in zip(block_ids, scores, strict=True)
        ]
        run.ms += (time.perf_counter() - t0) * 1000
        run.feedback = int(rows.size)

    # --- graph anchoring ---------------------------------------------------------------------

    @staticmethod
    def _block_notes(conn: sqlite3.Connection, keys: list[str]) -> dict[str, int]:
        ids = sorted({int(key.split(":", 1)[1]) for key in keys if key.startswith("block:")})
        if not ids:
            return {}
        rows = conn.execute(
            f"SELECT id, note_id FROM blocks WHERE id IN ({','.join('?' * len(ids))})", ids
        )
        return {f"block:{block_id}": note_id for block_id, note_id in rows}

    def _anchor_graph_hits(
        self,
        conn: sqlite3.Connection,
        walked: list[tuple[int, float]],
        runs: Mapping[str, _Run],
        block_notes: dict[str, int],
        query_vector: np.ndarray | None,
        generation: str | None,
        model: str | None,
    ) -> list[Hit]:
        """A graph hit is a note; present it as its block most related to the query: one the
        other retrievers found, else the nearest by embedding, else the note's first block."""
        if not walked:
            return []
        best_found: dict[int, str] = {}
        lists = {name: runs[name].hits for name in ("lexical", "vector")}
        for fused in rrf_fuse(lists, self.weights(), k=self.ws.config.rrf_k):
            note = block_notes.get(fused.key)
            if note is not None and note not in best_found:
                best_found[note] = fused.key  # the block both retrievers rank best
        missing = [note for note, _ in walked if note not in best_found]
        anchors: dict[int, str] = {}
        if missing and query_vector is not None and model:
            matrix = self.vectors.get(conn, generation, model)
            rows = matrix.rows_for_notes(np.asarray(missing, dtype=np.int64))
            if rows.size:
                sims = dot_rows(matrix.matrix[rows], query_vector)
                for row in rows[np.argsort(-sims, kind="stable")].tolist():
                    note = int(matrix.note_ids[row])
                    anchors.setdefault(note, f"block:{int(matrix.block_ids[row])}")
        still = [note for note in missing if note not in anchors]
        if still:
            rows = conn.execute(
                "SELECT note_id, min(id) FROM blocks WHERE ordinal = 0 AND note_id IN"
                f" ({','.join('?' * len(still))}) GROUP BY note_id",
                still,
            )
            anchors.update({note: f"block:{block}" for note, block in rows})
        hits = []
        for note, score in walked:
            key = best_found.get(note) or anchors.get(note)
            if key is not None:
                hits.append(Hit(key, score))
        return hits

    # --- candidates ----------------------------------------------------------------------

    def _materialize(
        self,
        conn: sqlite3.Connection,
        fused: list,
        runs: Mapping[str, _Run],
        k: int,
        max_per_note: int,
        filters: Filters,
    ) -> list[Candidate]:
        payloads: dict[str, Candidate] = {}
        for run in runs.values():
            for hit in run.hits:
                candidate = hit.payload.get("candidate") if hit.payload else None
                if isinstance(candidate, Candidate):
                    payloads.setdefault(hit.key, candidate)
        block_ids = [int(f.key.split(":", 1)[1]) for f in fused if f.key.startswith("block:")]
        blocks = self._block_rows(
            conn, block_ids[: max(k * 4, 40)] if max_per_note else block_ids[:k]
        )
        out: list[Candidate] = []
        per_note: dict[str, int] = {}
        for f in fused:
            sources = {name: Source(rank=p.rank, score=p.score) for name, p in f.sources.items()}
            if f.key.startswith("block:"):
                row = blocks.get(int(f.key.split(":", 1)[1]))
                if row is None:
                    continue
                candidate = Candidate(**row, score=f.score, sources=sources)
            elif f.key in payloads:
                candidate = payloads[f.key].model_copy(
                    update={"score": f.score, "sources": sources}
                )
            else:
                continue
            if filters.kinds and candidate.kind not in filters.kinds:
                continue
            if candidate.path is not None and max_per_note:
                count = per_note.get(candidate.path, 0)
                if count >= max_per_note:
                    continue
                per_note[candidate.path] = count + 1
            out.append(candidate)
            if len(out) >= k:
                break
        return out

    @staticmethod
    def _block_rows(conn: sqlite3.Connection, ids: list[int]) -> dict[int, dict[str, Any]]:
        if not ids:
            return {}
        rows = conn.execute(
            "SELECT b.id, b.note_id, n.path, b.title, b.heading, b.heading_path, b.text,"
            " b.start_line, b.end_line, b.tokens FROM blocks b JOIN notes n ON n.id = b.note_id"
            f" WHERE b.id IN ({','.join('?' * len(ids))})",
            ids,
        )
        return {
            r[0]: {
                "id": f"block:{r[0]}",
                "kind": "block",
                "block_id": r[0],
                "note_id": r[1],
                "path": r[2],
                "title": r[3],
                "heading": r[4],
                "heading_path": r[5],
                "text": r[6],
                "start_line": r[7],
                "end_line": r[8],
                "tokens": r[9],
            }
            for r in rows
        }

    @staticmethod
    def _paths(conn: sqlite3.Connection, note_ids: list[int]) -> list[str]:
        if not note_ids:
            return []
        rows = dict(
            conn.execute(
                f"SELECT id, path FROM notes WHERE id IN ({','.join('?' * len(note_ids))})",
                note_ids,
            ).fetchall()
        )
        return [rows[i] for i in note_ids if i in rows]


def _block_ids(items: Sequence[Any]) -> np.ndarray:
    """Block ids of hits or fused results (keys `block:<id>`); other kinds are skipped."""
    return np.asarray(
        [int(i.key.split(":", 1)[1]) for i in items if i.key.startswith("block:")], np.int64
    )


def _interleave_notes(lists: list[list[Hit]], block_notes: dict[str, int]) -> list[int]:
    """Notes of the best hits, alternating between retrievers, without repeats."""
    notes: list[int] = []
    for rank in range(max((len(h) for h in lists), default=0)):
        for hits in lists:
            if rank < len(hits):
                note = block_notes.get(hits[rank].key)
                if note is not None and note not in notes:
                    notes.append(note)
    return notes


def _retrieval_path(runs: Mapping[str, _Run], use_vectors: bool, vectors_indexed: bool) -> str:
    vector, lexical_run = runs["vector"], runs["lexical"]
    if vector.error:
        return "lexical_graph_after_embed_error"
    if lexical_run.error:
        return "vector_graph_after_lexical_error"
    if vector.skipped:
        if not use_vectors:
            return "lexical_graph"
        return "lexical_graph_no_vectors" if not vectors_indexed else "lexical_graph"
    return "hybrid_rrf"
