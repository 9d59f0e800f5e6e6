"""Memory storage: tiers, merging, forgetting for real, export/import, scratchpad, schema."""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path

import pytest

from memory_helpers import HashEmbedder
from vaultctx.errors import ConfigError
from vaultctx.memory import MemoryKind, MemoryService, Tier
from vaultctx.memory.migrations import SCHEMA_VERSION


@pytest.fixture
def memory(tmp_path: Path):
    facade = MemoryService(tmp_path / "idx" / "memory.db", vault_scope="vault", user="ana")
    yield facade
    facade.close()


def test_a_memory_keeps_its_tier_scope_kind_scores_and_provenance(memory):
    m = memory.add(
        "Caroline adopted a dog named Rex in May 2023.",
        tier="channel",
        scope="locomo-1",
        created_at="2023-05-08T13:56:00",
        source={"session_id": "session_1", "turns": ["D1:3"], "speaker": "Caroline"},
    )
    assert (m.tier, m.scope, m.kind) == (Tier.CHANNEL, "locomo-1", MemoryKind.SEMANTIC)
    assert m.created.date() == dt.date(2023, 5, 8)
    assert m.source.turns == ("D1:3",) and m.source.speaker == "Caroline"
    assert 0.0 <= m.importance <= 1.0 and "rex" in m.themes
    assert memory.get(m.id) == m
    assert m.to_dict()["created_at"] == "2023-05-08T13:56:00+00:00"


def test_the_same_summary_and_themes_update_instead_of_inserting(memory):
    first = memory.add("The hives stand in the orchard.", importance=0.2)
    second = memory.add("The hives stand in the orchard.", importance=0.9)
    assert second.id == first.id
    assert second.importance == 0.9  # the stronger signal wins
    assert len(memory.list()) == 1


def test_an_upsert_key_updates_one_memory_and_keeps_all_provenance(memory):
    a = memory.add("Plan: paint the hives", key="plan", source={"turns": ["1"]})
    b = memory.add("Plan: paint and move the hives", key="plan", source={"turns": ["2"]})
    assert a.id == b.id and b.text.endswith("move the hives")
    assert b.source.turns == ("1", "2")


def test_nearly_identical_facts_merge_by_embedding_but_events_do_not(tmp_path):
    with MemoryService(
        tmp_path / "memory.db", vault_scope="v", user="u", embedder=HashEmbedder()
    ) as memory:
        a = memory.add("the queen bee of hive three is marked blue", summary="a")
        b = memory.add("The queen bee of hive three is marked blue!", summary="b")
        assert a.id == b.id
        e1 = memory.add("we inspected hive three", kind="episodic", summary="x")
        e2 = memory.add("We inspected hive three.", kind="episodic", summary="y")
        assert e1.id != e2.id


def test_conversation_and_channel_memories_need_their_scope(memory):
    with pytest.raises(ConfigError):
        memory.add("something", tier="conversation")
    assert memory.add("something", tier="conversation", scope="s1").scope == "s1"


def test_account_memories_live_in_the_account_directory_only_once_written(memory, account_dir):
    memory.add("A workspace fact about hives.")
    assert not (account_dir / "account-memory.db").exists()
    m = memory.add("I am allergic to bee stings.", tier="account")
    assert (account_dir / "account-memory.db").exists()
    assert m.scope == "ana"
    assert [x.id for x in memory.list(tier="account")] == [m.id]


def test_forget_erases_the_row_its_indexed_text_and_its_vector(tmp_path):
    path = tmp_path / "memory.db"
    with MemoryService(path, vault_scope="v", user="u", embedder=HashEmbedder()) as memory:
        secret = memory.add("my bank pin is zebracrossing4711")
        memory.add("the orchard has twelve hives")
        assert memory.forget(secret.id) == 1
        assert memory.get(secret.id) is None
        assert memory.search("zebracrossing4711") == []
        counts = memory.repo.connect().execute(
            "SELECT (SELECT count(*) FROM memories), (SELECT count(*) FROM memory_vectors)"
        )
        assert counts.fetchone() == (1, 1)
    for suffix in ("", "-wal"):
        file = Path(f"{path}{suffix}")
        if file.exists():
            assert b"zebracrossing4711" not in file.read_bytes()


def test_soft_forget_hides_a_memory_and_a_new_write_restores_it(memory):
    m = memory.add("the shed key is under the pot")
    assert memory.forget([m.id], soft=True) == 1
    assert memory.list() == [] and memory.search("shed key") == []
    assert memory.add("the shed key is under the pot").id == m.id
    assert [x.id for x in memory.list()] == [m.id]


def test_export_then_import_into_another_store_keeps_ids_times_and_provenance(memory, tmp_path):
    memory.add("Rex is a beagle", created_at="2022-01-02", source={"turns": ["D1:1"]})
    memory.add("answer in bullet points", tier="account", kind="procedural")
    records = memory.export()
    with MemoryService(tmp_path / "other.db", vault_scope="vault", user="ana") as other:
        assert other.import_(records).imported == 2
        assert other.import_(records).imported == 2  # idempotent: same ids update
        assert sorted(r["id"] for r in other.export()) == sorted(r["id"] for r in records)
        rex = next(m for m in other.list() if "Rex" in m.text)
        assert rex.created.year == 2022 and rex.source.turns == ("D1:1",)


def test_import_writes_the_valid_records_and_names_each_bad_one(memory):
    good = {"tier": "workspace", "text": "the extractor is in the shed"}
    report = memory.import_(
        [
            good,
            {"tier": "attic", "text": "x"},
            {"tier": "workspace"},
            {"tier": "workspace", "text": "x", "created_at": 1e300},
            {"tier": "workspace", "text": "x", "created_at": float("nan")},
            {"tier": "workspace", "text": "x", "importance": 7},
            {"tier": "workspace", "text": "x\ud800"},
            {"tier": "conversation", "text": "x"},
            ["not", "a", "record"],
            {**good, "text": "the smoker is in the car", "created_at": "2021-03-04"},
        ]
    )
    assert report.imported == 2
    assert [number for number, _ in report.rejected] == [2, 3, 4, 5, 6, 7, 8, 9]
    why = dict(report.rejected)
    assert why[2].startswith("tier: Input should be 'conversation'")
    assert why[3] == "text: Field required"
    assert why[4] == "created_at: 1e+300 is not a time between the years 1 and 9999"
    assert why[5] == "created_at: nan is not a time between the years 1 and 9999"
    assert why[6].startswith("importance: Input should be less than or equal to 1")
    assert why[7] == "record: holds text that is not valid Unicode (a lone surrogate)"
    assert why[8].startswith("a conversation memory needs a scope")
    assert why[9].startswith("record: Input should be a valid dictionary")
    assert {m.text for m in memory.list()} == {good["text"], "the smoker is in the car"}
    assert len(memory.export()) == 2 and memory.search("shed")


@pytest.mark.parametrize("at", [1e300, -1e300, float("inf"), float("nan"), 10**400, [2023]])
def test_a_time_no_date_can_hold_is_refused_at_every_door(memory, at):
    with pytest.raises(ConfigError, match="is not a date or time"):
        memory.add("x", created_at=at)
    assert memory.list() == []


def test_a_time_stored_out_of_range_by_an_older_vaultctx_cannot_break_a_listing(memory, tmp_path):
    m = memory.add("the hive tool is red")
    with sqlite3.connect(tmp_path / "idx" / "memory.db") as conn:
        conn.execute("UPDATE memories SET created_at = 1e300, last_accessed = 9e999")  # inf
    (listed,) = memory.list()
    assert listed.id == m.id and listed.to_dict()["created_at"].startswith("9999-12-30")
    assert memory.export() and memory.search("hive tool")


def test_the_scratchpad_holds_working_notes_per_conversation(memory):
    pad = memory.scratchpad
    pad.write("s1", "plan", "1. inspect hives")
    pad.write("s1", "plan", "1. inspect hives 2. feed")
    pad.write("s2", "plan", "other")
    assert pad.read("s1", "plan") == "1. inspect hives 2. feed"
    assert pad.items("s1") == {"plan": "1. inspect hives 2. feed"}
    assert pad.delete("s1") == 1 and pad.read("s1", "plan") is None
    assert pad.read("s2", "plan") == "other"


def test_the_memory_database_is_migrated_wal_and_reopens(tmp_path):
    path = tmp_path / "memory.db"
    with MemoryService(path, vault_scope="v", user="u") as memory:
        memory.add("first")
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    with MemoryService(path, vault_scope="v", user="u") as memory:
        assert [m.text for m in memory.list()] == ["first"]
