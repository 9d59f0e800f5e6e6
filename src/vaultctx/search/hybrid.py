"""Hybrid retrieval: what select (over blocks) and memory (over memories) both do when they
search two ways at once.

- FTS5 searches in the calling thread while the model embeds the query in a worker thread
  (`meanwhile`): both release the GIL, so the embedding (~10 ms) costs no extra wall time.
- A broken model never fails a search: its error becomes one line (`model_failure`), the
  lexical list still answers, and the path label says so (`after_embed_error`).
- Scores of different lists are compared as a share of their list's best (`share_of_best`):
  bm25 and cosine live on different scales, a share of the best does not.
- A model whose cosines all sit high (multilingual-e5: two unrelated passages ~0.8) has them
  read from the vault's median note for the query (`from_median`): a share of the best
  would otherwise be near 1 for every note, and an absolute cosine would say every note
  matches. The model declares it (`Embedder.cosine_from_median`).

How the lists are then fused differs, for measured reasons: see `pipeline.note_ranking`
(notes: weighted shares of the best) and `memory.ranking` (memories: reciprocal rank fusion,
scaled by the shares).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from typing import TypeVar

import numpy as np

from ..errors import EmbeddingUnavailable

T = TypeVar("T")
Cosines = TypeVar("Cosines", float, np.ndarray)

# Path labels (`retrieval_path` in diagnostics): which lists answered.
HYBRID = "hybrid"  # the lexical and the vector list both ran (however they were fused)


def after_embed_error(lexical_path: str) -> str:
    """The label of a search whose model failed, so only its lexical side answered."""
    return f"{lexical_path}_after_embed_error"


def model_failure(exc: BaseException) -> str:
    """A model's failure as the one line diagnostics show (the model could not load, or
    raised while encoding)."""
    if isinstance(exc, EmbeddingUnavailable):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def meanwhile(pool: Executor | None, fn: Callable[..., T], *args: object) -> Callable[[], T]:
    """Start `fn(*args)` in `pool` now, so it runs while the caller searches FTS5; returns
    the call that waits for its result. Without a pool, `fn` runs when its result is asked
    for."""
    if pool is None:
        return lambda: fn(*args)
    return pool.submit(fn, *args).result


def share_of_best(score: float, best: float) -> float:
    """`score` as a share of its list's `best` score, never below 0 (scores are similarities
    or bm25: 0 means no match); 0 for a list whose best is not positive."""
    return max(score / best, 0.0) if best > 0 else 0.0


def from_median(cosine: Cosines, median: float) -> Cosines:
    """A cosine as the share of the way from the median note's cosine (`median`: 0) to a
    perfect match (1), never below 0: how far it stands out of the vault for this query.
    Element-wise on arrays (finite values only: a masked -inf stays out of every list)."""
    room = max(1.0 - float(median), 1e-6)
    if isinstance(cosine, np.ndarray):
        out = np.maximum((cosine - median) / room, 0.0).astype(cosine.dtype, copy=False)
        return np.where(np.isfinite(cosine), out, cosine)
    return max((cosine - float(median)) / room, 0.0)
