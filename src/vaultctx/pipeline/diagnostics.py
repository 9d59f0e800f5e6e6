"""What a select says about itself: its diagnostics (each retriever's time and hits, the path
that answered, errors) and, asked to `explain`, how the query was read and ranked."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..search.hybrid import HYBRID, after_embed_error
from .note_ranking import LENGTH_CORRECTION, note_id
from .retrievers import BUILT_IN, VECTOR_READ_ERROR, Retrieved, Run, Search


def diagnostics_of(
    search: Search,
    found: Retrieved,
    retrievers: Sequence[str],
    use_vectors: bool,
    started: float,
) -> dict[str, Any]:
    """What each retriever took and found, and which path answered."""
    runs = found.runs
    out: dict[str, Any] = {"select_ms": round((time.perf_counter() - started) * 1000, 3)}
    out["retrievers"] = ran = [*BUILT_IN, *retrievers]
    for name in ran:
        run = runs.get(name, Run(skipped=True))
        out[f"{name}_ms"] = round(run.ms, 3)
        out[f"{name}_hits"] = len(run.hits)
    out["vector_feedback"] = runs["vector"].feedback
    out["vector_pass"] = "sketch" if runs["vector"].approximate else "scan"
    out["vector_model"] = None if runs["vector"].skipped else found.vector_model
    out["context_notes"] = len(found.context)
    out["store_size"] = search.store_size
    out["retrieval_path"] = retrieval_path(runs, use_vectors, found.vectors_indexed)
    errors = {name: run.error for name, run in runs.items() if run.error}
    if errors:
        out["errors"] = errors
    return out


def explanation(
    search: Search,
    found: Retrieved,
    pointers: Sequence[tuple[str, str]],
    weights: Mapping[str, float],
    lift: float,
) -> dict[str, Any]:
    """`--explain`: how the query was read, the context, the vector side's length
    correction, the notes that traded places, the filters and the weights."""
    runs, context = found.runs, found.context
    traded = [(note_id(a), note_id(b)) for a, b in pointers]
    paths = search.reads.note_paths([*context, *(n for pair in traded for n in pair)])
    return {
        "lexical": found.lexical_query.explain() if found.lexical_query else None,
        "graph": {
            "context": [
                {"path": paths[n], "weight": round(w, 4)}
                for n, w in sorted(context.items(), key=lambda kv: (-kv[1], kv[0]))
                if n in paths
            ],
            "near": len(runs["graph"].hits),
            "lift": lift,
        },
        "vector": None
        if runs["vector"].scores is None
        else {  # how far each note's best cosine was discounted for its length
            "spread": round(runs["vector"].spread, 4),
            "length_correction": LENGTH_CORRECTION,
        }
        | _median(runs["vector"]),
        "pointers": [
            {"from": paths[a], "to": paths[b]} for a, b in traded if a in paths and b in paths
        ],
        "filters": search.filters.model_dump(mode="json", exclude_defaults=True),
        "allowed_notes": None if search.allowed is None else len(search.allowed),
        "hidden_notes": len(search.hidden),
        "weights": dict(weights),
    }


def _median(vector: Run) -> dict[str, float]:
    """The median note cosine the notes' cosines were read from, when they were."""
    return {} if vector.median is None else {"median_note_cosine": round(vector.median, 4)}


def retrieval_path(runs: Mapping[str, Run], use_vectors: bool, vectors_indexed: bool) -> str:
    """Which lists answered: both, the lexical one alone (and why), or the vector one."""
    vector, lexical_run = runs["vector"], runs["lexical"]
    if vector.error:
        if vector.error.startswith(f"{VECTOR_READ_ERROR}:"):
            return "lexical_graph_after_vector_error"
        return after_embed_error("lexical_graph")
    if lexical_run.error:
        return "vector_graph_after_lexical_error"
    if vector.skipped:
        if not use_vectors:
            return "lexical_graph"
        return "lexical_graph_no_vectors" if not vectors_indexed else "lexical_graph"
    return HYBRID
