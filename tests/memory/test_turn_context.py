"""Retrieval every turn: isolation, decay, catch-up, rules, dedupe, paths, select."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from memory_helpers import HashEmbedder, indexed_vault
from vaultctx.cli import cli
from vaultctx.memory import AgentMemoryFacade, MemoryKind, Tier

DAY = 86400.0
DIAGNOSTICS = {
    "load_memory_ms",
    "semantic_hits",
    "semantic_store_size",
    "episodic_hits",
    "episodic_store_size",
    "procedural_count",
    "retrieval_path",
}


@pytest.fixture
def ws(tmp_path: Path):
    workspace = indexed_vault(tmp_path / "vault")
    yield workspace
    workspace.close()


@pytest.fixture
def hybrid(tmp_path: Path):
    embedder = HashEmbedder()
    facade = AgentMemoryFacade(
        tmp_path / "memory.db", vault_scope="vault", user="ana", embedder=embedder
    )
    yield facade, embedder
    facade.close()


def test_a_conversation_memory_never_leaks_into_another_conversation(ws):
    mem = ws.memory
    mem.persist_turn("The secret word is marmalade.", session_id="s1")
    mem.flush()
    own = mem.retrieve_for_turn("secret word marmalade", session_id="s1")
    other = mem.retrieve_for_turn("secret word marmalade", session_id="s2")
    assert any(m.tier is Tier.CONVERSATION and m.scope == "s1" for m in own.entries)
    assert all(m.tier is not Tier.CONVERSATION for m in other.entries)
    assert all(m.scope != "s1" for m in mem.search("marmalade", session_id="s2"))


def test_channel_memories_are_seen_only_in_their_channel(ws):
    mem = ws.memory
    mem.add("The release is on Friday", tier="channel", scope="team-a")
    assert mem.search("release Friday", channel="team-a")
    assert mem.search("release Friday", channel="team-b") == []
    assert mem.search("release Friday") == []


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


def test_the_first_turn_of_a_new_session_catches_up_on_the_last_one(ws):
    mem = ws.memory
    mem.persist_turn("Let's plan moving the hives to the orchard.", session_id="s1", at=1000)
    mem.persist_turn("We need a trailer for the move.", session_id="s1", at=1060)
    mem.flush()
    first = mem.retrieve_for_turn("completely unrelated question", session_id="s2", first_turn=True)
    assert first.catch_up is not None and first.catch_up.key == "arc:s1"
    assert "trailer" in first.catch_up.text and "orchard" in first.catch_up.text
    assert "Last time" in first.text and first.diagnostics["episodic_hits"] >= 1
    later = mem.retrieve_for_turn("completely unrelated question", session_id="s2")
    assert later.catch_up is None
    own = mem.retrieve_for_turn("anything", session_id="s1", first_turn=True)
    assert own.catch_up is None  # its own arc is not a catch-up


def test_procedural_rules_load_every_turn_whatever_the_query(ws):
    mem = ws.memory
    mem.persist_turn("Please answer in bullet points. Never use emoji.", session_id="s1")
    mem.flush()
    ctx = mem.retrieve_for_turn("tomatoes", session_id="s9")
    assert sorted(r.text for r in ctx.procedural_rules) == [
        "Never use emoji.",
        "Please answer in bullet points.",
    ]
    assert all(r.tier is Tier.ACCOUNT for r in ctx.procedural_rules)
    assert ctx.diagnostics["procedural_count"] == 2
    assert ctx.text.startswith("User preferences (always follow):")


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


def test_diagnostics_name_what_the_design_names(ws):
    mem = ws.memory
    mem.persist_turn("My daughter Mia was born in 2019.", session_id="s1")
    mem.flush()
    ctx = mem.retrieve_for_turn("when was Mia born", session_id="s1")
    assert set(ctx.diagnostics) >= DIAGNOSTICS
    d = ctx.diagnostics
    assert d["retrieval_path"] == "token_recall"  # the index has no vectors
    assert d["semantic_hits"] >= 1 and d["semantic_store_size"] >= 1
    assert d["episodic_store_size"] >= 2  # the raw turn and the session's arc
    assert ctx.entries[0].source.session_id == "s1"


def test_the_hybrid_path_fuses_token_recall_and_embeddings(hybrid):
    mem, _ = hybrid
    mem.add("the beehive entrance faces south")
    found = mem.search("beehive entrance", k=5)
    assert found[0].scores.keys() >= {"token_recall_rank", "embedding_rank", "relevance"}
    ctx = mem.retrieve_for_turn("beehive entrance", session_id="s")
    assert ctx.diagnostics["retrieval_path"] == "hybrid_rrf"


def test_a_failing_query_embedding_falls_back_to_token_recall(hybrid):
    mem, embedder = hybrid
    mem.add("the beehive entrance faces south")
    embedder.fail = True
    ctx = mem.retrieve_for_turn("beehive entrance", session_id="s")
    assert ctx.diagnostics["retrieval_path"] == "token_recall_after_embed_error"
    assert [m.text for m in ctx.entries] == ["the beehive entrance faces south"]
    assert mem.stats["embed_errors"] >= 1


def test_select_fuses_memories_as_a_fourth_retriever(ws, tmp_path):
    m = ws.memory.add("The hives in the orchard were treated for mites in March.")
    selection = ws.select("hives orchard mites", k=5)
    assert "memory" in ws.selector.retrievers
    memory_hits = [c for c in selection.candidates if c.kind == "memory"]
    assert memory_hits[0].id == f"memory:{m.id}"
    assert memory_hits[0].metadata["tier"] == "workspace"
    assert selection.diagnostics["memory_hits"] >= 1
    ws.memory.flush()
    result = CliRunner().invoke(
        cli, ["select", "hives mites", "-V", str(ws.root), "--no-vectors", "--json"]
    )
    assert result.exit_code == 0, result.output
    kinds = {c["kind"] for c in json.loads(result.stdout)["candidates"]}
    assert kinds == {"block", "memory"}


def test_a_vault_without_memories_does_not_open_memory_for_select(ws, account_dir):
    ws.select("hives", k=3)
    assert ws._memory is None
    assert not (ws.db.path.parent / "memory.db").exists()


def test_memory_kinds_can_be_searched_alone(ws):
    mem = ws.memory
    mem.add("hive rule: never open in rain", kind="procedural")
    mem.add("hive fact: twelve frames")
    assert {m.kind for m in mem.search("hive", kinds=["procedural"])} == {MemoryKind.PROCEDURAL}


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("What did Jon do on 16 March, 2022?", "2022-03-15", "2022-03-19"),
        ("Which activity was James pursuing on March 16, 2022?", "2022-03-15", "2022-03-19"),
        ("What did Gina buy in May 2023?", "2023-05-01", "2023-06-01"),
        ("Where did they travel in 2022?", "2022-01-01", "2023-01-01"),
        ("What did we plan in December?", "2023-12-01", "2024-01-01"),
        ("What happened yesterday?", "2024-01-09", "2024-01-10"),
    ],
)
def test_the_time_a_question_names_becomes_a_window(query, start, end):
    from vaultctx.memory.models import to_timestamp
    from vaultctx.memory.temporal import time_window

    now = to_timestamp("2024-01-10T12:00:00", 0)
    assert time_window(query, now) == (to_timestamp(start, 0), to_timestamp(end, 0))
    assert time_window("What does Jon like to cook?", now) is None


def test_a_question_naming_a_time_prefers_memories_formed_then(ws):
    mem = ws.memory
    may = mem.add("Gina bought a red scarf", tier="channel", scope="c", created_at="2023-05-10")
    june = mem.add("Gina bought a blue scarf", tier="channel", scope="c", created_at="2023-06-10")
    found = mem.search("What scarf did Gina buy in May 2023?", channel="c", now="2023-07-01")
    assert [m.id for m in found[:2]] == [may.id, june.id]
    assert found[0].scores["boost"] > 1.0


def test_one_speaker_turns_form_exchanges_and_a_moment_is_recalled_once(ws):
    mem = ws.memory
    said = [("Jon", "What made you pick that agency?"), ("Gina", "They support LGBTQ+ folks.")]
    for i, (speaker, text) in enumerate(said):
        mem.persist_turn(
            text, session_id="s1", channel="c", turn_id=f"D1:{i + 1}", user_name=speaker,
            at=f"2023-05-08T13:0{i}:00", tier="channel",
        )  # fmt: skip
    mem.flush()
    exchange = next(m for m in mem.list(tier="channel", scope="c") if m.key and "exchange" in m.key)
    assert exchange.source.turns == ("D1:1", "D1:2")
    assert exchange.text == "Jon: What made you pick that agency?\nGina: They support LGBTQ+ folks."
    ctx = mem.retrieve_for_turn("Why did Gina pick the agency?", session_id="s2", channel="c")
    covered: set[str] = set()
    for m in ctx.entries:  # no entry only repeats turns an earlier entry already holds
        assert not set(m.source.turns) <= covered
        if not (m.key or "").startswith("arc:"):  # an arc holds first sentences only
            covered |= set(m.source.turns)
    assert {"D1:1", "D1:2"} <= covered
