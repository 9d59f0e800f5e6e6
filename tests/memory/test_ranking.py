"""Memory ranking, the one ranking every door uses: relevance decides and importance and
recency only reorder near-ties (recency decaying by tier), token recall and embeddings fused
(token recall alone when the model fails), a time the question names, episodes deduped, and
the top k holding each moment of a conversation once, the fullest way they can."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_helpers import HashEmbedder, add_turns, indexed_vault
from vaultctx.memory import Memory, MemoryKind, MemoryService, Tier
from vaultctx.memory.models import MemorySource
from vaultctx.memory.ranking import dedupe_moments

DAY = 86400.0


@pytest.fixture
def ws(tmp_path: Path):
    workspace = indexed_vault(tmp_path / "vault")
    yield workspace
    workspace.close()


@pytest.fixture
def hybrid(tmp_path: Path):
    embedder = HashEmbedder()
    facade = MemoryService(
        tmp_path / "memory.db", vault_scope="vault", user="ana", embedder=embedder
    )
    yield facade, embedder
    facade.close()


# --- relevance first; importance and recency a prior ----------------------------------------


def test_an_old_relevant_memory_outranks_a_new_irrelevant_one(ws):
    """Relevance decides; importance and recency only reorder near-ties. The new memory
    shares one word with the question and is as important and recent as can be."""
    mem = ws.memory
    now = time.time()
    old = mem.add("The sailing boat is moored at the marina in Porto for the winter",
                  created_at=now - 400 * DAY, importance=0.1)  # fmt: skip
    new = mem.add("Remember: buy a new hook for the boat on 3 May with Ana",
                  created_at=now, importance=1.0)  # fmt: skip
    found = mem.search("where is the sailing boat moored in winter", now=now)
    assert [m.id for m in found] == [old.id, new.id]
    assert found[0].scores["recency"] < 0.1 < found[1].scores["recency"]
    assert found[0].scores["relevance"] > found[1].scores["relevance"] / 0.75


def test_equally_relevant_memories_are_ordered_by_recency(ws):
    mem = ws.memory
    now = time.time()
    old = mem.add("apple pie recipe from grandma", created_at=now - 300 * DAY)
    new = mem.add("apple pie recipe from auntie", created_at=now - DAY)
    assert [m.id for m in mem.search("apple pie recipe", now=now)] == [new.id, old.id]


def test_older_memories_rank_below_equally_relevant_newer_ones(ws):
    mem = ws.memory
    now = time.time()
    old = mem.add("apple pie recipe from grandma", created_at=now - 300 * DAY)
    new = mem.add("apple pie recipe from auntie", created_at=now - DAY)
    found = mem.search("apple pie recipe", now=now)
    assert [m.id for m in found] == [new.id, old.id]
    assert found[0].scores["recency"] > found[1].scores["recency"]


def test_conversation_memories_decay_fastest_and_account_ones_slowest(ws):
    mem = ws.memory
    now = time.time()
    week_ago = now - 7 * DAY
    mem.add("bees swarm conversation", tier="conversation", scope="s", created_at=week_ago)
    mem.add("bees swarm workspace", tier="workspace", created_at=week_ago)
    mem.add("bees swarm account", tier="account", created_at=week_ago)
    found = mem.search("bees swarm", session_id="s", now=now)
    recency = {m.tier: m.scores["recency"] for m in found}
    assert recency[Tier.CONVERSATION] < recency[Tier.WORKSPACE] < recency[Tier.ACCOUNT]
    assert recency[Tier.CONVERSATION] == pytest.approx(0.5**7)


def test_decay_is_relative_to_a_given_now_and_access_refreshes(ws):
    mem = ws.memory
    formed = time.time() - 400 * DAY
    m = mem.add("the old hive tool is in the red box", created_at=formed)
    fresh = mem.search("hive tool", now=formed + DAY)[0].scores["recency"]
    stale = mem.search("hive tool", now=formed + 180 * DAY, refresh=True)[0]
    assert fresh > 0.99 > stale.scores["recency"]
    mem.flush()
    refreshed = mem.get(m.id)
    assert refreshed.access_count == 1
    assert refreshed.last_accessed == pytest.approx(formed + 180 * DAY)
    again = mem.search("hive tool", now=formed + 180 * DAY)[0].scores["recency"]
    assert again == pytest.approx(1.0)


def test_a_question_naming_a_time_prefers_memories_formed_then(ws):
    mem = ws.memory
    may = mem.add("Gina bought a red scarf", tier="channel", scope="c", created_at="2023-05-10")
    june = mem.add("Gina bought a blue scarf", tier="channel", scope="c", created_at="2023-06-10")
    found = mem.search("What scarf did Gina buy in May 2023?", channel="c", now="2023-07-01")
    assert [m.id for m in found[:2]] == [may.id, june.id]
    assert found[0].scores["boost"] > 1.0


# --- token recall and embeddings, fused -----------------------------------------------------


def test_the_hybrid_path_fuses_token_recall_and_embeddings(hybrid):
    mem, _ = hybrid
    mem.add("the beehive entrance faces south")
    found = mem.search("beehive entrance", k=5)
    assert found[0].scores.keys() >= {"token_recall_rank", "embedding_rank", "relevance"}
    ctx = mem.retrieve_for_turn("beehive entrance", session_id="s")
    assert ctx.diagnostics["retrieval_path"] == "hybrid"


def test_a_failing_query_embedding_falls_back_to_token_recall(hybrid):
    mem, embedder = hybrid
    mem.add("the beehive entrance faces south")
    embedder.fail = True
    ctx = mem.retrieve_for_turn("beehive entrance", session_id="s")
    assert ctx.diagnostics["retrieval_path"] == "token_recall_after_embed_error"
    assert [m.text for m in ctx.entries] == ["the beehive entrance faces south"]
    assert mem.stats["embed_errors"] >= 1


# --- nothing twice: episodes deduped, each moment of a conversation once -------------------


def test_episodic_results_are_deduped_by_summary_and_themes(ws):
    mem = ws.memory
    for scope in ("c1", "c2"):
        mem.add("We harvested honey together", tier="channel", scope=scope, kind="episodic",
                summary="harvest day", themes=["honey"])  # fmt: skip
    repo = mem.repo
    with repo.transaction() as conn:  # the same arc seen in two scopes, one result
        conn.execute("UPDATE memories SET tier = 'workspace', scope = ?", (mem.vault_scope,))
        conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
    ctx = mem.retrieve_for_turn("harvested honey", session_id="s")
    assert [m.summary for m in ctx.entries] == ["harvest day"]


def test_search_reads_deeper_when_repeats_leave_fewer_than_k(ws, monkeypatch):
    import vaultctx.memory.ranking as ranking

    monkeypatch.setattr(ranking, "OVERFETCH", 1)  # the first read holds exactly k memories
    turns = [("Jon" if i % 2 else "Gina", f"The hive number {i} swarmed today.") for i in range(8)]
    add_turns(ws.memory, turns)  # each turn, its exchange and its facts all match
    found = ws.memory.search("hive swarmed", k=5, tier="channel", scope="c")
    assert len(found) == 5
    shown: set[str] = set()
    for m in found:  # and none mostly repeats what an earlier one holds (an arc holds none)
        assert 2 * len(set(m.source.turns) & shown) <= len(m.source.turns)
        if not (m.key or "").startswith("arc:"):
            shown |= set(m.source.turns)


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
