"""The wiki-link graph of a vault's notes, built from the index's notes and links; and the
log of which notes' links each index generation changed, for graphs kept in memory."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from ..errors import VaultctxError

if TYPE_CHECKING:
    import networkx as nx

# Embedding a note pulls its content in: a stronger tie than mentioning it.
LINK_KIND_WEIGHTS = {"wiki": 1.0, "markdown": 1.0, "embed": 1.5}

LINK_CHANGES_KEY = "link_changes"
"""Index meta: JSON `[[generation, [note id, ...] or null], ...]`, oldest first: the notes
whose links each of the last generations rewrote; null when it changed the set of notes or
resolved every link again. A graph held in memory at generation g is brought to a later one
by reading again the links of the notes named after g (one saved note at 100k notes: a few
links, instead of every link of the vault)."""
LINK_CHANGES_KEPT = 16
_MOST_SOURCES = 2000  # more notes than this in one run: reading every link is no slower


def logged_link_changes(log: str | None, generation: str, sources: Collection[int] | None) -> str:
    """`log` (the meta value) with `generation`'s entry added, the oldest left off."""
    entries = json.loads(log) if log else []
    if sources is not None and len(sources) > _MOST_SOURCES:
        sources = None
    entries.append([generation, None if sources is None else sorted(sources)])
    return json.dumps(entries[-LINK_CHANGES_KEPT:], separators=(",", ":"))


def link_changes_since(log: str | None, since: str, until: str) -> set[int] | None:
    """The notes whose links changed after generation `since` up to `until` (and any later
    entry: reading a note's links again is harmless), or None when the log cannot say:
    it does not reach back to `since`, or an entry changed more than some notes' links."""
    if not log:
        return None
    try:
        entries = [(int(g), sources) for g, sources in json.loads(log)]
        since_n, until_n = int(since), int(until)
    except (ValueError, TypeError):
        return None
    changed: set[int] = set()
    expected = since_n + 1
    for number, sources in entries:
        if number <= since_n:
            continue
        if number != expected or sources is None:
            return None  # a generation the log missed, or one that changed every link
        changed.update(int(s) for s in sources)
        expected += 1
    return changed if expected > until_n else None


@dataclass(frozen=True, slots=True)
class Link:
    """Every link from one note to another, as one edge: `weight` sums them (an embed counts
    1.5, other links 1), `kinds` names them, `precise` says one named a heading or block."""

    source: str
    target: str
    weight: float
    kinds: frozenset[str]
    precise: bool


class LinkGraph:
    """The notes (path → title) and one `Link` per linked pair, in plain dicts: building one
    imports nothing and answers neighbours in O(1). `to_networkx()` hands it to networkx for
    graph algorithms, where networkx is installed."""

    __slots__ = ("_into", "_links", "_out", "titles")

    def __init__(self, titles: Mapping[str, str], links: Iterable[Link]) -> None:
        self.titles: Mapping[str, str] = MappingProxyType(dict(titles))
        self._links = {(link.source, link.target): link for link in links}
        self._out: dict[str, list[str]] = {}
        self._into: dict[str, list[str]] = {}
        for source, target in self._links:
            self._out.setdefault(source, []).append(target)
            self._into.setdefault(target, []).append(source)

    def __contains__(self, path: object) -> bool:
        return path in self.titles

    def __iter__(self) -> Iterator[str]:
        return iter(self.titles)

    def __len__(self) -> int:
        return len(self.titles)

    def successors(self, path: str) -> tuple[str, ...]:
        """The notes `path` links to."""
        return tuple(self._out.get(path, ()))

    def predecessors(self, path: str) -> tuple[str, ...]:
        """The notes that link to `path`."""
        return tuple(self._into.get(path, ()))

    def link(self, source: str, target: str) -> Link | None:
        """The edge from `source` to `target`, or None when no link joins them that way."""
        return self._links.get((source, target))

    def links(self) -> Iterator[Link]:
        """Every edge, in the order the index lists the links."""
        return iter(self._links.values())

    def to_networkx(self) -> nx.DiGraph:
        """The same graph as a networkx `DiGraph` (nodes with `title`; edges with `weight`,
        `kinds`, `precise`). networkx is no dependency of vaultctx: install it for this."""
        try:
            import networkx as nx
        except ImportError:
            raise VaultctxError(
                "LinkGraph.to_networkx() needs networkx: pip install networkx"
            ) from None
        graph = nx.DiGraph()
        graph.add_nodes_from((path, {"title": title}) for path, title in self.titles.items())
        graph.add_edges_from(
            (e.source, e.target, {"weight": e.weight, "kinds": set(e.kinds), "precise": e.precise})
            for e in self._links.values()
        )
        return graph


def build_graph(
    notes: Iterable[tuple[str, str]], links: Iterable[tuple[str, str, str, bool]]
) -> LinkGraph:
    """Every note and one edge per linked pair, from `IndexReads.link_rows`: every note, and
    every link between two notes."""
    edges: dict[tuple[str, str], tuple[float, set[str], bool]] = {}
    for source, target, kind, precise in links:
        weight, kinds, was_precise = edges.get((source, target), (0.0, set(), False))
        kinds.add(kind)
        edges[source, target] = (
            weight + LINK_KIND_WEIGHTS.get(kind, 1.0),
            kinds,
            was_precise or bool(precise),
        )
    return LinkGraph(
        dict(notes),
        (Link(s, t, w, frozenset(k), p) for (s, t), (w, k, p) in edges.items()),
    )
