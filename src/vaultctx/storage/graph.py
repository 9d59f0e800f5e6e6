"""The wiki-link graph as a networkx DiGraph, built from the index's notes and links; and
the log of which notes' links each index generation changed, for graphs kept in memory."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # networkx costs ~0.2 s to import: only callers of build_graph pay it
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
