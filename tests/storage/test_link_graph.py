"""The link graph is plain dicts: what networkx would build from the same rows, without
networkx in the install."""

from __future__ import annotations

import sys

import networkx as nx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from vaultctx.errors import VaultctxError
from vaultctx.storage.graph import LINK_KIND_WEIGHTS, build_graph

paths = st.sampled_from(["a.md", "b.md", "c/d.md", "é.md", "e f.md"])
link_rows = st.lists(
    st.tuples(paths, paths, st.sampled_from([*LINK_KIND_WEIGHTS, "other"]), st.booleans()).filter(
        lambda row: row[0] != row[1]  # link_rows leaves self-links out
    ),
    max_size=30,
)
NOTES = [("a.md", "A"), ("b.md", "B"), ("c/d.md", "D"), ("é.md", ""), ("e f.md", "E F")]


def networkx_graph(notes, links) -> nx.DiGraph:
    """The graph as networkx builds it: one edge a pair, weights summed, kinds joined."""
    graph = nx.DiGraph()
    for path, title in notes:
        graph.add_node(path, title=title)
    for source, target, kind, precise in links:
        data = graph.get_edge_data(source, target)
        if data is None:
            graph.add_edge(source, target, weight=0.0, kinds=set(), precise=False)
            data = graph[source][target]
        data["weight"] += LINK_KIND_WEIGHTS.get(kind, 1.0)
        data["kinds"].add(kind)
        data["precise"] |= precise
    return graph


@given(link_rows)
def test_the_graph_holds_what_networkx_would_build_from_the_same_rows(links):
    graph = build_graph(NOTES, links)
    expected = networkx_graph(NOTES, links)

    assert dict(graph.titles) == dict(expected.nodes(data="title"))
    assert len(graph) == expected.number_of_nodes()
    for path in graph:
        assert set(graph.successors(path)) == set(expected.successors(path))
        assert set(graph.predecessors(path)) == set(expected.predecessors(path))
    for source, target, data in expected.edges(data=True):
        link = graph.link(source, target)
        assert link is not None
        assert (link.weight, link.kinds, link.precise) == (
            pytest.approx(data["weight"]),
            data["kinds"],
            data["precise"],
        )
    assert sum(1 for _ in graph.links()) == expected.number_of_edges()
    mirrored = graph.to_networkx()
    assert nx.utils.graphs_equal(mirrored, expected)


def test_a_note_without_links_has_no_neighbours_and_an_unknown_path_is_not_in_it():
    graph = build_graph(NOTES, [("a.md", "b.md", "wiki", False)])
    assert graph.successors("c/d.md") == () and graph.predecessors("c/d.md") == ()
    assert "nowhere.md" not in graph and graph.successors("nowhere.md") == ()
    assert graph.link("b.md", "a.md") is None, "a link has a direction"


def test_to_networkx_without_networkx_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "networkx", None)  # import networkx now fails
    with pytest.raises(VaultctxError, match="pip install networkx"):
        build_graph(NOTES, []).to_networkx()
