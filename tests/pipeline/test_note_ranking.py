"""Note-aware ranking: block lists rolled up to notes, scores fused, context lifts, and the
blocks of the best notes ordered so that the first candidates span notes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from vaultctx.pipeline.note_ranking import (
    POINTER_SHARE,
    best_passages,
    block_order,
    cosine_spread,
    follow_pointers,
    fuse_scores,
    length_corrected,
    lift,
    roll_up,
)
from vaultctx.search.fusion import Fused, Hit

NAMES = ["lexical", "vector", "memory"]
note_keys = st.sampled_from([f"note:{i}" for i in range(10)])
scored_lists = st.dictionaries(
    st.sampled_from(NAMES),
    st.lists(st.tuples(note_keys, st.floats(0.0, 50.0)), max_size=10),
    max_size=3,
)


def hits_of(lists: dict[str, list[tuple[str, float]]]) -> dict[str, list[Hit]]:
    """Each list best first, as retrievers return them."""
    return {
        name: [Hit(key, score) for key, score in sorted(items, key=lambda i: -i[1])]
        for name, items in lists.items()
    }


def test_a_long_note_earns_nothing_for_its_many_matching_blocks():
    owners = {f"block:{i}": 1 for i in range(1, 6)} | {"block:9": 2}
    hits = [Hit("block:9", 5.0)] + [Hit(f"block:{i}", 4.0) for i in range(1, 6)]
    assert roll_up(hits, owners) == [Hit("note:2", 5.0), Hit("note:1", 4.0)]


def test_scores_not_ranks_decide_how_far_apart_notes_are():
    fused = fuse_scores(
        {
            "lexical": [Hit("note:1", 10.0), Hit("note:2", 9.8), Hit("note:3", 2.0)],
            "vector": [Hit("note:1", 0.8), Hit("note:2", 0.79), Hit("note:3", 0.3)],
        },
        {"lexical": 1.0, "vector": 2.0},
    )
    scores = {f.key: f.score for f in fused}
    assert scores["note:1"] == 1.0
    assert scores["note:1"] - scores["note:2"] < 0.02 < scores["note:2"] - scores["note:3"]


def test_a_known_cosine_fills_in_for_a_note_the_vector_list_cut_off():
    lists = {"lexical": [Hit("note:7", 3.0)], "vector": [Hit("note:1", 0.9)]}
    without = {f.key: f.score for f in fuse_scores(lists, {})}
    known = {f.key: f.score for f in fuse_scores(lists, {}, known={"vector": {"note:7": 0.45}})}
    assert known["note:7"] == without["note:7"] + 0.5 * 0.45 / 0.9


def test_the_context_lifts_a_near_tie_but_not_a_clearly_better_match():
    fused = fuse_scores(
        {"lexical": [Hit("note:1", 10.0), Hit("note:2", 9.5), Hit("note:3", 3.0)]}, {}
    )
    lifted = [r.key for r in lift(fused, {"note:2": 1.0, "note:3": 1.0}, 0.5)]
    assert lifted == ["note:2", "note:1", "note:3"]


@given(scored_lists, st.dictionaries(st.sampled_from(NAMES), st.floats(0.0, 3.0)))
def test_fused_scores_are_a_weighted_mean_in_zero_one_and_deterministic(lists, weights):
    hits = hits_of(lists)
    fused = fuse_scores(hits, weights, by_rank={"memory"})
    assert fused == fuse_scores(dict(reversed(list(hits.items()))), weights, by_rank={"memory"})
    assert all(-1e-9 <= f.score <= 1.0 + 1e-9 for f in fused)
    assert [f.score for f in fused] == sorted((f.score for f in fused), reverse=True)
    listed = {hit.key for found in hits.values() for hit in found}
    assert {f.key for f in fused} == listed
    for f in fused:
        assert set(f.sources) == {
            name for name, found in hits.items() if f.key in {h.key for h in found}
        }


@given(
    st.lists(st.floats(0.01, 1.0), min_size=1, max_size=6),
    st.lists(st.integers(1, 3), min_size=6, max_size=6),
)
def test_each_further_block_of_a_note_counts_half(note_scores, blocks_per_note):
    from vaultctx.pipeline.note_ranking import RankedNote

    notes = [
        RankedNote(f"note:{i}", s, {}) for i, s in enumerate(sorted(note_scores, reverse=True))
    ]
    blocks = {
        n.key: [f"block:{i}{j}" for j in range(blocks_per_note[i])] for i, n in enumerate(notes)
    }
    ordered = block_order(notes, blocks)
    assert len(ordered) == sum(len(b) for b in blocks.values())
    first_seen = []
    for key, score, note in ordered:
        position = blocks[note.key].index(key)
        assert score == note.score * 0.5**position
        if note.key not in first_seen:
            first_seen.append(note.key)
    assert first_seen == [n.key for n in notes]  # notes keep their order


@given(
    st.lists(st.tuples(st.floats(-1.0, 1.0), st.integers(1, 500)), min_size=1, max_size=20),
    st.floats(0.0, 0.5),
)
def test_length_correction_spares_one_block_notes_and_never_rewards_length(notes, spread):
    best = np.array([b for b, _ in notes], dtype=np.float32)
    blocks = np.array([n for _, n in notes], dtype=np.int64)
    corrected = length_corrected(best, blocks, spread)
    single = blocks == 1
    np.testing.assert_allclose(corrected[single], best[single])
    assert (corrected <= best + 1e-6).all()
    # Of two notes with the same best block, the longer one never ranks above the shorter.
    for i in range(len(notes)):
        for j in range(len(notes)):
            if best[i] == best[j] and blocks[i] > blocks[j]:
                assert corrected[i] <= corrected[j]


def test_the_spread_is_taken_over_finite_scores_only():
    scores = np.array([0.1, 0.3, -np.inf, 0.5, -np.inf], dtype=np.float32)
    assert cosine_spread(scores) == pytest.approx(np.std([0.1, 0.3, 0.5]), rel=1e-6)
    assert cosine_spread(np.array([-np.inf, 0.2], dtype=np.float32)) == 0.0


def ranked(*scores: float) -> list[Fused]:
    """note:0, note:1, … with these fused scores, best first."""
    return [Fused(f"note:{i}", score, {}) for i, score in enumerate(scores)]


def test_a_long_note_whose_best_passage_links_to_a_matching_short_note_yields_to_it():
    fused = ranked(1.0, 0.9, 0.85)
    links = {"note:0": {"note:2"}}  # the settings page's "Fold heading" line links to Folding
    order, traded = follow_pointers(fused, links, {"note:0": 40, "note:1": 3, "note:2": 4})
    assert [(f.key, f.score) for f in order] == [("note:2", 1.0), ("note:1", 0.9), ("note:0", 0.85)]
    assert traded == [("note:0", "note:2")]


def test_a_pointer_moves_nothing_to_a_weak_match_a_longer_note_or_a_note_above_it():
    fused = ranked(1.0, 0.9, 0.5)
    weak = follow_pointers(fused, {"note:0": {"note:2"}}, {"note:0": 40, "note:2": 1})
    longer = follow_pointers(fused, {"note:0": {"note:1"}}, {"note:0": 4, "note:1": 40})
    above = follow_pointers(fused, {"note:1": {"note:0"}}, {"note:0": 1, "note:1": 40})
    for order, traded in (weak, longer, above):
        assert order == fused and traded == []


def test_the_best_passage_is_a_notes_first_lexical_hit_then_its_first_vector_hit():
    owners = {"block:1": 7, "block:2": 7, "block:3": 8, "block:4": 8}
    lexical = [Hit("block:2", 3.0), Hit("block:1", 2.0)]
    vector = [Hit("block:1", 0.9), Hit("block:4", 0.8), Hit("block:3", 0.7)]
    assert best_passages([lexical, vector], owners) == {7: 2, 8: 4}


@given(
    st.lists(st.floats(0.0, 1.0), min_size=1, max_size=8),
    st.dictionaries(st.integers(0, 7), st.sets(st.integers(0, 7), max_size=3), max_size=8),
    st.lists(st.integers(1, 30), min_size=8, max_size=8),
)
def test_pointers_only_trade_places_once_each_and_keep_the_order_sorted(scores, links, sizes):
    fused = ranked(*sorted(scores, reverse=True))
    keys = {f.key for f in fused}
    links_ = {f"note:{a}": {f"note:{b}" for b in bs} for a, bs in links.items()}
    blocks = {f"note:{i}": n for i, n in enumerate(sizes)}
    order, traded = follow_pointers(fused, links_, blocks)
    assert sorted(f.key for f in order) == sorted(keys)
    assert [f.score for f in order] == [f.score for f in fused]  # the same places, re-dealt
    moved = [key for pair in traded for key in pair]
    assert len(moved) == len(set(moved))
    before = {f.key: f.score for f in fused}
    after = {f.key: f.score for f in order}
    for pointing, target in traded:
        assert target in links_[pointing] and blocks[target] < blocks[pointing]
        assert before[target] >= POINTER_SHARE * before[pointing]
        assert after[target] == before[pointing] and after[pointing] == before[target]
    for key in keys - set(moved):
        assert after[key] == before[key]
