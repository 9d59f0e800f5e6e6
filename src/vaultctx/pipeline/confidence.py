"""How sure select is: a calibrated `confidence` in [0, 1] on each candidate and on the answer,
and `no_good_match` when even the answer's best evidence falls short.

Ranking scores are shares of each list's best, so the first result scores 1.00 whatever it
is. Confidence is read from absolute evidence instead, for each candidate:

- `cosine`: its block's cosine with the query's embedding (the query as typed, not the one
  feedback moved towards the lexical hits);
- `lift`: how far that cosine stands above the query's cosines over the vault, in standard
  deviations (a short, generic query is close to every block, so closeness alone says less);
- `coverage`: the share of the query's terms, weighted by their idf, that the candidate's
  title, heading and text hold (a word the index lacks is a term missed);
- `agreement`: 1 when lexical and vector search both ranked the block, else 0.

The answer's evidence is the best of each over its candidates, so no candidate is surer than
the answer. A logistic over the evidence turns it into a probability that the question is
one the vault answers. Its constants were fitted by `benchmarks/confidence_eval.py` on every
question set available (answerable: the sets of `tests/questions`, Cranfield and SciFact
queries of their corpora; unanswerable: generated nonsense, and one corpus's questions asked
of another) with each set weighing the same; that script prints the fit and the per-set
rates. Without a query vector (vectors off, not indexed, the model failed) the lexical
model, fitted on coverage alone on the same data, answers.

Everything is read through the reader's view: the candidates and the vault's cosines are of
the notes the reader may see. The idf of a term comes from the full-text index's counts, as
bm25's do (`permissions.view`); a word the index lacks counts as rare as a word in one block,
so a hidden note holding it makes it no less missed.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..search.vectors import dot_rows
from ..storage.language import analyse
from .models import Candidate
from .note_ranking import SPREAD_SAMPLE

if TYPE_CHECKING:
    from ..search.vectors import VectorMatrix
    from ..storage.index_reads import IndexReads
    from ..storage.lexical import LexicalQuery
    from .retrievers import Run

# Logistic weights (intercept first) fitted by benchmarks/confidence_eval.py over all sets.
HYBRID_MODEL = (-14.2, 13.9, 0.42, 4.1, 0.6)  # intercept, cosine, lift, coverage, agreement
LEXICAL_MODEL = (-3.0, 5.0)  # intercept, coverage
# Below this the answer is "no good match" (also fitted: see the benchmark).
NO_GOOD_MATCH_BELOW = 0.5
EVIDENCE = ("cosine", "lift", "coverage", "agreement")


@dataclass(frozen=True)
class Evidence:
    """What one candidate, or the answer, rests on; `cosine` and `lift` are None without a
    query vector."""

    cosine: float | None
    lift: float | None
    coverage: float
    agreement: float

    def confidence(self) -> float:
        if self.cosine is None or self.lift is None:
            return _logistic(LEXICAL_MODEL, (self.coverage,))
        return _logistic(HYBRID_MODEL, (self.cosine, self.lift, self.coverage, self.agreement))

    def as_dict(self) -> dict[str, float | None]:
        return {
            name: None if value is None else round(value, 4)
            for name, value in zip(
                EVIDENCE, (self.cosine, self.lift, self.coverage, self.agreement), strict=True
            )
        }


@dataclass(frozen=True)
class Verdict:
    """The answer's confidence, whether it is a good match, and the evidence behind it."""

    confidence: float
    no_good_match: bool
    evidence: Evidence


def _logistic(model: Sequence[float], x: Sequence[float]) -> float:
    z = model[0] + sum(w * v for w, v in zip(model[1:], x, strict=True))
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


def assess(
    reads: IndexReads,
    candidates: Sequence[Candidate],
    *,
    lexical: LexicalQuery | None,
    doc_freqs: Mapping[str, int],
    store_size: int,
    vector: Run,
    matrix: VectorMatrix | None,
    query_vector: np.ndarray | None,
    allowed: Collection[int] | None,
    hidden: Collection[int],
) -> tuple[list[Candidate], Verdict]:
    """Each candidate with its confidence, and the answer's verdict."""
    terms = _query_terms(lexical, doc_freqs, store_size)
    cosines = _block_cosines(candidates, matrix, query_vector)
    center, spread = (
        _distribution(vector, matrix, query_vector, allowed, hidden)
        if cosines is not None
        else (0.0, 0.0)
    )
    languages = lexical.languages if lexical is not None else ("en",)
    found: list[Evidence] = []
    for candidate in candidates:
        cosine = None if cosines is None else cosines.get(candidate.id)
        found.append(
            Evidence(
                cosine=cosine,
                lift=None if cosine is None else _lift(cosine, center, spread),
                coverage=_coverage(reads, candidate, terms, languages),
                agreement=float({"lexical", "vector"} <= candidate.sources.keys()),
            )
        )
    answer = _best(found, hybrid=cosines is not None)
    confidence = answer.confidence()
    annotated = [
        c.model_copy(update={"confidence": round(e.confidence(), 4)})
        for c, e in zip(candidates, found, strict=True)
    ]
    return annotated, Verdict(round(confidence, 4), confidence < NO_GOOD_MATCH_BELOW, answer)


def _best(found: Sequence[Evidence], *, hybrid: bool) -> Evidence:
    """The best of each piece of evidence over the candidates (none: no evidence at all)."""
    cosines = [e.cosine for e in found if e.cosine is not None]
    lifts = [e.lift for e in found if e.lift is not None]
    return Evidence(
        cosine=max(cosines, default=0.0) if hybrid else None,
        lift=max(lifts, default=0.0) if hybrid else None,
        coverage=max((e.coverage for e in found), default=0.0),
        agreement=max((e.agreement for e in found), default=0.0),
    )


def _idf(df: int, blocks: int) -> float:
    return math.log(1.0 + (blocks - df + 0.5) / (df + 0.5))


def _query_terms(
    lexical: LexicalQuery | None, doc_freqs: Mapping[str, int], store_size: int
) -> dict[str, float]:
    """The query's terms by idf; a word the index lacks (no term to match) under a name no
    index term has."""
    if lexical is None:
        return {}
    blocks = max(store_size, 1)
    terms = {t: _idf(max(doc_freqs.get(t, 1), 1), blocks) for t in lexical.terms}
    for word, why in lexical.dropped.items():
        if why == "not in the index":
            terms[f"\0{word}"] = _idf(1, blocks)
    return terms


def _coverage(
    reads: IndexReads, candidate: Candidate, terms: Mapping[str, float], languages: Sequence[str]
) -> float:
    """The idf-weighted share of the query's terms that the candidate's text holds."""
    total = sum(terms.values())
    if total <= 0:
        return 0.0
    text = " ".join((candidate.title, candidate.heading_path, candidate.text))
    held: set[str] = set()
    for language in languages:
        held.update(reads.stems(analyse(text, language) or ""))
    return sum(w for t, w in terms.items() if t in held) / total


def _block_cosines(
    candidates: Sequence[Candidate], matrix: VectorMatrix | None, query_vector: np.ndarray | None
) -> dict[str, float] | None:
    """Each block candidate's cosine with the query (None: no query vector to compare)."""
    if matrix is None or query_vector is None:
        return None
    ids = sorted({c.block_id for c in candidates if c.kind == "block" and c.block_id is not None})
    rows = matrix.rows_for_blocks(np.asarray(ids, dtype=np.int64))
    if rows.size == 0:
        return {}
    sims = dot_rows(matrix.matrix[rows], query_vector)
    return {
        f"block:{int(b)}": float(s)
        for b, s in zip(matrix.block_ids[rows].tolist(), sims.tolist(), strict=True)
    }


def _distribution(
    vector: Run,
    matrix: VectorMatrix | None,
    query_vector: np.ndarray | None,
    allowed: Collection[int] | None,
    hidden: Collection[int],
) -> tuple[float, float]:
    """Mean and standard deviation of the query's cosines over the blocks the reader may
    see (within the filters): the first pass's scores when it scored every row, else a
    strided sample of the matrix."""
    scores = vector.scores
    if (scores is None or vector.rows is not None) and matrix is not None and matrix.size:
        sample = np.arange(0, matrix.size, max(1, matrix.size // SPREAD_SAMPLE))
        scores = matrix.scores(
            query_vector,
            None if allowed is None else np.fromiter(sorted(allowed), np.int64, len(allowed)),
            rows=sample,
            hidden_notes=np.fromiter(sorted(hidden), np.int64, len(hidden)) if hidden else None,
        )
    if scores is None:
        return 0.0, 0.0
    step = max(1, scores.size // SPREAD_SAMPLE)
    sample = scores[::step]
    sample = sample[np.isfinite(sample)]
    if sample.size < 2:
        return 0.0, 0.0
    return float(sample.mean()), float(sample.std())


def _lift(cosine: float, center: float, spread: float) -> float:
    return (cosine - center) / spread if spread > 0 else 0.0
