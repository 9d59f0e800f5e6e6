"""Select: lexical, vector and graph retrieval side by side, ranked per note.

Deterministic and token-free. The query embedding (~10 ms) is the floor; the FTS5 searches
run in the calling thread while the model encodes in a worker thread (both release the
GIL), and the graph — the notes linked to what the user has open — is read meanwhile
(`retrievers.py`). The lists are fused per note (`note_ranking.py`, which also tables every
ranking knob) and the best blocks of the best notes are returned (`candidates.py`). Any
retriever can fail alone: select still answers and says which path it took.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ConfigError, InvalidQuery, NoteNotFound
from ..permissions.view import ReadScope
from ..search.fusion import Fused, Hit
from ..search.query import QueryTokenizer, key_terms
from ..search.vectors import VectorMatrix, VectorStore
from ..storage.language import query_languages
from ..storage.lexical import LexicalQuery
from . import timewindow
from .candidates import BLOCK_LISTS, build_candidates
from .confidence import assess
from .diagnostics import diagnostics_of, explanation
from .filters import allowed_notes, filter_report
from .focus import Focus, current_focus, focus_diagnostics
from .graphwalk import LinkGraphStore, passage_links
from .models import Filters, Selection
from .note_ranking import (
    LEXICAL_DEPTH,
    NOTE_DEPTH,
    PLUGIN_WEIGHT,
    VECTOR_SHARE_OTHER_LANGUAGE,
    RankedNote,
    best_passages,
    follow_pointers,
    fuse_scores,
    lift,
    note_id,
    note_key,
    roll_up,
)
from .retrievers import (
    BUILT_IN,
    Plugged,
    RetrievalRequest,
    Retrieved,
    Retriever,
    Run,
    Search,
    block_owners,
    feedback,
    graph_run,
    lexical_run,
    near_hits,
    on_topic,
    timed,
    vector_run,
    within_view,
)

if TYPE_CHECKING:
    from ..permissions.view import IndexView
    from ..storage import Vault
    from ..storage.embeddings import Embedder
    from ..storage.index_reads import IndexReads

MAX_QUERY_CHARS = 2000
DEFAULT_MAX_PER_NOTE = 3
# A note as a query (`related`): its most telling terms, its title counted as often as three
# mentions and each heading as two, from at most its first RELATED_CHARS characters.
RELATED_TERMS = 12
RELATED_TITLE_WEIGHT = 3
RELATED_HEADING_WEIGHT = 2
RELATED_CHARS = 20_000


class Selector:
    """Holds the warm state of select for one reader of one vault: vectors, the link
    graph, threads.

    Every select reads the index through the view its `scope` builds, so the notes the
    reader may not see are in no list (lexical, vector, graph, the context, plug-ins,
    memories drawn from them) and in no statistic, as if they were not in the vault."""

    def __init__(self, vault: Vault, scope: ReadScope, *, shares: Selector | None = None) -> None:
        """`shares`: a selector of the same index (a team server's) whose vectors, link graph
        and threads this one uses too: one copy serves every reader, loaded through the
        widest view (what the server's policy lets any destination see), each reader's own
        hidden notes masked where it is used."""
        self.vault = vault
        self.scope = scope
        self._shares = shares
        self._shared_scope: ReadScope = (
            ReadScope(vault.reads, scope.policy, None) if shares is None else shares._shared_scope
        )
        self.vectors: VectorStore = (
            VectorStore(vault.config.vector_precision, vault.config.ann_min_vectors)
            if shares is None
            else shares.vectors
        )
        self.graph: LinkGraphStore = LinkGraphStore() if shares is None else shares.graph
        self.retrievers: dict[str, Plugged] = {}  # the plug-in retrievers, by name
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._query_vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._sizes: tuple[str | None, frozenset[int], int] | None = None
        self._dfs: tuple[str | None, dict[frozenset[int], dict[str, int]]] = (None, {})
        self._languages: tuple[str | None, frozenset[int], tuple[str, ...]] | None = None
        self._query_vectors_lock = threading.Lock()  # selects run from many threads

    # --- plumbing ------------------------------------------------------------------------

    def add_retriever(
        self,
        retriever: Retriever,
        *,
        weight: float | None = None,
        kinds: Collection[str] | None = None,
    ) -> None:
        """Rank `retriever`'s hits beside the built-in lists, with fusion `weight` (None:
        `PLUGIN_WEIGHT`); `kinds`:
        the candidate kinds its hits are (None: any), so a select filtered to others skips
        it. A name already registered is replaced; a built-in one is refused."""
        if retriever.name in BUILT_IN:
            raise ConfigError(f"a plug-in retriever cannot be named {retriever.name!r}: built in")
        plugged = Plugged(
            retriever,
            PLUGIN_WEIGHT if weight is None else float(weight),
            None if kinds is None else frozenset(kinds),
        )
        # A new dict, not an insert: selects running meanwhile iterate over the old one.
        self.retrievers = {**self.retrievers, retriever.name: plugged}

    def _executor(self) -> ThreadPoolExecutor:
        if self._shares is not None:
            return self._shares._executor()
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="vaultctx-select")
            return self._pool

    def close(self) -> None:
        """Waits for a search still running (a select interrupted after it started one): it
        reads the index, which the workspace closes next, and SQLite crashes the process on a
        connection closed under a running statement."""
        with self._pool_lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
                self._pool = None
        if self._shares is None:
            self.vectors.close()

    def _df_cache(self, view: IndexView) -> dict[str, int]:
        """Document frequencies of query terms as `view` counts them (its hidden notes'
        blocks left out), valid for one index generation."""
        if self._dfs[0] != view.generation:
            self._dfs = (view.generation, {})
        return self._dfs[1].setdefault(view.hidden, {})

    def _store_size(self, view: IndexView) -> int:
        """Blocks the reader may see, counted once per index generation and view (a scan at
        100k blocks)."""
        cached = self._sizes
        if cached is None or cached[0] != view.generation or cached[1] != view.hidden:
            cached = (view.generation, view.hidden, view.block_count())
            self._sizes = cached
        return cached[2]

    def _shared_view(self, own: IndexView | None = None) -> tuple[IndexView, str | None]:
        """The view the shared vectors and link graph are loaded through, and the key they
        are cached by: its generation, and what it hides. `own`: this reader's view, which
        serves when it hides nothing (the widest then hides nothing either)."""
        view = own if own is not None and not own.hidden else self._shared_scope.view()
        if not view.hidden:
            return view, view.generation
        return view, f"{view.generation}:{hash(view.hidden):x}"

    def _vault_languages(
        self, reads: IndexReads, generation: str | None, hidden: frozenset[int]
    ) -> tuple[str, ...]:
        """The languages of the notes a client may read (`vault_languages`; a hidden
        note's language must not show in how a query is read), once per index generation and
        set of hidden notes."""
        cached = self._languages
        if cached is None or cached[0] != generation or cached[1] is not hidden:
            languages = vault_languages(reads, self.vault.config.language, hidden)
            cached = self._languages = (generation, hidden, languages)
        return cached[2]

    def matrix(self, model: str) -> VectorMatrix:
        """The warm vector matrix of `model`, as selects load it (the shared view's)."""
        shared, key = self._shared_view()
        return self.vectors.get(shared, key, model)

    def weights(self, languages: Sequence[str] = ("en",)) -> dict[str, float]:
        """Fusion weights for a query read in `languages` (the first is its own)."""
        cfg = self.vault.config
        spoken = "*" in cfg.embedding_languages or languages[0] in cfg.embedding_languages
        weights = {
            "lexical": cfg.weight_lexical,
            "vector": cfg.weight_vector * (1.0 if spoken else VECTOR_SHARE_OTHER_LANGUAGE),
            "graph": cfg.weight_graph,
        }
        for name, plugged in self.retrievers.items():
            weights[name] = plugged.weight
        return weights

    def embed_query(self, text: str, embedder: Embedder | None = None) -> np.ndarray:
        """`text`'s vector by `embedder` — by default the encoder of the model whose vectors
        answer (`Vault.query_model`), which is the configured one but during a switch."""
        if embedder is None:
            answering = self.vault.query_model()
            embedder = self.vault.embedder if answering is None else answering[1]
        key = f"{embedder.model_id}\n{text}"
        with self._query_vectors_lock:
            cached = self._query_vectors.get(key)
            if cached is not None:
                self._query_vectors.move_to_end(key)
                return cached
        vector = embedder.encode_query(text)
        with self._query_vectors_lock:
            self._query_vectors[key] = vector
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
        query_vector: np.ndarray | None = None,
        open_note: int | None = None,
        languages: Sequence[str] | None = None,
    ) -> Selection:
        """See `Workspace.select`. `retrievers` limits which retrievers run (default: all);
        `max_per_note` caps the blocks of one note in the result (0: no cap);
        `query_vector` is searched instead of the text's embedding; `open_note` is the note
        asked about (`related`): left out of the results, and the context's most recent
        note, whatever was touched; `languages` what the query is read in (default: the
        vault's languages, or the one of them the query is written in)."""
        started = time.perf_counter()
        plugins = list(self.retrievers)  # those attached as this select starts
        search = self._search(query, k, filters, retrievers, open_note, languages)
        found = self._retrieve(search, use_vectors, query_vector)
        self._focus_on_topic(search, found)
        owners = dict(found.runs["lexical"].owners)
        if found.matrix is not None:
            owners.update(block_owners(found.matrix, found.runs["vector"].hits))
        weights = self.weights(search.languages)
        ranked, pointers = self._rank_notes(search.reads, found.runs, owners, k, weights)
        if search.in_window and timewindow.TIME_MODE == "boost":
            ranked = timewindow.prefer_dated(ranked, search.in_window, timewindow.TIME_BOOST)
        candidates = build_candidates(
            search.reads,
            ranked,
            {name: run.hits for name, run in found.runs.items()},
            owners,
            k=k,
            max_per_note=max_per_note,
            kinds=search.filters.kinds,
            rrf_k=self.vault.config.rrf_k,
            matrix=found.matrix,
            query_vector=found.query_vector,
        )
        candidates, verdict = assess(
            search.reads,
            candidates,
            lexical=found.lexical_query,
            doc_freqs=self._df_cache(search.reads),
            store_size=search.store_size,
            matrix=found.matrix,
            query_vector=found.query_vector,
            median=found.runs["vector"].median,
        )
        diagnostics = diagnostics_of(search, found, plugins, use_vectors, started)
        diagnostics["evidence"] = verdict.evidence.as_dict()
        if not candidates and search.allowed is not None and search.filters.restricts_notes:
            diagnostics["filters"] = filter_report(
                search.reads, search.filters, len(search.allowed)
            )
        focus = focus_diagnostics(search.reads, found.context, ranked, k, search.open_note)
        if focus is not None:
            diagnostics["focus"] = focus
        if search.window is not None:
            diagnostics["time_window"] = {
                **search.window.diagnostics(),
                "searched": search.text,
                "notes": len(search.in_window),
                "as": timewindow.TIME_MODE if search.in_window else "unused",
            }
        explained = None
        if explain:
            explained = explanation(
                search, found, pointers, weights, self.vault.config.weight_graph
            )
            explained["ranks"] = {
                c.id: {name: s.rank for name, s in c.sources.items()} for c in candidates
            }
        asked = search.text if search.window is None else " ".join(query.split())[:MAX_QUERY_CHARS]
        return Selection(
            query=asked,
            candidates=candidates,
            diagnostics=diagnostics,
            explain=explained,
            confidence=verdict.confidence,
            no_good_match=verdict.no_good_match,
        )

    def _search(
        self,
        query: str,
        k: int,
        filters: Filters | None,
        retrievers: Collection[str] | None,
        open_note: int | None,
        languages: Sequence[str] | None,
    ) -> Search:
        """The query checked, and the notes and languages it is searched within."""
        text = " ".join(query.split())[:MAX_QUERY_CHARS]
        if not text:
            raise InvalidQuery("the query is empty: type some words to search for")
        if k < 1:
            raise InvalidQuery("k must be at least 1")
        filters = filters or Filters()
        reads = self.scope.view()
        generation = reads.generation
        store_size = self._store_size(reads)
        unreadable = reads.hidden
        shared, shared_key = self._shared_view(reads)
        if languages is None:
            vault = self._vault_languages(reads, generation, unreadable)
            languages = query_languages(text, vault)
        hidden = unreadable if open_note is None else unreadable | {open_note}
        allowed = allowed_notes(reads, filters) - hidden if filters.restricts_notes else None
        enabled = set(retrievers) if retrievers is not None else None
        window, inside = None, frozenset[int]()
        if open_note is None and timewindow.TIME_MODE != "off":  # a question, not a note
            window = timewindow.find_window(text, languages)
        if window is not None:
            inside = frozenset(timewindow.notes_in_window(reads, window)) - hidden
        if inside:  # a window no note is dated in says nothing: its words stay searched
            assert window is not None
            text = window.text or text
            if timewindow.TIME_MODE == "filter":
                allowed = set(inside) if allowed is None else allowed & inside
        return Search(
            text, reads, generation, store_size, filters, unreadable, hidden, allowed,
            languages, enabled, open_note, shared, shared_key, window, inside,
        )  # fmt: skip

    def _retrieve(
        self,
        search: Search,
        use_vectors: bool,
        query_vector: np.ndarray | None,
    ) -> Retrieved:
        """Every retriever, side by side: vector search and plug-in retrievers in worker
        threads while FTS5 and the graph run in this one; then the vector side's feedback."""
        answering = self.vault.query_model(search.reads)
        model, embedder = answering if answering is not None else ("", None)
        vectors_indexed = embedder is not None
        vector_of_query: list[np.ndarray | None] = [query_vector]
        vector_future = None
        if use_vectors and embedder is not None:
            vector_future = self._start_vector_search(search, model, embedder, vector_of_query)
        plugins = self._start_plugins(search)
        runs: dict[str, Run] = {}
        lexical_query, runs["lexical"] = self._lexical_run(search)
        context, runs["graph"] = self._graph_run(search)
        runs["vector"] = Run(skipped=True)
        query_vector = None
        if vector_future is not None:
            runs["vector"] = self._finish_vector_search(
                search, vector_future, vector_of_query, runs["lexical"], model
            )
            query_vector = vector_of_query[0]
        for name, future in plugins.items():
            runs[name] = within_view(future.result(), search.reads)
        matrix = None
        if query_vector is not None:
            matrix = self.vectors.get(search.shared, search.shared_key, model)
        return Retrieved(
            runs, context, lexical_query, query_vector, matrix, vectors_indexed, model or None
        )

    def _focus_on_topic(self, search: Search, found: Retrieved) -> None:
        """The context weighed again by how well each of its notes matches the question
        (`on_topic`), and the notes near it found again from those weights."""
        if not found.context or not search.on("graph"):
            return
        weighed = on_topic(found.context, found.runs["vector"], search.open_note)
        if weighed == found.context:
            return
        graph = self.graph.get(search.shared, search.shared_key)
        hits = near_hits(graph, weighed, hidden=search.hidden, allowed=search.allowed)
        found.context.clear()
        found.context.update(weighed)
        found.runs["graph"] = replace(found.runs["graph"], hits=hits)

    def _start_vector_search(
        self,
        search: Search,
        model: str,
        embedder: Embedder,
        out_vector: list[np.ndarray | None],
    ) -> Future[Run] | None:
        """The vector run, in a worker thread (the model releases the GIL while encoding);
        None when there is nothing to search. Past `ann_min_vectors` blocks it scores the
        rows the matrix's sketch ranks best, not every one (`VectorStore`)."""
        if not search.on("vector") or search.store_size == 0 or search.allowed == set():
            return None
        key, shared = search.shared_key, search.shared
        return self._executor().submit(
            vector_run,
            lambda: self.vectors.get(shared, key, model),
            lambda: self.embed_query(search.text, embedder),
            allowed=search.allowed,
            hidden=search.hidden,
            out_vector=out_vector,
            cosine_from_median=embedder.cosine_from_median,
        )

    def _start_plugins(self, search: Search) -> dict[str, Future[Run]]:
        """Each plug-in retriever asked for (and whose kinds the filters let through), in a
        worker thread."""
        started: dict[str, Future[Run]] = {}
        request = RetrievalRequest(
            search.text, NOTE_DEPTH, search.filters, search.reads, search.generation, search.allowed
        )
        for name, plugged in self.retrievers.items():
            if search.on(name) and plugged.wanted(search.filters.kinds):
                started[name] = self._executor().submit(timed, plugged.retriever.retrieve, request)
        return started

    def _lexical_run(self, search: Search) -> tuple[LexicalQuery | None, Run]:
        if not search.on("lexical"):
            return None, Run(skipped=True)
        return lexical_run(
            search.reads,
            search.text,
            self._df_cache(search.reads),
            search.store_size,
            search.languages,
            LEXICAL_DEPTH,
            allowed=search.allowed,
            hidden=search.hidden,
        )

    def _graph_run(self, search: Search) -> tuple[dict[int, float], Run]:
        if not search.on("graph"):
            return {}, Run(skipped=True)
        return graph_run(
            search.reads,
            lambda: self.graph.get(search.shared, search.shared_key),
            unreadable=search.unreadable,
            hidden=search.hidden,
            allowed=search.allowed,
            open_note=search.open_note,
            half_life_hours=self.vault.config.focus_half_life_hours,
        )

    def _finish_vector_search(
        self,
        search: Search,
        future: Future[Run],
        out_vector: list[np.ndarray | None],
        lexical: Run,
        model: str,
    ) -> Run:
        """The vector run, refined by feedback from what the lexical run found; the query's
        vector is in `out_vector` once the run is done."""
        run = future.result()
        query_vector = out_vector[0]
        if query_vector is not None and not run.error:
            feedback(
                lexical,
                run,
                query_vector,
                self.vectors.get(search.shared, search.shared_key, model),
                self.vault.config.rrf_k,
                allowed=search.allowed,
                hidden=search.hidden,
            )
        return run

    def _rank_notes(
        self,
        reads: IndexReads,
        runs: dict[str, Run],
        owners: Mapping[str, int],
        k: int,
        weights: Mapping[str, float],
    ) -> tuple[list[RankedNote], list[tuple[str, str]]]:
        """Fuse the note lists, let long notes among the first `k` yield to the shorter notes
        their best passage links to, then lift the notes near the context. Also returns the
        pairs that traded places (pointing note, note pointed to)."""
        lists: dict[str, list[Hit]] = {
            "lexical": roll_up(runs["lexical"].hits, runs["lexical"].owners),
            "vector": runs["vector"].notes,
            # Notes near the context join the pool (scored by what they match), so a linked
            # note can surface even when no retriever found it; the lift below weighs them.
            "graph": runs["graph"].hits,
        }
        plugged = [name for name in self.retrievers if name in runs]  # those that ran
        for name in plugged:
            lists[name] = runs[name].hits
        fused = fuse_scores(
            lists,
            {**weights, "graph": 0.0},
            known={"vector": _note_scores(runs["vector"], lists)},
            by_rank=set(plugged),
        )
        fused, traded = _follow_pointers(reads, fused, runs, owners, k)
        nearness = {hit.key: hit.score for hit in runs["graph"].hits}
        return lift(fused, nearness, self.vault.config.weight_graph), traded

    # --- focus ---------------------------------------------------------------------------

    def focus(self) -> Focus:
        """See `Workspace.focus`."""
        reads = self.scope.view()
        shared, key = self._shared_view(reads)
        size = self.graph.get(shared, key).size
        return current_focus(reads, size, self.vault.config.focus_half_life_hours)

    def clear_focus(self) -> Focus:
        """See `Workspace.clear_focus`."""
        cleared = self.scope.view().clear_accesses()
        focus = self.focus()
        return focus.model_copy(update={"cleared": cleared})

    # --- related notes -------------------------------------------------------------------

    def related(
        self,
        note_id: int,
        path: str,
        *,
        k: int = 10,
        use_vectors: bool = True,
        explain: bool = False,
        max_per_note: int = 1,
    ) -> Selection:
        """See `Workspace.related`: select with a note as the query — its key terms (title
        and headings weighing more than its text) for FTS5, the mean of its blocks' vectors
        for the vector side (nothing to embed), the note as the open one for the graph —
        and the note itself left out."""
        reads = self.scope.view()
        found = reads.note_title_language(note_id)
        if found is None:
            raise NoteNotFound(f"no note named {path!r}")
        title, language = found
        language = self.vault.config.language or language or "en"
        sections = reads.note_sections(note_id)
        text = "\n".join(
            [title] * RELATED_TITLE_WEIGHT
            + [h for h, _ in sections if h] * RELATED_HEADING_WEIGHT
            + [t for _, t in sections]
        )[:RELATED_CHARS]
        tokenizer = QueryTokenizer(reads, df_cache=self._df_cache(reads))
        terms = key_terms(text, tokenizer, self._store_size(reads), RELATED_TERMS, language)
        selection = self.select(
            " ".join(terms) or title,
            k=k,
            use_vectors=use_vectors,
            explain=explain,
            max_per_note=max_per_note,
            query_vector=self._note_vector(reads, note_id) if use_vectors else None,
            open_note=note_id,
            languages=(language,),
        )
        diagnostics = {**selection.diagnostics, "related_terms": terms}
        return selection.model_copy(update={"query": path, "diagnostics": diagnostics})

    def _note_vector(self, reads: IndexView, note_id: int) -> np.ndarray | None:
        """The unit mean of a note's block vectors, or None when it has none (yet)."""
        answering = self.vault.query_model(reads)
        if answering is None:
            return None
        model = answering[0]
        shared, key = self._shared_view(reads)
        matrix = self.vectors.get(shared, key, model)
        rows = matrix.rows_for_notes(np.asarray([note_id], dtype=np.int64))
        if rows.size == 0:
            return None
        mean = matrix.matrix[rows].mean(axis=0)
        norm = float(np.linalg.norm(mean))
        return (mean / norm).astype(np.float32) if norm else None


def vault_languages(
    reads: IndexReads, setting: str | None, hidden: Collection[int] = ()
) -> tuple[str, ...]:
    """The languages of a vault's notes (leaving out the `hidden` ones), most notes first:
    its `language` setting, or every language read from a note (a query too short to tell
    is read in each, so a French note in an English vault is found by its French words);
    English when none."""
    if setting is not None:
        return (setting,)
    counts = reads.language_counts(hidden)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return tuple(language for language, _ in ranked) or ("en",)


def _follow_pointers(
    reads: IndexReads,
    fused: list[Fused],
    runs: dict[str, Run],
    owners: Mapping[str, int],
    depth: int,
) -> tuple[list[Fused], list[tuple[str, str]]]:
    """`follow_pointers`, given the links of the best passage of each of the first `depth`
    notes (those the caller will see) and the length of the notes on both ends."""
    ranked = {f.key for f in fused}
    first = {f.key for f in fused[:depth]}
    passages = {
        note: block
        for note, block in best_passages([runs[n].hits for n in BLOCK_LISTS], owners).items()
        if note_key(note) in first
    }
    found = passage_links(reads, list(passages.values()))
    links: dict[str, set[str]] = {}
    for note, block in passages.items():
        targets = {note_key(t) for t in found.get(block, ())} & ranked
        if targets:
            links[note_key(note)] = targets
    if not links:
        return fused, []
    ends = {note_id(key) for key in links} | {note_id(t) for ts in links.values() for t in ts}
    counts = reads.note_block_counts(sorted(ends))
    return follow_pointers(fused, links, {note_key(n): c for n, c in counts.items()})


def _note_scores(run: Run, lists: Mapping[str, Sequence[Hit]]) -> dict[str, float]:
    """The best block cosine of each note another list found, from the full vector scan."""
    if run.maxima is None:
        return {}
    note_ids, best = run.maxima
    keys = {hit.key for hits in lists.values() for hit in hits if hit.key.startswith("note:")}
    wanted = np.fromiter((note_id(key) for key in keys), dtype=np.int64, count=len(keys))
    if wanted.size == 0 or note_ids.size == 0:
        return {}
    idx = np.clip(np.searchsorted(note_ids, wanted), 0, note_ids.size - 1)
    found = note_ids[idx] == wanted
    return {
        note_key(int(n)): float(v)
        for n, v in zip(wanted[found].tolist(), best[idx[found]].tolist(), strict=True)
    }
