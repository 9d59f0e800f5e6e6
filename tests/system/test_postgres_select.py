"""A workspace with `database_url` set selects from PostgreSQL what it selects from its SQLite
index: `index` publishes there, select, related and the graph context read from there."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from conftest import assert_full_text_matches_blocks
from vaultctx import Workspace
from vaultctx.storage.postgres.reads import PostgresReads

pytestmark = pytest.mark.slow

QUERIES = [
    "when should I treat the hives for varroa mites",
    "honey harvest",
    '"queen cell"',
    "wint*",
    "how many frames",
]


def selected(ws: Workspace) -> list[list[tuple[str, float]]]:
    return [[(c.id, round(c.score, 9)) for c in ws.select(q, k=8).candidates] for q in QUERIES]


def test_select_reads_the_same_ranking_from_postgresql(example_vault: Path, postgres_url, embedder):
    with Workspace.open(example_vault, embedder=embedder) as lite:
        lite.index()
        expected = selected(lite)
        related = [c.id for c in lite.related("Varroa mites", k=5).candidates]
    with Workspace.open(example_vault, {"database_url": postgres_url}, embedder=embedder) as ws:
        assert isinstance(ws._vault.reads, PostgresReads)
        report = ws.index()
        assert report.published is not None and report.published["full"]
        assert report.embedded == 0  # the SQLite index had every vector already
        assert selected(ws) == expected
        assert [c.id for c in ws.related("Varroa mites", k=5).candidates] == related


def test_select_through_the_sketch_answers_as_the_scan(example_vault: Path, postgres_url, embedder):
    """Past `ann_min_vectors` select's first vector pass scores the rows the matrix's sketch
    ranks best instead of every vector. On a vault smaller than `SKETCH_CANDIDATES` that is
    every block, so the answers are the scan's, score for score: plain, with filters
    (scored exactly within them), and for `related`. Below the setting the scan runs."""
    filters = {"path": "Journal"}
    settings = {"database_url": postgres_url, "ann_min_vectors": 0}
    with Workspace.open(example_vault, settings, embedder=embedder) as ws:
        ws.index()
        approximate = selected(ws)
        narrowed = [
            (c.id, round(c.score, 9)) for c in ws.select("mites", filters=filters).candidates
        ]
        related = [(c.id, round(c.score, 9)) for c in ws.related("Varroa mites", k=5).candidates]
        assert ws.select(QUERIES[0]).diagnostics["vector_pass"] == "sketch"
        assert ws.select("mites", filters=filters).diagnostics["vector_pass"] == "scan"
    with Workspace.open(example_vault, {"database_url": postgres_url}, embedder=embedder) as ws:
        assert ws.select(QUERIES[0]).diagnostics["vector_pass"] == "scan"
        assert selected(ws) == approximate
        assert [
            (c.id, round(c.score, 9)) for c in ws.select("mites", filters=filters).candidates
        ] == narrowed
        assert [
            (c.id, round(c.score, 9)) for c in ws.related("Varroa mites", k=5).candidates
        ] == related


def test_a_touch_is_context_for_every_server_of_the_database(
    example_vault: Path, postgres_url, embedder
):
    settings = {"database_url": postgres_url}
    with Workspace.open(example_vault, settings, embedder=embedder) as indexer:
        indexer.index()
        before = indexer.select("treatment", k=5, explain=True).diagnostics
        indexer.touch("Varroa mites")
    other = example_vault.parent / "elsewhere"
    other.mkdir()
    with Workspace.open(
        example_vault, {**settings, "index_dir": str(other)}, embedder=embedder
    ) as ws:
        after = ws.select("treatment", k=5, explain=True).diagnostics
    assert before["context_notes"] == 0
    assert after["context_notes"] == 1 and after["graph_hits"] > 0


def test_a_saved_note_is_searchable_from_the_database_after_the_next_index(
    example_vault: Path, postgres_url, embedder
):
    with Workspace.open(example_vault, {"database_url": postgres_url}, embedder=embedder) as ws:
        ws.index()
        assert not [c for c in ws.select("quokka", k=3).candidates if "Quokka" in c.path]
        (example_vault / "Quokka.md").write_text("# Quokka\n\nA quokka visits the apiary.\n")
        report = ws.index()
        assert report.published["notes_written"] == 1 and not report.published["full"]
        assert ws.select("quokka", k=3).candidates[0].path == "Quokka.md"


def full_text_terms(index: Path) -> int:
    conn = sqlite3.connect(index)
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.terms USING fts5vocab(main, blocks_fts, row)")
        (terms,) = conn.execute("SELECT count(*) FROM temp.terms").fetchone()
        return terms
    finally:
        conn.close()


def test_an_index_kept_for_a_database_has_no_full_text_until_it_is_read_here(
    example_vault: Path, postgres_url, embedder
):
    """With database_url the SQLite index is what the database is published from, read
    from there: its FTS5 table is not kept (the database has postings of its own). Opened
    without one, the vault makes it, and selects what the database selected."""
    kept = {"index_dir": str(example_vault.parent / "kept-index")}
    settings = {**kept, "database_url": postgres_url}
    with Workspace.open(example_vault, settings, embedder=embedder) as ws:
        ws.index()
        (example_vault / "Quokka.md").write_text("# Quokka\n\nA quokka visits the apiary.\n")
        next(example_vault.rglob("Varroa*.md")).unlink()
        report = ws.index()
        assert report.published["notes_written"] == 1 and report.published["notes_deleted"] == 1
        assert full_text_terms(ws._vault.db.path) == 0
        published = selected(ws)
    with Workspace.open(example_vault, kept, embedder=embedder) as back:
        assert_full_text_matches_blocks(back._vault.db.path)
        assert selected(back) == published


def test_the_cli_moves_an_index_to_postgresql_and_back(example_vault: Path, postgres_url):
    """`vaultctx index` with database_url publishes; `--from-database` brings it all back."""
    import json

    from click.testing import CliRunner

    from vaultctx.cli import cli

    runner = CliRunner()
    first = runner.invoke(cli, ["index", str(example_vault), "--json"])
    assert first.exit_code == 0, first.output
    env = {"VAULTCTX_DATABASE_URL": postgres_url}
    moved = runner.invoke(cli, ["index", str(example_vault), "--json"], env=env)
    assert moved.exit_code == 0, moved.output
    published = json.loads(moved.output)["published"]
    assert published["full"] and published["vectors"] > 0
    elsewhere = example_vault.parent / "index-elsewhere"
    env["VAULTCTX_INDEX_DIR"] = str(elsewhere)
    back = runner.invoke(cli, ["index", str(example_vault), "--from-database", "--json"], env=env)
    assert back.exit_code == 0, back.output
    report = json.loads(back.output)
    assert report["embedded"] == 0 and report["added"] == 0
    assert report["published"]["notes_written"] == 0
    assert (elsewhere / "index.db").is_file()


def index_when_free(ws: Workspace):
    """As a watcher does: try again until the old indexer's backend has exited."""
    import time

    from vaultctx.errors import IndexLocked

    deadline = time.monotonic() + 10
    while True:
        try:
            return ws.index()
        except IndexLocked:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_servers_over_one_database_answer_alike_and_one_indexes(
    example_vault: Path, postgres_url, embedder, tmp_path: Path
):
    """Two hosts, each with an index folder of its own (empty on the second): the first
    indexes and holds the seat, both answer the same, the second takes over when the first
    is gone, and what it then indexes is searchable from the first's answers."""
    from vaultctx.errors import IndexLocked

    def host(name: str) -> Workspace:
        settings = {"database_url": postgres_url, "index_dir": str(tmp_path / name)}
        return Workspace.open(example_vault, settings, embedder=embedder)

    first, second = host("first"), host("second")
    first.index()
    assert selected(second) == selected(first)
    assert second.status().notes == first.status().notes > 0
    assert second._vault.resolve_note("Varroa mites") == first._vault.resolve_note("Varroa mites")
    assert [c.id for c in second.related("Varroa mites", k=5).candidates] == [
        c.id for c in first.related("Varroa mites", k=5).candidates
    ]
    with pytest.raises(IndexLocked):
        second.index()
    first.close()  # the indexer is gone: its seat with it
    (example_vault / "Quokka.md").write_text("# Quokka\n\nA quokka visits the apiary.\n")
    report = index_when_free(second)
    assert report.published["notes_written"] == 1 and report.embedded == 1
    reader = host("third")
    assert reader.select("quokka", k=3).candidates[0].path == "Quokka.md"
    second.close()
    reader.close()


def test_a_database_that_cannot_be_reached_is_one_line_at_the_cli(example_vault, tmp_path):
    from click.testing import CliRunner

    from vaultctx.cli import cli

    dead = f"postgresql://nobody@/none?host={tmp_path}&connect_timeout=2"
    result = CliRunner().invoke(
        cli, ["select", "honey", "-V", str(example_vault)], env={"VAULTCTX_DATABASE_URL": dead}
    )
    assert result.exit_code == 20
    assert "cannot connect to the database" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_a_database_failure_under_the_vector_run_leaves_the_lexical_answer(
    example_vault: Path, postgres_url, embedder
):
    """The read of the vectors failing in the database (here their table is gone as a
    server loads them) is the vector run's error, labelled as a read of the vectors, not as
    the model's; select answers from the lexical list, and once the database is back, from
    both."""
    import psycopg

    settings = {"database_url": postgres_url}
    with Workspace.open(example_vault, settings, embedder=embedder) as ws:
        ws.index()
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("ALTER TABLE embeddings RENAME TO embeddings_away")
            try:
                failed = ws.select("varroa mites")
            finally:
                admin.execute("ALTER TABLE embeddings_away RENAME TO embeddings")
        assert failed.diagnostics["retrieval_path"] == "lexical_graph_after_vector_error"
        assert failed.diagnostics["errors"]["vector"].startswith("vectors: ")
        assert "embeddings" in failed.diagnostics["errors"]["vector"]
        assert failed.candidates
        assert ws.select("varroa mites").diagnostics["retrieval_path"] == "hybrid"
