"""Weighted reciprocal rank fusion: order, ties and provenance."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from vaultctx.search.fusion import Hit, rrf_fuse, rrf_order

RETRIEVERS = ["lexical", "vector", "graph", "memory"]
keys = st.sampled_from([f"block:{i}" for i in range(12)])
ranked_lists = st.dictionaries(
    st.sampled_from(RETRIEVERS),
    st.lists(keys, max_size=10),
    max_size=4,
)
weights = st.dictionaries(
    st.sampled_from(RETRIEVERS),
    st.floats(min_value=0.0, max_value=3.0),
)


def as_hits(lists: dict[str, list[str]]) -> dict[str, list[Hit]]:
    return {
        name: [Hit(key, 1.0 / (i + 1)) for i, key in enumerate(ks)] for name, ks in lists.items()
    }


def test_a_key_found_by_two_retrievers_beats_one_found_by_either_alone():
    fused = rrf_fuse(
        {
            "lexical": [Hit("block:1", 9.0), Hit("block:2", 8.0)],
            "vector": [Hit("block:3", 0.9), Hit("block:2", 0.8)],
        }
    )
    assert fused[0].key == "block:2"
    assert set(fused[0].sources) == {"lexical", "vector"}
    assert fused[0].sources["vector"].rank == 2
    assert fused[0].sources["lexical"].score == 8.0


def test_weights_scale_a_retrievers_say():
    hits = {"lexical": [Hit("block:1", 1.0)], "vector": [Hit("block:2", 1.0)]}
    assert rrf_fuse(hits, {"lexical": 2.0, "vector": 1.0})[0].key == "block:1"
    assert rrf_fuse(hits, {"lexical": 1.0, "vector": 2.0})[0].key == "block:2"


def test_a_duplicate_within_one_list_counts_once_at_its_best_rank():
    fused = rrf_fuse({"lexical": [Hit("block:1", 3.0), Hit("block:1", 2.0), Hit("block:2", 1.0)]})
    assert [f.key for f in fused] == ["block:1", "block:2"]
    assert fused[0].sources["lexical"].rank == 1
    assert fused[1].sources["lexical"].rank == 2


@given(ranked_lists, weights)
def test_fusion_is_deterministic_whatever_the_input_order(lists, w):
    hits = as_hits(lists)
    forward = rrf_fuse(hits, w)
    backward = rrf_fuse(dict(reversed(list(hits.items()))), w)
    assert [(f.key, f.score) for f in forward] == [(f.key, f.score) for f in backward]


@given(ranked_lists, weights)
def test_provenance_is_complete_and_true(lists, w):
    fused = rrf_fuse(as_hits(lists), w)
    assert {f.key for f in fused} == {k for ks in lists.values() for k in ks}
    for f in fused:
        for name, source in f.sources.items():
            deduped = list(dict.fromkeys(lists[name]))
            assert deduped[source.rank - 1] == f.key
        assert set(f.sources) == {name for name, ks in lists.items() if f.key in ks}


@st.composite
def lists_and_a_retriever_left_out(draw: st.DrawFn) -> tuple[dict[str, list[str]], str]:
    """Non-empty ranked lists, and a retriever that has none (drawn, not filtered for)."""
    extra = draw(st.sampled_from(RETRIEVERS))
    others = st.sampled_from([name for name in RETRIEVERS if name != extra])
    lists = draw(st.dictionaries(others, st.lists(keys, min_size=1, max_size=10), min_size=1))
    return lists, extra


@given(lists_and_a_retriever_left_out(), weights)
def test_being_found_by_one_more_retriever_never_lowers_a_candidate(case, w):
    lists, extra = case
    target = min(k for ks in lists.values() for k in ks)
    before = [f.key for f in rrf_fuse(as_hits(lists), w)]
    after = [f.key for f in rrf_fuse(as_hits({**lists, extra: [target]}), w)]
    assert after.index(target) <= before.index(target)


def test_ties_break_by_key_so_order_never_depends_on_chance():
    fused = rrf_fuse({"lexical": [Hit("block:9", 1.0)], "vector": [Hit("block:1", 1.0)]})
    assert [f.key for f in fused] == ["block:1", "block:9"]


@given(ranked_lists)
def test_rrf_order_is_rrf_fuse_with_equal_weights(lists):
    hits = as_hits(lists)
    assert rrf_order(hits) == [f.key for f in rrf_fuse(hits)]
