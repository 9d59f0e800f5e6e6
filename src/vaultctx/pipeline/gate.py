"""The deterministic gate: select's candidates trimmed to a token budget with no model.

Near-duplicates dropped (by embedding cosine, or word sets without vectors), the rest
diversified with MMR, very short blocks given their neighbouring blocks for context, and the
budget filled in that order. It runs on data already in memory (the Selector's vector matrix)
and takes about a millisecond for 100 candidates; it is also what refine falls back to when
the model is slow, down, rate limited or talks nonsense.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..storage.blocks import TOKEN, estimate_tokens
from .context import ContextItem
from .models import Candidate

MMR_LAMBDA = 0.8  # weight of relevance against novelty
VECTOR_DUPLICATE = 0.95  # cosine of embeddings above which two blocks say the same
LEXICAL_DUPLICATE = 0.9  # cosine of word sets, when there are no embeddings
SHORT_BLOCK_TOKENS = 20  # blocks shorter than this get their neighbours merged in
LEXICAL_WORDS = 64  # words per candidate compared for lexical similarity
LEXICAL_DIMENSIONS = 512  # word sets are folded into this many buckets
GATE_POOL = 100  # candidates deduplicated and diversified; later ones follow in rank order
_PUNCTUATION = str.maketrans(dict.fromkeys(string.punctuation, " "))


@dataclass(frozen=True)
class Neighbour:
    """A block next to a candidate in the same note: `offset` -1 (before) or +1 (after)."""

    id: str
    offset: int
    text: str
    tokens: int
    start_line: int
    end_line: int


NeighbourLookup = Callable[[Candidate], Sequence[Neighbour]]


def candidate_tokens(candidate: Candidate) -> int:
    """The index's token count of a block (text and headings); estimated for others."""
    return candidate.tokens if candidate.tokens > 0 else estimate_tokens(candidate.text)


def truncate_to_tokens(text: str, limit: int) -> str:
    """The longest prefix of `text` ending on a token boundary with at most `limit` tokens."""
    if limit <= 0:
        return ""
    end = 0
    for count, match in enumerate(TOKEN.finditer(text), start=1):
        end = match.end()
        if count == limit:
            break
    return text[:end]


def similarity_matrix(
    candidates: Sequence[Candidate], vectors: np.ndarray | None, has_vector: np.ndarray | None
) -> tuple[np.ndarray, float]:
    """Pairwise similarity and the duplicate threshold that goes with it: cosine of the
    embeddings where both candidates have one, else cosine of their word sets."""
    n = len(candidates)
    if vectors is not None and has_vector is not None and bool(has_vector.all()):
        return _gram(vectors), VECTOR_DUPLICATE
    lexical = _lexical_similarity(candidates)
    if vectors is None or has_vector is None or not has_vector.any():
        return lexical, LEXICAL_DUPLICATE
    both = has_vector[:, None] & has_vector[None, :]
    sims = np.where(both, _gram(vectors), lexical)
    return sims.reshape(n, n), VECTOR_DUPLICATE


def _gram(matrix: np.ndarray) -> np.ndarray:
    """All pairwise dot products. einsum, not `@`: for these small matrices a multithreaded
    BLAS spends ~15 ms waking threads on a busy machine, einsum well under one."""
    return np.einsum("id,jd->ij", matrix, matrix)


def _lexical_similarity(candidates: Sequence[Candidate]) -> np.ndarray:
    """Cosine of word sets, folded into a fixed number of buckets to stay fast; word ids
    come from first appearance, so the result never depends on Python's hash seed."""
    vocabulary: dict[str, int] = {}
    rows: list[int] = []
    cols: list[int] = []
    for row, candidate in enumerate(candidates):
        words = candidate.text.lower().translate(_PUNCTUATION).split()[:LEXICAL_WORDS]
        for word in dict.fromkeys(words):
            rows.append(row)
            cols.append(vocabulary.setdefault(word, len(vocabulary)) % LEXICAL_DIMENSIONS)
    matrix = np.zeros((len(candidates), LEXICAL_DIMENSIONS), dtype=np.float32)
    np.add.at(matrix, (rows, cols), 1.0)
    norms = np.linalg.norm(matrix, axis=1)
    norms[norms == 0] = 1.0
    matrix /= norms[:, None]
    return _gram(matrix)


def drop_duplicates(
    candidates: Sequence[Candidate], sims: np.ndarray, threshold: float
) -> list[int]:
    """Indices of the candidates to keep, in rank order: a candidate goes when a better one
    overlaps its lines in the same note, or is more similar than `threshold` (which covers
    the same text in another note: its similarity is 1)."""
    kept: list[int] = []
    spans: dict[str, list[tuple[int, int]]] = {}
    for i, candidate in enumerate(candidates):
        if kept and float(sims[i, kept].max()) > threshold:
            continue
        if candidate.path is not None and candidate.start_line is not None:
            end = candidate.end_line if candidate.end_line is not None else candidate.start_line
            seen = spans.setdefault(candidate.path, [])
            if any(s <= end and candidate.start_line <= e for s, e in seen):
                continue
            seen.append((candidate.start_line, end))
        kept.append(i)
    return kept


def mmr_order(scores: np.ndarray, sims: np.ndarray, lam: float = MMR_LAMBDA) -> list[int]:
    """Maximal marginal relevance: each next pick trades relevance (min-max normalized
    fused score) against similarity to what is already picked. Ties keep rank order."""
    n = scores.shape[0]
    if n == 0:
        return []
    spread = float(scores.max() - scores.min())
    relevance = (scores - scores.min()) / spread if spread > 0 else np.ones(n)
    closest = np.zeros(n)
    remaining = np.ones(n, dtype=bool)
    order: list[int] = []
    for _ in range(n):
        value = np.where(remaining, lam * relevance - (1 - lam) * closest, -np.inf)
        pick = int(np.argmax(value))
        order.append(pick)
        remaining[pick] = False
        closest = np.maximum(closest, sims[pick])
    return order


def fill_budget(
    ranked: Sequence[tuple[Candidate, str]],
    budget: int,
    neighbours: NeighbourLookup | None = None,
) -> tuple[ContextItem, ...]:
    """Items in the given order while they fit in `budget` tokens; one that does not fit is
    skipped for smaller ones after it. If the first does not fit on its own, a truncated
    copy of it fills the budget. Very short blocks take their neighbours along if they fit."""
    if not ranked or budget < 1:
        return ()
    first, first_reason = ranked[0]
    if candidate_tokens(first) > budget:
        text = truncate_to_tokens(first.text, budget)
        return (
            _item(
                first,
                f"{first_reason}; truncated to fit the budget",
                text=text,
                tokens=estimate_tokens(text),
                truncated=True,
            ),
        )
    items: list[ContextItem] = []
    present: set[str] = set()
    used = 0
    for candidate, reason in ranked:
        tokens = candidate_tokens(candidate)
        if candidate.id in present or used + tokens > budget:
            continue
        item = _item(candidate, reason, text=candidate.text, tokens=tokens)
        present.add(candidate.id)
        if tokens < SHORT_BLOCK_TOKENS and neighbours is not None and candidate.kind == "block":
            item = _merge_neighbours(item, neighbours(candidate), budget - used, present)
        items.append(item)
        used += item.tokens
        if used >= budget:
            break
    return tuple(items)


def _merge_neighbours(
    item: ContextItem, found: Sequence[Neighbour], room: int, present: set[str]
) -> ContextItem:
    """Extend a very short block with the blocks before and after it, as room allows."""
    before = after = ""
    tokens, start, end = item.tokens, item.start_line, item.end_line
    merged: list[str] = []
    for neighbour in sorted(found, key=lambda n: n.offset):
        if (
            not neighbour.text.strip()
            or neighbour.id in present
            or tokens + neighbour.tokens > room
        ):
            continue
        present.add(neighbour.id)
        merged.append(neighbour.id)
        tokens += neighbour.tokens
        if neighbour.offset < 0:
            before = neighbour.text + "\n\n"
            start = neighbour.start_line
        else:
            after = "\n\n" + neighbour.text
            end = neighbour.end_line
    if not merged:
        return item
    return item.model_copy(
        update={
            "text": before + item.text + after,
            "tokens": tokens,
            "start_line": start,
            "end_line": end,
            "merged": tuple(merged),
            "reason": f"{item.reason}; with its neighbouring block{'s' * (len(merged) > 1)}",
        }
    )


def _item(
    candidate: Candidate, reason: str, *, text: str, tokens: int, truncated: bool = False
) -> ContextItem:
    return ContextItem(
        id=candidate.id,
        kind=candidate.kind,
        path=candidate.path,
        title=candidate.title,
        heading=candidate.heading,
        heading_path=candidate.heading_path,
        text=text,
        score=candidate.score,
        reason=reason,
        sources=candidate.sources,
        tokens=tokens,
        start_line=candidate.start_line,
        end_line=candidate.end_line,
        truncated=truncated,
    )


def deterministic_gate(
    candidates: Sequence[Candidate],
    budget: int,
    *,
    vectors: np.ndarray | None = None,
    has_vector: np.ndarray | None = None,
    neighbours: NeighbourLookup | None = None,
) -> tuple[tuple[ContextItem, ...], int]:
    """The gate that never fails: (items, duplicates dropped). `vectors` are the
    candidates' embeddings (rows aligned, unit length; `has_vector` marks real ones).

    Only the first `GATE_POOL` candidates are deduplicated and diversified (the work is
    quadratic, and a budget is full long before); any after them follow in rank order."""
    if not candidates:
        return (), 0
    pool = list(candidates[:GATE_POOL])
    if vectors is not None and has_vector is not None:
        vectors, has_vector = vectors[:GATE_POOL], has_vector[:GATE_POOL]
    sims, threshold = similarity_matrix(pool, vectors, has_vector)
    kept = drop_duplicates(pool, sims, threshold)
    scores = np.asarray([pool[i].score for i in kept], dtype=np.float64)
    order = mmr_order(scores, sims[np.ix_(kept, kept)])
    total = len(candidates)
    ranked = [
        (pool[kept[j]], f"fused rank {kept[j] + 1} of {total}; diverse by MMR") for j in order
    ]
    ranked += [
        (c, f"fused rank {rank} of {total}")
        for rank, c in enumerate(candidates[GATE_POOL:], start=GATE_POOL + 1)
    ]
    return fill_budget(ranked, budget, neighbours), len(pool) - len(kept)
