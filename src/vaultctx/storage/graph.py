"""The wiki-link graph as a networkx DiGraph, built from the links table."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # networkx costs ~0.2 s to import: only callers of build_graph pay it
    import networkx as nx

# Embedding a note pulls its content in: a stronger tie than mentioning it.
LINK_KIND_WEIGHTS = {"wiki": 1.0, "markdown": 1.0, "embed": 1.5}


def build_graph(conn: sqlite3.Connection) -> nx.DiGraph:
    """Nodes are note paths (with `title`); edges carry `weight` and `kinds`.

    Dangling links and self-links are left out: they lead nowhere else.
    """
    import networkx as nx

    graph = nx.DiGraph()
    for path, title in conn.execute("SELECT path, title FROM notes"):
        graph.add_node(path, title=title)
    rows = conn.execute(
        "SELECT s.path, t.path, l.kind, l.heading IS NOT NULL OR l.block_ref IS NOT NULL"
        " FROM links l JOIN notes s ON s.id = l.source_id JOIN notes t ON t.id = l.target_id"
        " WHERE l.source_id != l.target_id"
    )
    for source, target, kind, precise in rows:
        weight = LINK_KIND_WEIGHTS.get(kind, 1.0)
        if graph.has_edge(source, target):
            data = graph[source][target]
            data["weight"] += weight
            data["kinds"].add(kind)
            data["precise"] |= bool(precise)
        else:
            graph.add_edge(source, target, weight=weight, kinds={kind}, precise=bool(precise))
    return graph
