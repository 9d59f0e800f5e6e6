"""One retrieval path for every caller: `add` with a speaker derives what a chat turn derives,
`search` ranks as a turn's context does, recency is a prior and forgetting is for real."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from memory_helpers import indexed_vault
from vaultctx.memory import MemoryKind

DAY = 86400.0
TURNS = [
    ("Jon", "I finally chose an adoption agency last week."),
    ("Gina", "What made you pick that agency?"),
    ("Jon", "They support LGBTQ+ folks and their counsellors are lovely."),
    ("Gina", "I made marmalade with my grandmother on Sunday."),
    ("Jon", "The agency visits our home in June."),
]


@pytest.fixture
def ws(tmp_path: Path):
    workspace = indexed_vault(tmp_path / "vault")
    yield workspace
    workspace.close()


def add_turns(mem, turns=TURNS, *, scope: str = "c") -> list:
    return [
        mem.add(f"{speaker}: {text}", tier="channel", scope=scope, created_at="2023-05-08",
                speaker=speaker, session="s1", turn=f"D1:{i}")
        for i, (speaker, text) in enumerate(turns, start=1)
    ]  # fmt: skip


def persist_turns(mem, turns=TURNS, *, channel: str = "c") -> None:
    for i, (speaker, text) in enumerate(turns, start=1):
        mem.persist_turn(text, session_id="s1", channel=channel, turn_id=f"D1:{i}",
                         at="2023-05-08", user_name=speaker, tier="channel")  # fmt: skip
    mem.flush()


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


def test_add_with_a_speaker_derives_an_exchange_that_search_finds(ws):
    mem = ws.memory
    own = add_turns(mem)
    assert own[2].kind is MemoryKind.EPISODIC and own[2].source.turns == ("D1:3",)
    assert own[2].text == "Jon: They support LGBTQ+ folks and their counsellors are lovely."
    found = mem.search("Why did Jon pick the agency?", tier="channel", scope="c")
    top = found[0]
    assert "D1:3" in top.source.turns and "LGBTQ+" in top.text
    assert "What made you pick that agency?" in top.text  # the question it answers
    assert top.source.speaker == "Jon" and top.scores["boost"] >= 2.0


def test_a_text_already_prefixed_with_its_speaker_is_not_prefixed_twice(ws):
    mem = ws.memory.add("Gina: hello there", tier="channel", scope="c", speaker="Gina")
    plain = ws.memory.add("hello again", tier="channel", scope="c", speaker="Gina")
    assert mem.text == "Gina: hello there" and plain.text == "Gina: hello again"


def test_both_doors_return_the_same_memories_for_the_same_scope(ws, tmp_path):
    mem = ws.memory
    add_turns(mem)
    query = "Why did Jon pick the agency?"
    searched = mem.search(query, k=5, tier="channel", scope="c")
    turn = mem.retrieve_for_turn(query, session_id="new", channel="c", k=5, refresh=False)
    assert [m.id for m in searched] == [m.id for m in turn.entries]
    assert len(searched) >= 2

    other = indexed_vault(tmp_path / "chat")
    try:
        persist_turns(other.memory)
        chat = other.memory.retrieve_for_turn(query, session_id="new", channel="c", k=5)
        assert [(m.text, m.source.turns) for m in chat.entries] == [
            (m.text, m.source.turns) for m in searched
        ]
    finally:
        other.close()


@pytest.mark.parametrize("door", ["add", "persist_turn"])
def test_forgetting_a_turn_leaves_nothing_findable_by_either_door(ws, door):
    mem = ws.memory
    if door == "add":
        turn = add_turns(mem)[3]
    else:
        persist_turns(mem)
        turn = next(
            m for m in mem.list(tier="channel", scope="c") if m.text.startswith("Gina: I made")
        )
    assert mem.search("marmalade grandmother", tier="channel", scope="c")

    assert mem.forget([turn.id]) >= 3  # the turn, its fact, the exchange, the arc

    assert mem.search("marmalade grandmother", tier="channel", scope="c") == []
    ctx = mem.retrieve_for_turn("marmalade grandmother", session_id="s2", channel="c")
    assert ctx.entries == []
    assert not any("marmalade" in m.text for m in mem.list())
    assert mem.search("adoption agency", tier="channel", scope="c")  # the rest stays


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
