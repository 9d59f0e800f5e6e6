"""How sure select is: a calibrated `confidence` in [0, 1] on each candidate and on the answer,
and `no_good_match` when even the answer's best evidence falls short.

Ranking scores are shares of each list's best, so the first result scores 1.00 whatever it
is. Confidence is read from absolute evidence instead, for each candidate:

- `cosine`: its block's cosine with the query's embedding (the query as typed, not the one
  feedback moved towards the lexical hits), read from the vault's median note when the model
  asks for it (`search.hybrid.from_median`: a model whose every cosine sits high);
- `coverage`: the share of the query's terms, weighted by their idf, that the candidate's
  title, heading and text hold (a word the index lacks is a term missed);
- `agreement`: 1 when lexical and vector search both ranked the block, else 0.

The answer's evidence is the best of each over its candidates, so no candidate is surer than
the answer. A logistic over the evidence turns it into the probability that the question is
one the vault answers (answerable and unanswerable questions weighing the same). Its
constants and its threshold were fitted by `benchmarks/confidence_eval.py` on every
question set available (answerable: the sets of `tests/questions`, Cranfield and SciFact
queries of their corpora; unanswerable: generated nonsense, and one corpus's questions asked
of another) with each set weighing the same; the threshold is the one that does best by
the set it does worst for (the share of an answerable set kept, of an unanswerable one
called "no good match"). That script prints the fit, a fit on half the sets judged on the
other half, and the per-set rates. Cosines read from the median are on a scale of their own
(a share of the way from the median note to 1), so they have constants of their own
(`FROM_MEDIAN_MODEL`), fitted the same way with the multilingual model (the script's
`--model multilingual-e5-small`). Without a query vector (vectors off, not indexed, the
model failed) the lexical model, fitted on coverage alone on the same data, answers. (The
cosine's distance from the query's mean cosine over the vault, in standard deviations, was
tried as a fourth input: it took a weight below zero, adding nothing the cosine does not
say.)

Everything is read through the reader's view: the candidates are of the notes the reader
may see, and a term's idf counts the blocks of those notes only (the selector's document
frequencies are kept per view); a word no visible block holds counts as rare as a word in one
block, so a note the reader may not see never makes a query word count less as missed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..search.hybrid import from_median
from ..search.vectors import dot_rows
from ..storage.language import analyse
from .models import Candidate

if TYPE_CHECKING:
    from ..search.vectors import VectorMatrix
    from ..storage.index_reads import IndexReads
    from ..storage.lexical import LexicalQuery


@dataclass(frozen=True)
class Model:
    """A fitted logistic: intercept and one weight per input, and the confidence below which
    an answer is no good match."""

    weights: tuple[float, ...]
    no_good_match_below: float


# Fitted by benchmarks/confidence_eval.py over every set (see the module's docstring).
HYBRID_MODEL = Model((-7.302, 8.201, 5.673, 2.261), 0.545)  # cosine, coverage, agreement
# The same, for cosines read from the vault's median note (fitted with multilingual-e5-small:
# `confidence_eval.py --model multilingual-e5-small`).
FROM_MEDIAN_MODEL = Model((-6.020, 4.693, 8.494, 2.205), 0.540)  # cosine, coverage, agreement
LEXICAL_MODEL = Model((-3.440, 10.424), 0.515)  # coverage
EVIDENCE = ("cosine", "coverage", "agreement")
_WORD = re.compile(r"[^\W_]+")  # a word as the index's tokenizer cuts text (unicode61)


@dataclass(frozen=True)
class Evidence:
    """What one candidate, or the answer, rests on; `cosine` is None without a query vector,
    `from_median` when it was read from the vault's median note (its own constants: such a
    cosine is a share of the way from the median to 1, not a cosine as it is)."""

    cosine: float | None
    coverage: float
    agreement: float
    from_median: bool = False

    @property
    def model(self) -> Model:
        return hybrid_model(self.from_median) if self.cosine is not None else LEXICAL_MODEL

    def confidence(self) -> float:
        if self.cosine is None:
            return _logistic(LEXICAL_MODEL, (self.coverage,))
        return _logistic(self.model, (self.cosine, self.coverage, self.agreement))

    def as_dict(self) -> dict[str, float | None]:
        return {
            name: None if value is None else round(value, 4)
            for name, value in zip(
                EVIDENCE, (self.cosine, self.coverage, self.agreement), strict=True
            )
        }


@dataclass(frozen=True)
class Verdict:
    """The answer's confidence, whether it is a good match, and the evidence behind it."""

    confidence: float
    no_good_match: bool
    evidence: Evidence


def hybrid_model(from_median: bool) -> Model:
    """The constants for a query vector's evidence: cosines as they are, or from the median."""
    return FROM_MEDIAN_MODEL if from_median else HYBRID_MODEL


def _logistic(model: Model, x: Sequence[float]) -> float:
    intercept, *weights = model.weights
    z = intercept + sum(w * v for w, v in zip(weights, x, strict=True))
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


def assess(
    reads: IndexReads,
    candidates: Sequence[Candidate],
    *,
    lexical: LexicalQuery | None,
    doc_freqs: Mapping[str, int],
    store_size: int,
    matrix: VectorMatrix | None,
    query_vector: np.ndarray | None,
    median: float | None = None,
) -> tuple[list[Candidate], Verdict]:
    """Each candidate with its confidence, and the answer's verdict; `median`: the vault's
    median note cosine for this query, that cosines are read from (None: as they are)."""
    terms = _query_terms(lexical, doc_freqs, store_size)
    cosines = _block_cosines(candidates, matrix, query_vector)
    read_from_median = cosines is not None and median is not None
    if cosines is not None and median is not None:
        cosines = {key: from_median(cosine, median) for key, cosine in cosines.items()}
    languages = lexical.languages if lexical is not None else ("en",)
    coverages = _coverages(reads, candidates, terms, languages)
    found = [
        Evidence(
            cosine=None if cosines is None else cosines.get(candidate.id),
            coverage=coverage,
            agreement=float({"lexical", "vector"} <= candidate.sources.keys()),
            from_median=read_from_median,
        )
        for candidate, coverage in zip(candidates, coverages, strict=True)
    ]
    answer = _best(found, hybrid=cosines is not None, from_median=read_from_median)
    confidence = answer.confidence()
    annotated = [
        c.model_copy(update={"confidence": round(e.confidence(), 4)})
        for c, e in zip(candidates, found, strict=True)
    ]
    below = answer.model.no_good_match_below
    return annotated, Verdict(round(confidence, 4), confidence < below, answer)


def _best(found: Sequence[Evidence], *, hybrid: bool, from_median: bool = False) -> Evidence:
    """The best of each piece of evidence over the candidates (none: no evidence at all)."""
    cosines = [e.cosine for e in found if e.cosine is not None]
    return Evidence(
        cosine=max(cosines, default=0.0) if hybrid else None,
        coverage=max((e.coverage for e in found), default=0.0),
        agreement=max((e.agreement for e in found), default=0.0),
        from_median=from_median,
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


def _coverages(
    reads: IndexReads,
    candidates: Sequence[Candidate],
    terms: Mapping[str, float],
    languages: Sequence[str],
) -> list[float]:
    """The idf-weighted share of the query's terms each candidate's title, heading and text
    hold. Each distinct word of the candidates is tokenized once, in one call per language
    (a call writes a temporary table: one per candidate, or the whole texts, cost a select
    tens of milliseconds at k=100)."""
    total = sum(terms.values())
    if total <= 0 or not candidates:
        return [0.0] * len(candidates)
    words = [set(_WORD.findall(f"{c.title} {c.heading_path} {c.text}")) for c in candidates]
    vocabulary = sorted(set().union(*words))
    spelled: dict[str, set[str]] = {t: set() for t in terms}  # each term's words as written
    for language in languages:
        joined = " ".join(vocabulary)
        # A language the index does not stem (English: the index's porter stems it) leaves
        # the words as they are: one call says so for all of them.
        if analyse(joined, language) == joined:
            analysed = vocabulary
        else:
            analysed = [analyse(word, language) or "" for word in vocabulary]
        stems = reads.stems(" ".join(analysed))
        if len(stems) != len(vocabulary):  # a word analysed or cut into several: one by one
            stems = [" ".join(reads.stems(text)) for text in analysed]
        for word, stem in zip(vocabulary, stems, strict=True):
            for term in stem.split():
                if term in spelled:
                    spelled[term].add(word)
    return [
        sum(w for t, w in terms.items() if not spelled[t].isdisjoint(mine)) / total
        for mine in words
    ]


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
