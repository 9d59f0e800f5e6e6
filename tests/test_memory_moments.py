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


def test_an_arc_neither_covers_nor_widens_the_turns_it_names():
    arc = memory("arc", "D1:1", "D1:2", "D1:3", arc=True)
    turn = memory("turn", "D1:2")
    exchange = memory("exchange", "D1:1", "D1:2")
    assert [m.id for m in dedupe_moments([turn, arc, exchange], k=3)] == ["exchange", "arc"]
    assert [m.id for m in dedupe_moments([arc, turn], k=3)] == ["arc", "turn"]


def test_memories_without_turns_are_never_merged():
    plain = [memory("a"), memory("b"), memory("exchange", "D1:1", "D1:2")]
    assert [m.id for m in dedupe_moments(plain, k=3)] == ["a", "b", "exchange"]


def first_k_distinct(memories: list[Memory], k: int) -> list[Memory]:
    """The rule without widening: the first k memories that hold a turn not yet held."""
    out: list[Memory] = []
    for m in memories:
        turns = set(m.source.turns)
        if len(out) < k and not (turns and turns <= held(out)):
            out.append(m)
    return out


turn_sets = st.frozensets(st.sampled_from([f"D1:{i}" for i in range(1, 7)]), max_size=3)
ranked_memories = st.lists(st.tuples(turn_sets, st.booleans()), max_size=12).map(
    lambda specs: [
        memory(f"m{i}", *sorted(turns), score=1.0 - i / 20, arc=is_arc and bool(turns))
        for i, (turns, is_arc) in enumerate(specs)
    ]
)


@given(ranked_memories, st.integers(min_value=1, max_value=8))
def test_the_top_k_holds_every_turn_the_plain_top_k_holds_and_repeats_none(memories, k):
    top = dedupe_moments(memories, k)
    assert len(top) <= k
    assert len({m.id for m in top}) == len(top)
    assert held(top) >= held(first_k_distinct(memories, k))
    seen: set[str] = set()
    for m in top:  # no memory only repeats turns an earlier one already holds
        assert not (m.source.turns and set(m.source.turns) <= seen)
        if not (m.key or "").startswith("arc:"):
            seen |= set(m.source.turns)
    assert [m.score for m in top] == sorted((m.score for m in top), reverse=True)
