"""Memory ranking: hybrid token recall + embedding, weighed by importance and recency.

Relevance is reciprocal rank fusion of an FTS5 bm25 search ("token recall") and a nearest-
neighbour search over memory embeddings; the two run in parallel (FTS5 here, the query
embedding in a worker thread). A memory's score is its relevance damped by importance and by
recency, which halves every `half_life` days of its tier since it was formed or last used —
so a conversation's memories fade in a day, the account's over a year. `now` can be passed,
so a replayed history decays relative to its own time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..pipeline.fusion import DEFAULT_RRF_K, Hit, rrf_fuse
from .models import Memory, MemoryKind, Tier
from .places import Target
from .store import ScoreRow
from .temporal import Window, time_window

DEPTH = 50
# Ranked this many times k before dedupe: enough that k distinct moments remain.
OVERFETCH = 3
# A vector-only hit this dissimilar is noise, however high it ranks among few memories.
MIN_SIMILARITY = 0.2
# score = relevance × (BASE + W_IMPORTANCE·importance + W_RECENCY·recency): relevance decides,
# importance and recency reorder what is about equally relevant. Recency weighs little: a
# channel spans months, and what was said in its first week must not sink under chit-chat
# of the last one (on LoCoMo, 0.2 cost 0.016 of recall@5 against 0.05).
BASE = 0.75
W_IMPORTANCE = 0.2
W_RECENCY = 0.05
DAY = 86400.0
# A memory formed in the window of time the query names ("in May 2023"), or said by a person
# the query names, is more likely what it asks about: its score is raised by this share.
TIME_BOOST = 0.5
SPEAKER_BOOST = 0.2

HYBRID = "hybrid_rrf"
TOKEN_RECALL = "token_recall"
TOKEN_RECALL_AFTER_EMBED_ERROR = "token_recall_after_embed_error"


@dataclass(frozen=True)
class SearchResult:
    memories: list[Memory]
    retrieval_path: str
    error: str | None = None


def recency(last_used: float, now: float, half_life_days: float) -> float:
    """0.5 ** (days since formed or last accessed / half-life); never above 1."""
    age = max(0.0, now - last_used) / DAY
    return float(0.5 ** (age / max(half_life_days, 1e-6)))


def hybrid_search(
    targets: Sequence[Target],
    query: str,
    *,
    kinds: Sequence[MemoryKind],
    k: int,
    now: float,
    half_lives: Mapping[Tier, float],
    embed: Callable[[str], np.ndarray] | None = None,
    query_vector: np.ndarray | None = None,
    pool: ThreadPoolExecutor | None = None,
    rrf_k: int = DEFAULT_RRF_K,
    min_similarity: float = MIN_SIMILARITY,
) -> SearchResult:
    """Rank memories of `targets` for `query`. Never raises for a failing model: it falls
    back to token recall and says so in `retrieval_path`."""
    targets = [(repo, list(scopes)) for repo, scopes in targets if scopes]
    with_vectors = [
        i for i, (repo, scopes) in enumerate(targets) if repo.sync_mirror().vectors_in(scopes)
    ]
    vector_hits: list[tuple[str, float]] = []
    use_vectors = bool(with_vectors) and (embed is not None or query_vector is not None)

    def nearest(vector: np.ndarray) -> list[tuple[str, float]]:
        found = []
        for i in with_vectors:
            repo, scopes = targets[i]
            found += [(f"{i}:{r}", s) for r, s in repo.mirror.nearest(vector, scopes, kinds, DEPTH)]
        found.sort(key=lambda h: (-h[1], h[0]))
        return [h for h in found[:DEPTH] if h[1] >= min_similarity]

    # The model encodes in a worker thread while FTS5 searches here (both release the GIL);
    # the nearest-neighbour product itself takes well under a millisecond.
    pending = None
    if use_vectors and query_vector is None and embed is not None:
        pending = pool.submit(embed, query) if pool is not None else None

    window = time_window(query, now)
    token_hits: list[tuple[str, float]] = []
    timely: list[tuple[str, float]] = []
    for i, (repo, scopes) in enumerate(targets):
        token_hits += [(f"{i}:{r}", s) for r, s in repo.token_recall(query, scopes, kinds, DEPTH)]
        if window is not None:
            found = repo.token_recall(query, scopes, kinds, DEPTH, window=window)
            timely += [(f"{i}:{r}", s) for r, s in found]
    token_hits.sort(key=lambda h: (-h[1], h[0]))
    timely.sort(key=lambda h: (-h[1], h[0]))

    failure: Exception | None = None
    if use_vectors:
        try:
            if query_vector is None:
                query_vector = pending.result() if pending is not None else embed(query)  # type: ignore[misc]
            vector_hits = nearest(query_vector)
        except Exception as exc:  # a broken model must not take memory down with it
            failure = exc
    path = TOKEN_RECALL
    if use_vectors:
        path = TOKEN_RECALL_AFTER_EMBED_ERROR if failure is not None else HYBRID
    ranked = {"token_recall": [Hit(key, s) for key, s in token_hits[:DEPTH]]}
    if vector_hits:
        ranked["embedding"] = [Hit(key, s) for key, s in vector_hits]
    if timely:  # the query's words among memories of the time it names
        ranked["temporal"] = [Hit(key, s) for key, s in timely]
    boosts = Boosts(window, _named(query))
    memories = _score(targets, ranked, k, now, half_lives, rrf_k, boosts)
    error = None if failure is None else f"{type(failure).__name__}: {failure}"
    return SearchResult(memories, path, error)


@dataclass(frozen=True)
class Boosts:
    """What the query says beyond its words: a window of time, and words that may be names."""

    window: Window | None
    words: frozenset[str]

    def factor(self, row: ScoreRow) -> float:
        factor = 1.0
        if self.window is not None and self.window[0] <= row.created_at < self.window[1]:
            factor += TIME_BOOST
        if row.speaker and row.speaker.lower() in self.words:
            factor += SPEAKER_BOOST
        return factor


def _named(query: str) -> frozenset[str]:
    return frozenset(w.lower() for w in _NAME.findall(query))


_NAME = re.compile(r"\b[A-Z][\w'-]*")


def _score(
    targets: Sequence[Target],
    ranked: Mapping[str, Sequence[Hit]],
    k: int,
    now: float,
    half_lives: Mapping[Tier, float],
    rrf_k: int,
    boosts: Boosts,
) -> list[Memory]:
    """Score every fused candidate from a few columns; build full memories for the top k."""
    lists = len(ranked)
    fused = rrf_fuse(ranked, k=rrf_k)
    by_target: dict[int, list[int]] = {}
    for f in fused:
        i, rowid = f.key.split(":")
        by_target.setdefault(int(i), []).append(int(rowid))
    facts = {
        f"{i}:{rowid}": row
        for i, rowids in by_target.items()
        for rowid, row in targets[i][0].score_rows(rowids).items()
    }
    best = lists / (rrf_k + 1)
    scored = []
    for f in fused:
        row = facts.get(f.key)
        if row is None:
            continue
        relevance = f.score / best
        fresh = recency(row.last_used, now, half_lives[row.tier])
        boost = boosts.factor(row)
        score = relevance * boost * (BASE + W_IMPORTANCE * row.importance + W_RECENCY * fresh)
        scores = {"relevance": relevance, "importance": row.importance, "recency": fresh}
        if boost != 1.0:
            scores["boost"] = boost
        for name, provenance in f.sources.items():
            scores[f"{name}_rank"] = float(provenance.rank)
        scored.append((score, f.key, scores))
    scored.sort(key=lambda t: (-t[0], t[1]))
    top = scored[:k]
    wanted: dict[int, list[int]] = {}
    for _, key, _ in top:
        i, rowid = key.split(":")
        wanted.setdefault(int(i), []).append(int(rowid))
    rows = {
        f"{i}:{rowid}": memory
        for i, rowids in wanted.items()
        for rowid, memory in targets[i][0].by_rowids(rowids).items()
    }
    return [
        rows[key].model_copy(update={"score": score, "scores": scores})
        for score, key, scores in top
        if key in rows
    ]


def rank(
    targets: Sequence[Target],
    query: str,
    *,
    kinds: Sequence[MemoryKind],
    k: int,
    **options: Any,
) -> SearchResult:
    """The one ranking every door uses (`search`, a turn's context, select): hybrid search,
    then each moment once — so the slots go to different moments."""
    result = hybrid_search(targets, query, kinds=kinds, k=k * OVERFETCH, **options)
    memories = dedupe_moments(dedupe_episodes(result.memories))[:k]
    return SearchResult(memories, result.retrieval_path, result.error)


def dedupe_episodes(memories: Sequence[Memory]) -> list[Memory]:
    """Keep the first of episodic memories sharing (summary, themes): one arc, once."""
    seen: set[tuple[str, tuple[str, ...]]] = set()
    out = []
    for memory in memories:
        if memory.kind is MemoryKind.EPISODIC:
            key = (memory.summary, memory.themes)
            if key in seen:
                continue
            seen.add(key)
        out.append(memory)
    return out


def dedupe_moments(memories: Sequence[Memory]) -> list[Memory]:
    """Drop a memory whose turns the better-ranked ones already cover (a fact extracted from a
    turn that is itself recalled): one moment once, so the slots go to other moments."""
    covered: set[tuple[str | None, str]] = set()
    out = []
    for memory in memories:
        turns = {(memory.source.session_id, t) for t in memory.source.turns}
        if turns and turns <= covered:
            continue
        covered |= turns
        out.append(memory)
    return out
