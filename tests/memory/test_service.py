"""`MemoryService`, one door for every caller: `add` with a speaker derives what a chat
turn derives, `search` returns what a turn's context does, each scope's memories are seen only
in it, and forgetting is for real."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_helpers import TURNS, add_turns, indexed_vault
from vaultctx.memory import MemoryKind, Tier


@pytest.fixture
def ws(tmp_path: Path):
    workspace = indexed_vault(tmp_path / "vault")
    yield workspace
    workspace.close()


def persist_turns(mem, turns=TURNS, *, channel: str = "c") -> None:
    for i, (speaker, text) in enumerate(turns, start=1):
        mem.persist_turn(text, session_id="s1", channel=channel, turn_id=f"D1:{i}",
                         at="2023-05-08", user_name=speaker, tier="channel")  # fmt: skip
    mem.flush()


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


def test_a_bare_line_that_names_who_said_it_counts_as_said_by_them(ws):
    """`add(text)` with no metadata, as the simplest app stores a transcript: 'Name: text'
    is said by Name, so a question about Name ranks what Name said, not every line that
    happens to hold the name."""
    mem = ws.memory
    for speaker, text in TURNS:
        mem.add(f"{speaker}: {text}", tier="channel", scope="c")
    mem.add("Gina: Jon told me about the agency and Jon seems happy, Jon!", tier="channel",
            scope="c")  # fmt: skip
    found = mem.search("What does Jon say about the agency?", k=3, tier="channel", scope="c")
    assert [m.text.split(":")[0] for m in found[:2]] == ["Jon", "Jon"]
    assert found[0].source.speaker == "Jon"
    assert all("agency" in m.text for m in found[:2])
    assert mem.add("a line with: a colon", tier="channel", scope="c").source.speaker is None
    assert mem.add("Ana: hi", tier="channel", scope="c", speaker=None).source.speaker == "Ana"


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


def test_memory_kinds_can_be_searched_alone(ws):
    mem = ws.memory
    mem.add("hive rule: never open in rain", kind="procedural")
    mem.add("hive fact: twelve frames")
    assert {m.kind for m in mem.search("hive", kinds=["procedural"])} == {MemoryKind.PROCEDURAL}


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
