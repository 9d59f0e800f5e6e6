"""Weighted reciprocal rank fusion: one ranked list from many, with provenance.

Fusion knows nothing about where hits come from: any retriever that returns a ranked list of
keys (blocks, notes, memories) plugs in without touching this module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..config import default

DEFAULT_RRF_K: int = default("rrf_k")


@dataclass(frozen=True)
class Hit:
    """One result of one retriever. `key` names the candidate ("block:12", "memory:ab3")."""

    key: str
    score: float
    payload: Mapping[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Provenance:
    rank: int  # 1-based rank in that retriever's list
    score: float  # the retriever's raw score


@dataclass(frozen=True)
class Fused:
    key: str
    score: float
    sources: dict[str, Provenance]


def rrf_fuse(
    ranked: Mapping[str, Sequence[Hit]],
    weights: Mapping[str, float] | None = None,
    *,
    k: int = DEFAULT_RRF_K,
) -> list[Fused]:
    """score(key) = Σ_retrievers weight / (k + rank).

    A key listed twice by one retriever counts once, at its best rank. Order is total and
    deterministic: fused score, then the number of retrievers that found the key, then its
    best rank, then the key itself.
    """
    scores: dict[str, float] = {}
    sources: dict[str, dict[str, Provenance]] = {}
    for name in sorted(ranked):
        weight = 1.0 if weights is None else float(weights.get(name, 1.0))
        rank = 0
        for hit in ranked[name]:
            found = sources.setdefault(hit.key, {})
            if name in found:
                continue
            rank += 1
            found[name] = Provenance(rank=rank, score=float(hit.score))
            scores[hit.key] = scores.get(hit.key, 0.0) + weight / (k + rank)
    fused = [Fused(key, scores[key], sources[key]) for key in scores]
    fused.sort(
        key=lambda f: (
            -f.score,
            -len(f.sources),
            min(p.rank for p in f.sources.values()),
            f.key,
        )
    )
    return fused


def rrf_order(ranked: Mapping[str, Sequence[Hit]], *, k: int = DEFAULT_RRF_K) -> list[str]:
    """The keys of `rrf_fuse` with equal weights, in the same order, without building
    provenance: select orders a few hundred blocks with it on every query."""
    scores: dict[str, float] = {}
    found: dict[str, int] = {}
    best: dict[str, int] = {}
    for name in sorted(ranked):
        # Each key at its first place in the list, ranked from 1 among the distinct keys.
        for rank, key in enumerate(dict.fromkeys(hit.key for hit in ranked[name]), start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
            found[key] = found.get(key, 0) + 1
            if key not in best or rank < best[key]:
                best[key] = rank
    return sorted(scores, key=lambda key: (-scores[key], -found[key], best[key], key))
