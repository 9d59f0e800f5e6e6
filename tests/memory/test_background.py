"""Persisting in the background: never blocking, never raising, flushed, and kill-safe."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

from conftest import REPO_ROOT
from memory_helpers import HashEmbedder
from vaultctx.memory import BackgroundWriter, MemoryKind, MemoryService, Tier


class SlowFailingExtractor:
    """The model behind extraction: slow, then broken."""

    name = "llm"

    def __init__(self) -> None:
        self.release = threading.Event()

    def extract(self, turn):
        self.release.wait(5)
        raise TimeoutError("model timed out")


def test_persisting_a_turn_returns_at_once_and_a_failing_model_falls_back(tmp_path):
    extractor = SlowFailingExtractor()
    with MemoryService(
        tmp_path / "memory.db", vault_scope="v", user="u", extractor=extractor
    ) as mem:
        started = time.perf_counter()
        assert mem.persist_turn("I keep 12 hives in Lyon.", "Nice.", session_id="s1")
        assert time.perf_counter() - started < 0.05  # the model is still "thinking"
        assert mem.stats["pending"] == 1
        extractor.release.set()
        assert mem.flush(10)
        stats = mem.stats
        assert stats["extract_errors"] == 1 and stats["errors"] == 0
        texts = [m.text for m in mem.list()]
        assert "User: I keep 12 hives in Lyon." in texts  # the deterministic extractor ran
        assert {m.source.origin for m in mem.list()} == {"deterministic"}


def test_a_failing_embedder_still_writes_memories_for_token_recall(tmp_path):
    embedder = HashEmbedder()
    embedder.fail = True
    with MemoryService(tmp_path / "memory.db", vault_scope="v", user="u", embedder=embedder) as mem:
        mem.persist_turn("We moved the hives to the orchard.", session_id="s1")
        assert mem.flush(10)
        assert mem.stats["embed_errors"] >= 1
        assert mem.search("hives orchard")


def test_a_failing_write_is_counted_never_raised_and_later_jobs_still_run():
    written: list[int] = []

    def commit(item: int) -> None:
        if item == 2:
            raise sqlite3.OperationalError("disk I/O error")
        written.append(item)

    writer: BackgroundWriter[int, int] = BackgroundWriter(lambda jobs: list(jobs), commit)
    for item in range(5):
        writer.submit(item)
    assert writer.flush(5)
    assert written == [0, 1, 3, 4]
    stats = writer.stats
    assert (stats.errors, stats.written, stats.pending) == (1, 4, 0)
    assert "disk I/O error" in (stats.last_error or "")
    writer.close()
    assert writer.submit(9) is False and writer.stats.errors == 2


def test_one_bad_job_does_not_sink_its_batch():
    def prepare(jobs: list[str]) -> list[str]:
        if "bad" in jobs:
            raise ValueError("cannot prepare")
        return jobs

    done: list[str] = []
    writer: BackgroundWriter[str, str] = BackgroundWriter(prepare, done.append)
    for job in ("a", "bad", "b"):
        writer.submit(job)
    writer.close()
    assert sorted(done) == ["a", "b"] and writer.stats.errors == 1


def test_closing_the_workspace_flushes_pending_turns(tmp_path):
    from memory_helpers import indexed_vault

    ws = indexed_vault(tmp_path / "vault")
    for turn in range(20):
        ws.memory.persist_turn(f"Hive {turn} has a new queen.", session_id="s", turn_id=turn)
    path = ws.memory.repo.path
    ws.close()
    with MemoryService(path, vault_scope=str(ws.root), user="u") as mem:
        turns = {t for m in mem.list(tier=Tier.CONVERSATION) for t in m.source.turns}
        assert turns == {str(t) for t in range(20)}


WRITER_SCRIPT = textwrap.dedent(
    """
    import sys
    from vaultctx.memory import MemoryService
    mem = MemoryService(sys.argv[1], vault_scope="v", user="u")
    turn = 0
    while True:
        for _ in range(5):
            mem.persist_turn(
                f"Colony {turn} moved to field {turn % 7}. We saw {turn} drones.",
                session_id="s1", channel="c", turn_id=turn, tier="channel",
            )
            turn += 1
        mem.flush()
        print(turn, flush=True)
    """
)


def test_kill_9_while_writing_leaves_a_sound_database_with_every_flushed_turn(tmp_path):
    path = tmp_path / "memory.db"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER_SCRIPT, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    flushed = 0
    assert proc.stdout is not None
    for line in proc.stdout:
        flushed = int(line)
        if flushed >= 60:
            break
    assert flushed >= 60, "the writer process died early"
    time.sleep(0.05)  # let it be mid-write
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)

    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute(
            "INSERT INTO memories_fts(memories_fts) VALUES ('integrity-check')"
        ).rowcount in (-1, 0, 1)
    with MemoryService(path, vault_scope="v", user="u") as mem:
        memories = mem.list(tier="channel", scope="c")
        by_turn: dict[str, set[MemoryKind]] = {}
        for m in memories:
            if m.key is None:
                for t in m.source.turns:
                    by_turn.setdefault(t, set()).add(m.kind)
        present = sorted(int(t) for t in by_turn)
        assert present == list(range(len(present)))  # no gaps: each turn all or nothing
        assert len(present) >= flushed  # everything flushed before the kill survived
        for kinds in by_turn.values():  # no half-written turn: the event and the fact
            assert kinds == {MemoryKind.EPISODIC, MemoryKind.SEMANTIC}
        arc = next(m for m in memories if m.key == "arc:s1")
        assert arc.source.turns[-1] == str(present[-1])
