"""Graph retrieval: personalized PageRank over the wiki-link graph.

Seeds are what the user is working on (notes touched or opened recently, notes edited
recently) and the query's best lexical and vector hits. The walk surfaces notes linked to
them — even ones that share no word with the query. Context seeds are not returned
themselves: they steer the walk but say nothing about the query.

The walk is numpy only (a bincount per iteration over the edge list), so a lexical-only
query never pays for importing scipy or networkx.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import dataclass

import numpy as np

from ..workspace.graph import LINK_KIND_WEIGHTS

BACKLINK_FACTOR = 0.5  # a note linking to a seed is related, a little less than one it links to
RESTART = 0.25  # teleport probability: short walks, stay near the seeds
# Each step keeps 75 % of the previous error: after 10 steps the ranking near the seeds, the
# only part select uses, no longer moves (same top 20, same order, as after 15 steps on the
# 10k-note synthetic vault), and each step costs ~0.2 ms at 60k links.
MAX_ITERATIONS = 10
TOLERANCE = 1e-4
ACCESS_HALF_LIFE_S = 2 * 86400.0
EDIT_WINDOW_S = 3 * 86400.0
MAX_ACCESS_SEEDS = 10
MAX_EDIT_SEEDS = 5
MAX_HIT_SEEDS = 5
CONTEXT_SHARE = 0.4  # share of the walk's restart mass on what the user works on


@dataclass(frozen=True)
class LinkGraph:
    generation: str | None
    note_ids: np.ndarray  # sorted int64
    src: np.ndarray  # int64 row indices
    dst: np.ndarray
    weight: np.ndarray  # float64, normalized per source row
    dangling: np.ndarray  # bool per row: no outgoing edges

    @property
    def size(self) -> int:
        return int(self.note_ids.shape[0])

    def rows(self, note_ids: list[int]) -> np.ndarray:
        """Row indices of the given note ids that are in the graph."""
        if self.size == 0:
            return np.empty(0, dtype=np.int64)
        ids = np.asarray(note_ids, dtype=np.int64)
        idx = np.clip(np.searchsorted(self.note_ids, ids), 0, self.size - 1)
        return idx[self.note_ids[idx] == ids]

    def personalized_pagerank(self, seeds: dict[int, float]) -> np.ndarray:
        """Stationary distribution of a walk that restarts at `seeds` (row -> weight)."""
        n = self.size
        p = np.zeros(n)
        for row, w in seeds.items():
            p[row] += w
        total = p.sum()
        if total <= 0:
            return p
        p /= total
        r = p.copy()
        for _ in range(MAX_ITERATIONS):
            spread = np.bincount(self.dst, weights=r[self.src] * self.weight, minlength=n)
            leaked = r[self.dangling].sum()
            nxt = RESTART * p + (1 - RESTART) * (spread + leaked * p)
            if np.abs(nxt - r).sum() < TOLERANCE:
                r = nxt
                break
            r = nxt
        return r


def load_link_graph(conn: sqlite3.Connection, generation: str | None) -> LinkGraph:
    note_ids = np.fromiter(
        (r[0] for r in conn.execute("SELECT id FROM notes ORDER BY id")), dtype=np.int64
    )
    weights: dict[tuple[int, int], float] = {}
    for source, target, kind in conn.execute(
        "SELECT source_id, target_id, kind FROM links"
        " WHERE target_id IS NOT NULL AND target_id != source_id"
    ):
        w = LINK_KIND_WEIGHTS.get(kind, 1.0)
        weights[(source, target)] = weights.get((source, target), 0.0) + w
        weights[(target, source)] = weights.get((target, source), 0.0) + w * BACKLINK_FACTOR
    n = len(note_ids)
    if not weights:
        empty = np.empty(0, dtype=np.int64)
        return LinkGraph(generation, note_ids, empty, empty, np.empty(0), np.ones(n, bool))
    pairs = np.array(list(weights), dtype=np.int64)
    src = np.searchsorted(note_ids, pairs[:, 0])
    dst = np.searchsorted(note_ids, pairs[:, 1])
    w = np.fromiter(weights.values(), dtype=np.float64, count=len(weights))
    out = np.bincount(src, weights=w, minlength=n)
    return LinkGraph(generation, note_ids, src, dst, w / out[src], out == 0)


class LinkGraphStore:
    """The walkable graph, rebuilt only when the index generation moves."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: LinkGraph | None = None

    def get(self, conn: sqlite3.Connection, generation: str | None) -> LinkGraph:
        current = self._current
        if current is not None and current.generation == generation:
            return current
        with self._lock:
            if self._current is None or self._current.generation != generation:
                self._current = load_link_graph(conn, generation)
            return self._current


def context_seeds(
    conn: sqlite3.Connection, note_count: int, now: float | None = None
) -> dict[int, float]:
    """Notes the user is working on: recently touched/opened, recently edited (note id -> w)."""
    now = time.time() if now is None else now
    seeds: dict[int, float] = {}
    for note_id, at in conn.execute(
        "SELECT note_id, max(at) AS last FROM accesses GROUP BY note_id ORDER BY last DESC LIMIT ?",
        (MAX_ACCESS_SEEDS,),
    ):
        seeds[note_id] = seeds.get(note_id, 0.0) + 0.5 ** (max(now - at, 0) / ACCESS_HALF_LIFE_S)
    cutoff_ns = int((now - EDIT_WINDOW_S) * 1e9)
    recent = conn.execute("SELECT count(*) FROM notes WHERE mtime_ns >= ?", (cutoff_ns,))
    recent = recent.fetchone()[0]
    if recent > MAX_EDIT_SEEDS and recent > note_count * 0.1:
        # A fresh clone, sync or bulk import touched everything: mtimes say nothing.
        return seeds
    for note_id, mtime_ns in conn.execute(
        "SELECT id, mtime_ns FROM notes WHERE mtime_ns >= ? ORDER BY mtime_ns DESC LIMIT ?",
        (cutoff_ns, MAX_EDIT_SEEDS),
    ):
        age = max(now - mtime_ns / 1e9, 0)
        seeds[note_id] = seeds.get(note_id, 0.0) + 0.5 * 0.5 ** (age / ACCESS_HALF_LIFE_S)
    return seeds


def walk(
    graph: LinkGraph,
    context: dict[int, float],
    hit_notes: list[int],
    limit: int,
    allowed: set[int] | None = None,
) -> tuple[list[tuple[int, float]], dict]:
    """Rank notes near the seeds; returns ([(note id, score)], explain)."""
    hits = {note: 1.0 / (rank + 1) for rank, note in enumerate(hit_notes[:MAX_HIT_SEEDS])}
    explain = {
        "context_seeds": sorted(context, key=lambda n: -context[n]),
        "hit_seeds": list(hits),
    }
    if graph.size == 0 or graph.src.size == 0 or not (context or hits):
        return [], explain
    seeds: dict[int, float] = {}
    parts = [
        (hits, 1.0 - CONTEXT_SHARE if context else 1.0),
        (context, CONTEXT_SHARE if hits else 1.0),
    ]
    for weights, share in parts:
        total = sum(weights.values())
        if total <= 0:
            continue
        rows = graph.rows(list(weights))
        lookup = dict(zip(graph.note_ids[rows].tolist(), rows.tolist(), strict=True))
        for note, w in weights.items():
            if note in lookup:
                seeds[lookup[note]] = seeds.get(lookup[note], 0.0) + share * w / total
    if not seeds:
        return [], explain
    scores = graph.personalized_pagerank(seeds)
    # What the user works on steers the walk but is not itself an answer to the query;
    # the query's own best hits stay in, ranked by the walk like everything else.
    context_only = graph.rows([note for note in context if note not in hits])
    scores[context_only] = 0.0
    order = np.argsort(-scores, kind="stable")
    results: list[tuple[int, float]] = []
    for row in order:
        score = float(scores[row])
        if score <= 1e-9:
            break
        note = int(graph.note_ids[row])
        if allowed is not None and note not in allowed:
            continue
        results.append((note, score))
        if len(results) >= limit:
            break
    return results, explain
