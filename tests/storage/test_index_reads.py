"""`IndexReads`: what select, related and refine read from an index, on the indexed example
vault (its vectors from the hashed bag-of-words stand-in model) — the SQLite index itself,
and the same index published to PostgreSQL, each test on both."""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from select_helpers import HashEmbedder
from vaultctx import Workspace
from vaultctx.errors import IndexDatabaseError
from vaultctx.pipeline.note_ranking import COLUMN_WEIGHTS
from vaultctx.search.query import QueryTokenizer, build_query
from vaultctx.storage.index_reads import IndexReads, SqliteReads
from vaultctx.storage.lexical import FtsTerms
from vaultctx.storage.postgres.reads import PostgresReads
from vaultctx.storage.postgres.schema import connect
from vaultctx.storage.postgres.sync import publish


@pytest.fixture
def ws(example_vault: Path) -> Iterator[Workspace]:
    with Workspace.open(example_vault, embedder=HashEmbedder()) as ws:
        ws.index()
        yield ws


@pytest.fixture(params=["sqlite", "postgres"])
def reads(request: pytest.FixtureRequest, ws: Workspace) -> Iterator[IndexReads]:
    """The example vault's index on each backend."""
    if request.param == "sqlite":
        yield ws._vault.reads
        return
    url = request.getfixturevalue("postgres_url")
    with connect(url) as pg:
        publish(ws._vault.db, pg, None)
    published = PostgresReads(url)
    yield published
    published.close()


def sql(ws: Workspace, statement: str, *args: object) -> list[tuple]:
    return ws._vault.db.connect().execute(statement, args).fetchall()


def built(reads: IndexReads, text: str):
    return build_query(text, QueryTokenizer(reads), reads.block_count())


def test_a_vault_reads_its_index_through_sqlite_reads(ws):
    assert isinstance(ws._vault.reads, SqliteReads)
    assert ws._vault.reads.meta("generation") == ws._vault.generation
    assert ws._vault.reads.meta("no such key") is None
    assert ws._vault.reads.block_count() == sql(ws, "SELECT count(*) FROM blocks")[0][0] > 0
    assert ws._vault.reads.note_ids() == sorted(n for (n,) in sql(ws, "SELECT id FROM notes"))
    assert sorted(ws._vault.reads.all_note_paths()) == sorted(sql(ws, "SELECT id, path FROM notes"))


def test_filters_keep_the_blocks_of_the_unfiltered_ranking_in_its_order(ws, reads):
    query = built(reads, "varroa mites queen hive honey winter feeding")
    everything = reads.bm25_blocks(query, COLUMN_WEIGHTS, 10_000)
    assert len(everything) > 20
    scores = [score for _, score in everything]
    assert scores == sorted(scores, reverse=True)
    owners = reads.block_notes([block for block, _ in everything])
    notes = sorted(set(owners.values()))
    allowed, hidden = set(notes[::2]), set(notes[::3])
    for allow, hide, limit in (
        (allowed, (), 10_000),
        (None, hidden, 10_000),
        (allowed, hidden, 10_000),
        (allowed, hidden, 5),
    ):
        want = [
            (block, score)
            for block, score in everything
            if (allow is None or owners[block] in allow) and owners[block] not in hide
        ][:limit]
        assert reads.bm25_blocks(query, COLUMN_WEIGHTS, limit, allowed=allow, hidden=hide) == want
    assert reads.bm25_blocks(query, COLUMN_WEIGHTS, 10, allowed=set()) == []
    assert reads.bm25_blocks(query, COLUMN_WEIGHTS, 0) == []
    assert reads.bm25_blocks(built(reads, "the and of"), COLUMN_WEIGHTS, 10) == []


def located(reads: IndexReads, ranked: list[tuple[int, float]]) -> list[tuple[str, int, float]]:
    """Each ranked block as (its note's path, its first line, its score): the same block in
    two indexes of the same notes."""
    rows = reads.block_rows([block for block, _ in ranked])
    return [(rows[b]["path"], rows[b]["start_line"], score) for b, score in ranked]


@pytest.mark.parametrize(
    "text",
    ["varroa mites queen hive honey winter feeding", '"queen cell" swarm', "hiv* inspection"],
)
def test_a_reader_s_bm25_is_an_index_s_without_the_notes_absent_for_them(
    ws, reads, example_vault, tmp_path, text
):
    """Notes absent for a reader leave no trace in the scores: the row count, the average
    length and each phrase's rarity are those of an index built without them."""
    paths = dict(ws._vault.reads.all_note_paths())
    query = built(reads, text)
    everything = reads.bm25_blocks(query, COLUMN_WEIGHTS, 10_000)
    owners = reads.block_notes([block for block, _ in everything])
    absent = set(sorted(set(owners.values()))[::3])
    without = tmp_path / "without"
    shutil.copytree(example_vault, without, ignore=shutil.ignore_patterns(".vaultctx"))
    for note in absent:
        (without / paths[note]).unlink()
    with Workspace.open(without, embedder=HashEmbedder()) as other:
        other.index()
        oracle = other._vault.reads
        want = located(oracle, oracle.bm25_blocks(built(oracle, text), COLUMN_WEIGHTS, 10))
    got = located(reads, reads.bm25_blocks(query, COLUMN_WEIGHTS, 10, absent=absent))
    assert [(path, line) for path, line, _ in got] == [(path, line) for path, line, _ in want]
    assert [score for *_, score in got] == pytest.approx([score for *_, score in want], rel=1e-9)
    assert not {paths[note] for note in absent} & {path for path, _, _ in got}


def test_terms_and_their_block_counts_are_the_index_own(ws, reads):
    conn = ws._vault.db.connect()
    assert reads.stems("Queens were marked") == FtsTerms(conn).stems("Queens were marked")
    assert reads.stems("Queens were marked") == ["queen", "were", "mark"]
    counts = reads.doc_freqs(["queen", "zzzunheardof"])
    assert counts["queen"] == len(
        sql(ws, "SELECT rowid FROM blocks_fts WHERE blocks_fts MATCH 'queen'")
    )
    assert counts.get("zzzunheardof", 0) == 0
    assert reads.doc_freqs([]) == {}


def test_blocks_and_notes_by_id(ws, reads):
    blocks = sql(ws, "SELECT id, note_id, ordinal FROM blocks ORDER BY id")
    some = [b for b, _, _ in blocks[::7]]
    assert reads.block_notes(some) == {b: n for b, n, _ in blocks if b in some}
    rows = reads.block_rows(some)
    assert sorted(rows) == sorted(some)
    for block, row in rows.items():
        assert row["id"] == f"block:{block}" and row["kind"] == "block"
        assert row["block_id"] == block and row["note_id"] == reads.block_notes([block])[block]
        assert row["path"] == reads.note_paths([row["note_id"]])[row["note_id"]]
    notes = reads.note_ids()
    first = reads.first_blocks(notes)
    assert first == {n: b for b, n, ordinal in blocks if ordinal == 0}
    assert list(first) == sorted(first)
    counts = reads.note_block_counts(notes)
    assert sum(counts.values()) == len(blocks)
    for empty in (reads.block_notes, reads.block_rows, reads.note_paths, reads.first_blocks):
        assert empty([]) == {}
    assert reads.note_block_counts([]) == {}


def test_a_note_title_language_sections_and_a_block_neighbours(ws, reads):
    _, note = ws._vault.resolve_note("Hives/Apiary Site.md")
    title, language = reads.note_title_language(note)
    assert title == "Apiary Site" and language in (None, "en")
    assert reads.note_title_language(10**9) is None
    sections = reads.note_sections(note)
    assert len(sections) == reads.note_block_counts([note])[note] > 2
    assert any("Layout" in heading for heading, _ in sections)
    middle = sql(ws, "SELECT id FROM blocks WHERE note_id = ? AND ordinal = 1", note)[0][0]
    around = reads.neighbours(middle)
    assert sorted(offset for _, offset, *_ in around) == [-1, 1]
    assert {text for _, _, text, *_ in around} <= {text for _, text in sections}


def test_languages_counted_with_and_without_hidden_notes(ws, reads):
    counts = reads.language_counts()
    assert counts and all(language for language in counts)
    assert reads.language_counts(reads.note_ids()) == {}
    hidden = set(reads.note_ids()[:5])
    fewer = reads.language_counts(hidden)
    assert sum(fewer.values()) < sum(counts.values())
    assert all(fewer[language] <= counts[language] for language in fewer)


def test_notes_matching_a_window_and_nested_tags(ws, reads):
    everything = reads.notes_matching(None, None, [])
    assert sorted(n for n, _, _ in everything) == reads.note_ids()
    pests = {n for n, _, _ in reads.notes_matching(None, None, ["pests"])}
    varroa = {n for n, _, _ in reads.notes_matching(None, None, ["pests/varroa"])}
    assert varroa and varroa < pests
    assert {n for n, _, _ in reads.notes_matching(None, None, ["pests", "pests/varroa"])} == varroa
    assert reads.notes_matching(None, None, ["pest"]) == []
    now = time.time_ns()
    assert reads.notes_matching(now + 10**12, None, []) == []
    assert len(reads.notes_matching(None, now + 10**12, [])) == len(everything)


def test_links_accesses_and_edits(ws, reads):
    links = reads.resolved_links()
    assert links and all(source != target for source, target, _ in links)
    some = sorted({source for source, _, _ in links})[::2]
    assert sorted(reads.resolved_links(some)) == sorted(r for r in links if r[0] in set(some))
    blocks = [b for (b,) in sql(ws, "SELECT id FROM blocks")]
    for block, target in reads.passage_links(blocks):
        assert target != reads.block_notes([block])[block]
    assert reads.passage_links([]) == []
    for name in ("Hives/Apiary Site.md", "Home.md"):
        reads.record_access(ws._vault.resolve_note(name)[1], time.time(), "touch")
    touched = reads.recent_accesses(10)
    assert [n for n, _ in touched] == [
        ws._vault.resolve_note("Home.md")[1],
        ws._vault.resolve_note("Hives/Apiary Site.md")[1],
    ]
    assert reads.recent_accesses(1) == touched[:1]
    assert reads.count_edited_since(0, 10**6) == len(reads.note_ids())
    assert reads.count_edited_since(0, 2) == 2
    edited = reads.edited_since(0, 3)
    assert len(edited) == 3
    assert [m for _, m in edited] == sorted((m for _, m in edited), reverse=True)
    assert reads.count_edited_since(time.time_ns() + 10**12, 10) == 0


def test_vector_chunks_cover_every_vector_once(ws, reads):
    model = ws.embedder.model_id
    count = reads.vector_count(model)
    assert count == reads.block_count()
    chunks = list(reads.vector_rows(model, 7))
    assert all(0 < len(chunk) <= 7 for chunk in chunks)
    rows = [row for chunk in chunks for row in chunk]
    assert len(rows) == count == len({block for block, *_ in rows})
    owners = reads.block_notes([block for block, *_ in rows])
    for block, note, digest, vector in rows:
        assert owners[block] == note
        assert np.frombuffer(vector, dtype=np.float32).shape == (64,)
        assert reads.vectors_of(model, [digest]) == [(digest, vector)]
    keys = [key for chunk in reads.vector_keys(model, 7) for key in chunk]
    assert sorted(keys) == sorted(row[:3] for row in rows)
    assert reads.vectors_of(model, ["no-such-content"]) == []
    assert reads.vector_count("no/such-model") == 0
    assert list(reads.vector_rows("no/such-model", 7)) == []


def test_each_thread_reads_on_its_own_connection(ws):
    reads = ws._vault.reads
    query = built(reads, "queen cells swarm")
    want = reads.bm25_blocks(query, COLUMN_WEIGHTS, 20, hidden=set(reads.note_ids()[:3]))
    got: list[object] = []

    def search() -> None:
        got.append(ws._vault.db.connect())
        got.append(built(reads, "queen cells swarm") == query)
        got.append(reads.bm25_blocks(query, COLUMN_WEIGHTS, 20, hidden=set(reads.note_ids()[:3])))

    thread = threading.Thread(target=search)
    thread.start()
    thread.join()
    assert got[0] is not ws._vault.db.connect()
    assert got[1:] == [True, want]


def test_a_failed_lexical_read_fails_the_lexical_run_alone(ws, monkeypatch):
    """A failed read (`IndexDatabaseError`) is the lexical run's error, not select's."""

    def broken(*args, **kwargs):
        raise IndexDatabaseError("database disk image is malformed")

    monkeypatch.setattr(ws._vault.reads, "bm25_blocks", broken)
    selection = ws.select("queen cells swarm", k=3)
    assert selection.diagnostics["errors"] == {"lexical": "fts: database disk image is malformed"}
    assert selection.diagnostics["retrieval_path"] == "vector_graph_after_lexical_error"
    assert selection.candidates  # the vector list still answers


def test_the_database_s_own_errors_stop_at_the_storage_layer(ws):
    """A read the database fails raises the project's `IndexDatabaseError` (the database's
    message kept), from a method or from the iterator it returns; select's lexical run
    reports it alone."""
    reads = ws._vault.reads
    query = built(reads, "queen cells swarm")
    model = reads.meta("embedding_model") or ""
    sql(ws, "ALTER TABLE blocks_fts RENAME TO gone_fts")
    sql(ws, "ALTER TABLE embeddings RENAME TO gone_embeddings")
    with pytest.raises(IndexDatabaseError, match="no such table: blocks_fts") as raised:
        reads.bm25_blocks(query, COLUMN_WEIGHTS, 5)
    assert isinstance(raised.value.__cause__, sqlite3.Error)
    with pytest.raises(IndexDatabaseError, match="no such table: embeddings"):
        list(reads.vector_rows(model, 10))
    selection = ws.select("queen cells swarm", k=3, use_vectors=False)
    assert selection.diagnostics["errors"]["lexical"].startswith("fts: no such")
