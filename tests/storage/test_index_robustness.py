"""Bad input and bad luck: each gives a clear outcome and loses nothing.

Killed indexing runs, unreadable and binary files, broken encodings, huge notes, a locked or
corrupt index, a broken config file, and the promise that the vault itself is never touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import (
    FakeEmbedder,
    assert_full_text_matches_blocks,
    generated_vault,
    hash_tree,
    pretend_schema,
    query,
    reader_workers,
    snapshot,
)
from vaultctx import (
    ConfigError,
    IndexCorrupt,
    IndexLocked,
    VaultNotFound,
    Workspace,
)
from vaultctx.storage.blocks import estimate_tokens
from vaultctx.storage.db import IndexDatabase, WriterLock


def index(root: Path, **config):
    with Workspace.open(root, config or None) as ws:
        return ws.index(embed=False)


def db_file(root: Path) -> Path:
    return root / ".vaultctx" / "index.db"


def count_notes(db_path: Path) -> int:
    try:
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=0.1)
        try:
            return conn.execute("SELECT count(*) FROM notes").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return -1  # not created yet, or mid-migration


# --- kill -9 ---------------------------------------------------------------------------------

INDEX_IN_SUBPROCESS = (
    "import sys; from vaultctx import Workspace; Workspace.open(sys.argv[1]).index(embed=False)"
)


def assert_reader_workers_exit(timeout: float = 10) -> None:
    """A killed indexer's parse workers see their input close and exit by themselves."""
    if not Path("/proc/self").exists():
        return
    deadline = time.monotonic() + timeout
    while reader_workers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert reader_workers() == [], "parse workers outlived the killed indexer"


@pytest.mark.parametrize("kill_when", ["index file appears", "some notes are written"])
def test_an_index_killed_mid_run_recovers_to_the_same_content_as_a_clean_one(tmp_path, kill_when):
    notes = 3000
    vault = generated_vault(tmp_path / "vault", notes)
    db_path = db_file(vault)
    proc = subprocess.Popen([sys.executable, "-c", INDEX_IN_SUBPROCESS, str(vault)])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if kill_when == "index file appears" and db_path.exists():
                break
            if kill_when == "some notes are written" and count_notes(db_path) > 0:
                break
            time.sleep(0.005)
        assert proc.poll() is None, "indexing finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert_reader_workers_exit()

    with Workspace.open(vault) as ws:  # the killed index opens without error
        conn = ws._vault.db.connect()
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        written = conn.execute("SELECT count(*) FROM notes").fetchone()[0]
        if kill_when == "some notes are written":
            assert 0 < written < notes, "the kill should land mid-run"
        report = ws.index(embed=False)
    assert report.skipped == []
    assert (report.unchanged, report.added) == (written, notes - written)
    assert_full_text_matches_blocks(db_path)

    clean_dir = tmp_path / "clean"
    index(vault, index_dir=str(clean_dir))
    recovered, clean = snapshot(db_path), snapshot(clean_dir / "index.db")
    assert len(clean["notes"]) == notes
    assert any(row[-1] is None for row in clean["links"]), "some links are dangling"
    for table in clean:
        assert recovered[table] == clean[table], f"{table} differ after recovery"


class _Died(BaseException):
    """Stands in for the process dying at one exact point of a run."""


@pytest.mark.parametrize(
    ("dies_in", "after_calls"),
    [("_write", 2), ("_resolve_links", 0)],
    ids=["after-two-batches", "before-resolving-links"],
)
def test_a_run_that_dies_midway_is_completed_by_the_next_run(
    example_vault, tmp_path, dies_in, after_calls
):
    from vaultctx.storage import indexer as indexer_module

    real = getattr(indexer_module.Indexer, dies_in)
    calls = []

    def dying(self, *args, **kwargs):
        calls.append(dies_in)
        if len(calls) > after_calls:
            raise _Died
        return real(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(indexer_module, "_WRITE_BATCH", 10)
        mp.setattr(indexer_module.Indexer, dies_in, dying)
        with pytest.raises(_Died):
            index(example_vault)
    written = query(db_file(example_vault), "SELECT count(*) FROM notes")[0][0]
    notes = len(list(example_vault.rglob("*.md"))) - 1  # less Private/Bank details.md
    assert written == (20 if dies_in == "_write" else notes)

    report = index(example_vault)
    assert (report.unchanged, report.added) == (written, notes - written)
    clean_dir = tmp_path / "clean"
    index(example_vault, index_dir=str(clean_dir))
    assert snapshot(db_file(example_vault)) == snapshot(clean_dir / "index.db")


# --- bad vault paths -------------------------------------------------------------------------


# --- a run killed while embedding ----------------------------------------------------------


def stored_vectors(db_path: Path) -> int:
    return query(
        db_path, "SELECT count(*) FROM blocks b JOIN embeddings e ON e.hash = b.embed_hash"
    )[0][0]


class _DyingEmbedder(FakeEmbedder):
    """Embeds `batches` batches, then the process 'dies'."""

    def __init__(self, batches: int) -> None:
        super().__init__()
        self.batches = batches

    def encode(self, texts, *, batch_size=None):
        if self.batches == 0:
            raise _Died
        self.batches -= 1
        return super().encode(texts, batch_size=batch_size)


def test_a_run_killed_while_embedding_leaves_vectors_that_status_counts_and_select_uses(
    tmp_path, monkeypatch
):
    from vaultctx.storage import indexer as indexer_module

    vault = generated_vault(tmp_path / "vault", 40)
    monkeypatch.setattr(indexer_module, "_EMBED_BATCH", 16)
    with Workspace.open(vault) as ws, pytest.raises(_Died):
        ws._vault.embedder = _DyingEmbedder(batches=2)
        ws.index()
    with Workspace.open(vault, embedder=FakeEmbedder()) as ws:
        status = ws.status()
        selection = ws.select("apiary log number 7", k=5)
    assert stored_vectors(db_file(vault)) == 32 == status.vectors < status.blocks
    assert status.model == FakeEmbedder().model_id
    assert status.last_indexed is not None, "the text index was complete before embedding"
    assert selection.diagnostics["retrieval_path"] == "hybrid"
    assert selection.diagnostics["vector_hits"] == 32


def test_an_index_killed_while_embedding_by_an_older_vaultctx_names_its_model(tmp_path):
    # Before migration 6, the model was recorded only when a run finished embedding.
    vault = generated_vault(tmp_path / "vault", 20)
    index(vault)
    conn = sqlite3.connect(db_file(vault))
    with conn:
        conn.execute(
            "INSERT INTO embeddings(model, hash, vector)"
            " SELECT 'old/model', embed_hash, zeroblob(16) FROM blocks WHERE id % 2 = 0"
        )
        conn.execute("DELETE FROM meta WHERE key IN ('embedding_model', 'last_indexed')")
        pretend_schema(conn, 5)
    conn.close()
    with Workspace.open(vault) as ws:
        status = ws.status()
        ws._vault.require_index()  # notes are there: not "has not been indexed yet"
    assert (status.model, status.vectors) == ("old/model", stored_vectors(db_file(vault)))
    assert 0 < status.vectors < status.blocks


@pytest.mark.slow
def test_status_and_select_after_kill_9_during_the_first_embedding_run(tmp_path, embedder):
    vault = generated_vault(tmp_path / "vault", 400)
    db_path = db_file(vault)
    script = "import sys; from vaultctx import Workspace; Workspace.open(sys.argv[1]).index()"
    proc = subprocess.Popen([sys.executable, "-c", script, str(vault)])
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            with contextlib.suppress(sqlite3.Error):
                if db_path.exists() and stored_vectors(db_path) > 0:
                    break
            time.sleep(0.05)
        assert proc.poll() is None, "embedding finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert_reader_workers_exit()

    stored = stored_vectors(db_path)
    result = subprocess.run(
        [sys.executable, "-m", "vaultctx", "status", str(vault), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    status = json.loads(result.stdout)
    assert 0 < status["vectors"] == stored < status["blocks"]
    assert status["model"] == embedder.model_id
    with Workspace.open(vault, embedder=embedder) as ws:
        selection = ws.select("apiary log number 7", k=5)
    assert selection.diagnostics["retrieval_path"] == "hybrid"
    assert selection.diagnostics["vector_hits"] > 0


def test_a_missing_vault_is_vault_not_found(tmp_path):
    missing = tmp_path / "no such vault"
    with pytest.raises(VaultNotFound, match="vault not found") as excinfo:
        Workspace.open(missing)
    assert str(missing) in str(excinfo.value)
    assert not missing.exists(), "nothing is created for a missing vault"


def test_a_file_is_not_a_vault(tmp_path):
    file = tmp_path / "Note.md"
    file.write_text("# not a folder")
    with pytest.raises(VaultNotFound, match="not a directory"):
        Workspace.open(file)


# --- bad files -------------------------------------------------------------------------------


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read any file, so chmod 000 proves nothing")
def test_an_unreadable_note_is_skipped_and_named(make_vault):
    root = make_vault({"Good.md": "fine", "Secret.md": "locked away"})
    (root / "Secret.md").chmod(0)
    try:
        report = index(root)
    finally:
        (root / "Secret.md").chmod(0o644)
    assert report.added == 1
    assert [path for path, _ in report.skipped] == ["Secret.md"]
    assert "unreadable" in report.skipped[0][1]


def test_a_note_that_cannot_be_read_is_skipped_and_named(make_vault, monkeypatch):
    # The same outcome as above, reproduced for any user (root ignores chmod 000).
    root = make_vault({"Good.md": "fine", "Secret.md": "locked away"})
    real_read_bytes = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self.name == "Secret.md":
            raise PermissionError(13, "Permission denied", str(self))
        return real_read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    report = index(root)
    assert report.added == 1
    assert report.skipped == [("Secret.md", "unreadable: Permission denied")]
    monkeypatch.undo()
    report = index(root)  # readable again: picked up on the next run, nothing lost
    assert (report.added, report.skipped) == (1, [])


def test_a_binary_file_named_md_is_skipped_and_reported(make_vault):
    root = make_vault({"Good.md": "fine", "image.md": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"})
    report = index(root)
    assert report.added == 1
    assert report.skipped == [("image.md", "binary file, not Markdown")]
    assert query(db_file(root), "SELECT path FROM notes") == [("Good.md",)]


def test_invalid_utf8_is_indexed_with_replacement_and_a_warning(make_vault):
    root = make_vault(
        {"Latin1.md": "# Café\n\nThe miel de lavande was excellent.\n".encode("latin-1")}
    )
    report = index(root)
    assert report.added == 1
    assert report.skipped == []
    ((path, message),) = report.warnings
    assert path == "Latin1.md"
    assert message.startswith("invalid UTF-8 at byte")
    texts = [t for (t,) in query(db_file(root), "SELECT heading FROM blocks")]
    assert texts == ["Caf\ufffd"]
    hits = query(db_file(root), "SELECT count(*) FROM blocks_fts WHERE blocks_fts MATCH 'lavande'")
    assert hits == [(1,)]


def test_a_utf8_byte_order_mark_is_not_part_of_the_note(make_vault):
    root = make_vault({"Bom.md": b"\xef\xbb\xbf---\ntitle: With BOM\n---\nbody\n"})
    report = index(root)
    assert report.warnings == []
    assert query(db_file(root), "SELECT title FROM notes") == [("With BOM",)]


def test_a_huge_note_is_indexed_in_chunks_within_the_token_limit(make_vault):
    paragraph = "Frames of capped brood were checked in the apiary on a warm still morning. " * 5
    count = 2_000_000 // len(paragraph)
    text = "# Season log\n\n" + "\n\n".join(f"Entry marker{i}. {paragraph}" for i in range(count))
    root = make_vault({"Huge.md": text})
    assert len(text.encode()) >= 1_900_000
    report = index(root)
    assert report.added == 1 and report.skipped == []
    texts = [t for (t,) in query(db_file(root), "SELECT text FROM blocks ORDER BY ordinal")]
    assert len(texts) > 1000
    assert max(estimate_tokens(t) for t in texts) <= 200
    found = set()
    for t in texts:
        found.update(int(m) for m in re.findall(r"marker(\d+)", t))
    assert found == set(range(count)), "no paragraph is lost"


def test_an_empty_note_is_indexed_and_findable_by_title(make_vault):
    root = make_vault({"Empty thought.md": ""})
    report = index(root)
    assert report.added == 1
    assert query(db_file(root), "SELECT text FROM blocks") == [("",)]
    hits = query(
        db_file(root),
        "SELECT b.title FROM blocks_fts f JOIN blocks b ON b.id = f.rowid"
        " WHERE blocks_fts MATCH 'thought'",
    )
    assert hits == [("Empty thought",)]


# --- the index file --------------------------------------------------------------------------


def test_a_locked_index_raises_index_locked_with_a_clear_message(example_vault):
    index(example_vault)
    lock = WriterLock(example_vault / ".vaultctx" / "index.lock")
    with lock, Workspace.open(example_vault) as ws:
        assert ws.status().notes > 0, "reading needs no lock"
        with pytest.raises(IndexLocked) as excinfo:
            ws.index(embed=False)
    message = str(excinfo.value)
    assert "another vaultctx process" in message
    assert f"pid {os.getpid()}" in message
    assert index(example_vault).unchanged > 0, "the lock is free again once released"


def test_a_lock_held_by_another_process_raises_index_locked(example_vault, tmp_path):
    lock = example_vault / ".vaultctx" / "index.lock"
    ready = tmp_path / "ready"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, pathlib\n"
            "from vaultctx.storage.db import WriterLock\n"
            "with WriterLock(pathlib.Path(sys.argv[1])):\n"
            "    pathlib.Path(sys.argv[2]).touch()\n"
            "    time.sleep(60)\n",
            str(lock),
            str(ready),
        ]
    )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        with pytest.raises(IndexLocked, match=f"pid {holder.pid}"):
            index(example_vault)
    finally:
        holder.kill()
        holder.wait()
    assert index(example_vault).added > 0, "a dead holder's lock is released by the OS"


def test_a_busy_database_maps_to_index_locked(tmp_path):
    db = IndexDatabase(tmp_path / "index.db", busy_timeout=0.05)
    other = sqlite3.connect(tmp_path / "index.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(IndexLocked, match="locked by another process"), db.transaction():
            pass
    finally:
        other.execute("ROLLBACK")
        other.close()
        db.close()


def test_a_corrupt_index_raises_index_corrupt_naming_the_file(example_vault):
    bad = db_file(example_vault)
    bad.parent.mkdir()
    bad.write_bytes(random.Random(3).randbytes(64 * 1024))
    with pytest.raises(IndexCorrupt) as excinfo:
        Workspace.open(example_vault)
    assert str(bad) in str(excinfo.value)
    assert "vaultctx index" in str(excinfo.value), "the message says how to recover"


def test_a_broken_config_file_raises_config_error(example_vault):
    config = example_vault / ".vaultctx" / "config.toml"
    config.parent.mkdir()
    config.write_text("embed = [not toml\n")
    with pytest.raises(ConfigError, match="not valid TOML") as excinfo:
        Workspace.open(example_vault)
    assert str(config) in str(excinfo.value)


@pytest.mark.parametrize(
    ("line", "complaint"),
    [("chunk_tokens = 5", "chunk_tokens"), ("chunk_tokns = 100", "chunk_tokns")],
    ids=["out-of-range", "unknown-key"],
)
def test_an_invalid_config_value_raises_config_error(example_vault, line, complaint):
    config = example_vault / ".vaultctx" / "config.toml"
    config.parent.mkdir()
    config.write_text(line + "\n")
    with pytest.raises(ConfigError, match=complaint):
        Workspace.open(example_vault)


def test_config_file_settings_are_used(make_vault):
    long = "\n\n".join(" ".join(f"w{i}x{j}" for j in range(30)) for i in range(20))
    root = make_vault({"Long.md": long, ".vaultctx/config.toml": "chunk_tokens = 40\n"})
    index(root)
    texts = [t for (t,) in query(db_file(root), "SELECT text FROM blocks")]
    assert max(estimate_tokens(t) for t in texts) <= 40


# --- the vault is read-only to vaultctx ------------------------------------------------------


def test_indexing_never_modifies_the_vault(example_vault):
    before = hash_tree(example_vault)
    mtimes = {p: p.stat().st_mtime_ns for p in example_vault.rglob("*") if p.is_file()}
    with Workspace.open(example_vault) as ws:
        ws.index(embed=False)
        ws.index(embed=False)
        ws.status()
        ws.graph()
    assert hash_tree(example_vault) == before
    assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes
    created = {
        p.relative_to(example_vault).as_posix()
        for p in example_vault.rglob("*")
        if p.is_file() and p not in mtimes
    }
    assert created and all(p.startswith(".vaultctx/") for p in created)
