"""The wiki-link graph as a networkx DiGraph, built from the index's notes and links."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # networkx costs ~0.2 s to import: only callers of build_graph pay it
    import networkx as nx

# Embedding a note pulls its content in: a stronger tie than mentioning it.
LINK_KIND_WEIGHTS = {"wiki": 1.0, "markdown": 1.0, "embed": 1.5}


def build_graph(
    notes: Iterable[tuple[str, str]], links: Iterable[tuple[str, str, str, bool]]
) -> nx.DiGraph:
    """Nodes are note paths (with `title`); edges carry `weight` and `kinds`. From
    `IndexReads.link_rows`: every note, and every link between two notes.
    """
    import networkx as nx

    graph = nx.DiGraph()
    for path, title in notes:
        graph.add_node(path, title=title)
    for source, target, kind, precise in links:
        weight = LINK_KIND_WEIGHTS.get(kind, 1.0)
        if graph.has_edge(source, target):
            data = graph[source][target]
            data["weight"] += weight
            data["kinds"].add(kind)
            data["precise"] |= bool(precise)
        else:
            graph.add_edge(source, target, weight=weight, kinds={kind}, precise=bool(precise))
    return graph
