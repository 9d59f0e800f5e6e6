"""Graph retrieval: the wiki-link graph around what the user is working on.

The notes the user opened or touched (the note open in the editor most of all) and the notes
edited lately are the context. An ambiguous question — "security and privacy" while reading
about one of two products that each have such a page — means the page the open note links
to. `proximity` walks one step from each context note along its links (and, at half
strength, its backlinks) and gives every note it reaches a nearness in [0, 1]: select lifts
matching notes by it.

- The most recent touch weighs 1, each older one ORDER_DECAY of the one after it, and every
  touch fades with age (config `focus_half_life_hours`): a note opened long ago says little.
- A hub — a map of content, a settings page, linked to and from everything — is reached
  from every direction, so what reaches it counts less: a note's nearness is damped by the
  square root of its degree over the vault's typical degree.
- Recently edited notes are context too, at half weight, unless a sync or bulk import
  changed so many notes at once that mtimes say nothing.

Numpy only: a lexical-only query never pays for importing networkx or scipy.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from ..storage.graph import LINK_CHANGES_KEY, LINK_KIND_WEIGHTS, link_changes_since

if TYPE_CHECKING:
    from ..storage.index_reads import IndexReads

BACKLINK_FACTOR = 0.5  # a note linking to the open one is related, less than one it links to
ORDER_DECAY = 0.25
EDIT_WINDOW_S = 3 * 86400.0
EDIT_FACTOR = 0.5  # an edit says a little less about the question than opening the note
MAX_ACCESS_SEEDS = 10
MAX_EDIT_SEEDS = 5


@dataclass(frozen=True)
class Links:
    """The resolved links a graph is made of, between its rows: per link its source and
    target row and its kind's weight (`LINK_KIND_WEIGHTS`)."""

    source: np.ndarray  # int64 row
    target: np.ndarray  # int64 row
    weight: np.ndarray  # float64

    @classmethod
    def of(cls, rows: Sequence[tuple[int, int, str]], note_ids: np.ndarray) -> Links:
        """The links among `note_ids` (sorted) of `IndexReads.resolved_links` rows."""
        n, count = int(note_ids.shape[0]), len(rows)
        source = np.fromiter((r[0] for r in rows), np.int64, count)
        target = np.fromiter((r[1] for r in rows), np.int64, count)
        weight = np.fromiter((LINK_KIND_WEIGHTS.get(r[2], 1.0) for r in rows), np.float64, count)
        if n == 0:
            return cls(source[:0], target[:0], weight[:0])
        src_row = np.clip(np.searchsorted(note_ids, source), 0, n - 1)
        dst_row = np.clip(np.searchsorted(note_ids, target), 0, n - 1)
        known = (note_ids[src_row] == source) & (note_ids[dst_row] == target)
        return cls(src_row[known], dst_row[known], weight[known])

    def where(self, keep: np.ndarray) -> Links:
        return Links(self.source[keep], self.target[keep], self.weight[keep])

    def plus(self, other: Links) -> Links:
        return Links(
            np.concatenate([self.source, other.source]),
            np.concatenate([self.target, other.target]),
            np.concatenate([self.weight, other.weight]),
        )


@dataclass(frozen=True)
class LinkGraph:
    """Links as an adjacency list sorted by source row: row r's edges are
    `dst[starts[r]:starts[r + 1]]` with `strength` 1 per link (1.5 an embed), 0.5 per
    backlink, summed when notes link both ways. `links`: what it was made of, so that a
    save's links replace the note's old ones without reading the others again."""

    generation: str | None
    note_ids: np.ndarray  # sorted int64; row = index
    dst: np.ndarray  # int64 row per edge
    strength: np.ndarray  # float64 per edge
    starts: np.ndarray  # int64, size + 1
    degree: np.ndarray  # float64 per row: distinct notes linked to or from
    typical_degree: float  # median degree of linked notes
    links: Links
    src: np.ndarray  # int64 row per edge

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


def load_link_graph(reads: IndexReads, generation: str | None) -> LinkGraph:
    note_ids = np.fromiter(reads.note_ids(), dtype=np.int64)
    links = Links.of(reads.resolved_links(), note_ids)
    src, dst, strength = _edges(links, int(note_ids.shape[0]))
    return _graph(generation, note_ids, links, src, dst, strength)


def updated_link_graph(
    graph: LinkGraph, reads: IndexReads, generation: str | None, sources: set[int]
) -> LinkGraph:
    """`graph` with the links of `sources` read again (the set of notes is the same): only
    the edges of the rows those links touch, before or after, are made again."""
    n = graph.size
    if n == 0 or not sources:
        return replace(graph, generation=generation)
    changed = graph.rows(sorted(sources))
    dropped = np.isin(graph.links.source, changed)
    added = Links.of(reads.resolved_links(sorted(sources)), graph.note_ids)
    links = graph.links.where(~dropped).plus(added)
    touched = np.unique(np.concatenate([changed, graph.links.target[dropped], added.target]))
    near = np.isin(links.source, touched) | np.isin(links.target, touched)
    src, dst, strength = _edges(links.where(near), n, only=touched)
    kept = ~np.isin(graph.src, touched)
    kept_key = graph.src[kept] * n + graph.dst[kept]
    key = src * n + dst
    at = np.searchsorted(kept_key, key)
    merged = np.insert(kept_key, at, key)
    strength = np.insert(graph.strength[kept], at, strength)
    return _graph(generation, graph.note_ids, links, merged // n, merged % n, strength)


def _edges(
    links: Links, n: int, only: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each link both ways (the backlink at BACKLINK_FACTOR), summed per pair of rows and
    sorted by (source row, target row); with `only`, the edges from those rows alone."""
    a = np.concatenate([links.source, links.target])
    b = np.concatenate([links.target, links.source])
    w = np.concatenate([links.weight, links.weight * BACKLINK_FACTOR])
    if only is not None:
        mine = np.isin(a, only)
        a, b, w = a[mine], b[mine], w[mine]
    pairs, which = np.unique(a * n + b, return_inverse=True)
    strength = np.bincount(which, weights=w, minlength=len(pairs)).astype(np.float64)
    return pairs // n, pairs % n, strength


def _graph(
    generation: str | None,
    note_ids: np.ndarray,
    links: Links,
    src: np.ndarray,
    dst: np.ndarray,
    strength: np.ndarray,
) -> LinkGraph:
    n = int(note_ids.shape[0])
    counts = np.bincount(src, minlength=n)
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    degree = counts.astype(np.float64)
    linked = degree[degree > 0]
    typical = float(np.median(linked)) if linked.size else 1.0
    return LinkGraph(generation, note_ids, dst, strength, starts, degree, typical, links, src)


class LinkGraphStore:
    """The graph, kept up to date as the index generation moves: by the notes whose links
    the index's log says changed since (`storage.graph.LINK_CHANGES_KEY`), or read whole
    when it cannot say. Keys are `generation` or `generation:scope` (a view that hides
    notes); only a graph of the same scope is brought forward."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: LinkGraph | None = None
        self.loads = 0  # graphs read whole: what the log spares

    def get(self, reads: IndexReads, generation: str | None) -> LinkGraph:
        current = self._current
        if current is not None and current.generation == generation:
            return current
        with self._lock:
            current = self._current
            if current is None or current.generation != generation:
                current = self._current = self._brought_forward(reads, current, generation)
            return current

    def _brought_forward(
        self, reads: IndexReads, current: LinkGraph | None, key: str | None
    ) -> LinkGraph:
        if current is not None and current.generation is not None and key is not None:
            since, _, scope = current.generation.partition(":")
            until, _, new_scope = key.partition(":")
            if scope == new_scope:
                sources = link_changes_since(reads.meta(LINK_CHANGES_KEY), since, until)
                if sources is not None:
                    return updated_link_graph(current, reads, key, sources)
        self.loads += 1
        return load_link_graph(reads, key)


def context_seeds(
    reads: IndexReads, note_count: int, half_life_hours: float, now: float | None = None
) -> dict[int, float]:
    """What the user is working on, as note id -> weight. Notes opened or touched: the most
    recent weighs 1, each older one ORDER_DECAY times the one after it. Notes edited lately,
    ranked the same way among themselves at EDIT_FACTOR, unless a sync or import changed
    so many at once that mtimes say nothing. Everything halves every `half_life_hours`."""
    seeds = focus_seeds(reads, note_count, half_life_hours, now)
    return {note: seed.weight for note, seed in seeds.items()}


@dataclass(frozen=True)
class Seed:
    """One note of the focus: its weight, when it was last opened or edited, and which."""

    weight: float
    at: float
    how: str  # "opened" or "edited"


def focus_seeds(
    reads: IndexReads, note_count: int, half_life_hours: float, now: float | None = None
) -> dict[int, Seed]:
    """`context_seeds` with when and how each note came into the focus."""
    now = time.time() if now is None else now
    half_life_s = half_life_hours * 3600.0
    touched = reads.recent_accesses(MAX_ACCESS_SEEDS)
    cutoff_ns = int((now - EDIT_WINDOW_S) * 1e9)
    too_many = max(MAX_EDIT_SEEDS, int(note_count * 0.1)) + 1  # past both bounds below
    recent = reads.count_edited_since(cutoff_ns, too_many)
    edited = []
    if not (recent > MAX_EDIT_SEEDS and recent > note_count * 0.1):
        edited = [
            (note, mtime_ns / 1e9)
            for note, mtime_ns in reads.edited_since(cutoff_ns, MAX_EDIT_SEEDS)
        ]
    seeds: dict[int, Seed] = {}
    for events, factor, how in ((touched, 1.0, "opened"), (edited, EDIT_FACTOR, "edited")):
        for order, (note, at) in enumerate(events):
            age = max(now - at, 0.0)
            weight = factor * ORDER_DECAY**order * 0.5 ** (age / half_life_s)
            known = seeds.get(note)
            if known is None:
                seeds[note] = Seed(weight, at, how)
            else:
                seeds[note] = Seed(known.weight + weight, max(known.at, at), known.how)
    return seeds


def proximity(graph: LinkGraph, seeds: dict[int, float]) -> dict[int, float]:
    """Each note one link away from the context, with its nearness in [0, 1]: the sum over
    context notes of their weight × the link's strength (capped at 1) × the hub damping,
    capped at 1. A context note is near another context note that links to it."""
    if graph.size == 0 or not seeds:
        return {}
    near: dict[int, float] = {}
    for row in graph.rows(list(seeds)).tolist():
        weight = seeds[int(graph.note_ids[row])]
        lo, hi = int(graph.starts[row]), int(graph.starts[row + 1])
        targets = graph.dst[lo:hi]
        damping = np.minimum(1.0, np.sqrt(graph.typical_degree / graph.degree[targets]))
        values = weight * np.minimum(graph.strength[lo:hi], 1.0) * damping
        for note, value in zip(graph.note_ids[targets].tolist(), values.tolist(), strict=True):
            near[note] = near.get(note, 0.0) + value
    return {note: min(value, 1.0) for note, value in near.items()}


def passage_links(reads: IndexReads, block_ids: Sequence[int]) -> dict[int, set[int]]:
    """The other notes each block links to (wiki and Markdown links that resolve; an embed
    shows its note's text in place, so it points nowhere else): {block id: note ids}."""
    if not block_ids:
        return {}
    out: dict[int, set[int]] = {}
    for block, target in reads.passage_links(block_ids):
        out.setdefault(block, set()).add(target)
    return out
