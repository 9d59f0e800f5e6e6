"""Memory in every turn's context: the first turn of a new session catches up on the last one,
procedural rules load whatever the query, and the diagnostics name what the design names."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_helpers import indexed_vault
from vaultctx.memory import Tier

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
