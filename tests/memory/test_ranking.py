"""The top k memories hold each moment of a conversation once, the fullest way they can."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from vaultctx.memory import Memory, MemoryKind, Tier
from vaultctx.memory.models import MemorySource
from vaultctx.memory.ranking import dedupe_moments


def memory(name: str, *turns: str, score: float = 1.0, arc: bool = False) -> Memory:
    return Memory(
        id=name,
        tier=Tier.CHANNEL,
        scope="c",
        kind=MemoryKind.EPISODIC,
        text=name,
        created_at=0.0,
        updated_at=0.0,
        last_accessed=0.0,
        source=MemorySource(session_id="s1", turns=turns),
        key=f"arc:s1:{name}" if arc else None,
        score=score,
    )


def held(memories: list[Memory]) -> set[str]:
    return {t for m in memories if not (m.key or "").startswith("arc:") for t in m.source.turns}


def test_a_turn_gives_its_place_and_score_to_the_exchange_that_holds_it():
    turn = memory("turn", "D1:2", score=0.9)
    other = memory("other", "D4:1", score=0.8)
    exchange = memory("exchange", "D1:1", "D1:2", score=0.7)
    later = memory("later", "D7:3", score=0.6)
    top = dedupe_moments([turn, other, exchange, later], k=3)
    assert [m.id for m in top] == ["exchange", "other", "later"]
    assert top[0].score == 0.9  # the place it took, so the list stays in order


def test_a_wider_memory_beyond_the_top_k_does_not_replace_one_in_it():
    turn = memory("turn", "D1:2")
    other = memory("other", "D4:1")
    exchange = memory("exchange", "D1:1", "D1:2")
    assert [m.id for m in dedupe_moments([turn, other, exchange], k=2)] == ["turn", "other"]


def test_a_fact_from_a_turn_already_recalled_takes_no_slot():
    turn = memory("turn", "D1:2")
    fact = memory("fact", "D1:2")
    later = memory("later", "D7:3")
    assert [m.id for m in dedupe_moments([turn, fact, later], k=2)] == ["turn", "later"]


def test_an_exchange_repeating_most_of_one_already_recalled_takes_no_slot():
    first = memory("first", "D1:1", "D1:2", "D1:3")
    overlapping = memory("overlapping", "D1:2", "D1:3", "D1:4")  # two of its three turns held
    half_new = memory("half new", "D1:3", "D1:5")
    later = memory("later", "D7:3")
    top = dedupe_moments([first, overlapping, half_new, later], k=3)
    assert [m.id for m in top] == ["first", "half new", "later"]


def test_an_arc_neither_covers_nor_widens_the_turns_it_names():
    arc = memory("arc", "D1:1", "D1:2", "D1:3", "D1:4", "D1:5", arc=True)
    turn = memory("turn", "D1:2")
    exchange = memory("exchange", "D1:1", "D1:2")
    assert [m.id for m in dedupe_moments([turn, arc, exchange], k=3)] == ["exchange", "arc"]
    assert [m.id for m in dedupe_moments([arc, turn], k=3)] == ["arc", "turn"]


def test_memories_without_turns_are_never_merged():
    plain = [memory("a"), memory("b"), memory("exchange", "D1:1", "D1:2")]
    assert [m.id for m in dedupe_moments(plain, k=3)] == ["a", "b", "exchange"]


turn_sets = st.frozensets(st.sampled_from([f"D1:{i}" for i in range(1, 7)]), max_size=3)
ranked_memories = st.lists(st.tuples(turn_sets, st.booleans()), max_size=12).map(
    lambda specs: [
        memory(f"m{i}", *sorted(turns), score=1.0 - i / 20, arc=is_arc and bool(turns))
        for i, (turns, is_arc) in enumerate(specs)
    ]
)


@given(ranked_memories, st.integers(min_value=1, max_value=8))
def test_the_top_k_repeats_little_and_leaves_out_only_what_it_repeats(memories, k):
    top = dedupe_moments(memories, k)
    assert len(top) <= k
    assert len({m.id for m in top}) == len(top)
    seen: set[str] = set()
    for m in top:  # no memory mostly repeats turns an earlier one already holds
        assert 2 * len(set(m.source.turns) & seen) <= len(m.source.turns)
        if not (m.key or "").startswith("arc:"):
            seen |= set(m.source.turns)
    if len(top) < k:  # room to spare: whatever was left out repeats what the top k holds
        for m in memories:
            if m.id not in {t.id for t in top}:
                assert 2 * len(set(m.source.turns) & held(top)) > len(m.source.turns)
    assert [m.score for m in top] == sorted((m.score for m in top), reverse=True)
