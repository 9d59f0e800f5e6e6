"""A big index run parses in worker processes; the index it builds is the one a single
process builds, and a worker that fails to start, dies or talks nonsense costs only time."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from conftest import assert_full_text_matches_blocks, generated_vault, reader_workers, snapshot
from vaultctx import Workspace
from vaultctx.storage import reader

NOTES = reader.PARALLEL_MIN_FILES + 250  # enough files for the workers to be used


@pytest.fixture(scope="module")
def big_vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generated_vault(tmp_path_factory.mktemp("workers") / "vault", NOTES)


@pytest.fixture(scope="module")
def one_process_index(big_vault: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    index_dir = tmp_path_factory.mktemp("in-process")
    index(big_vault, index_dir, workers=0)
    return index_dir / "index.db"


def index(vault: Path, index_dir: Path, *, workers: int) -> object:
    config = {"index_dir": str(index_dir), "index_workers": workers}
    with Workspace.open(vault, config) as ws:
        return ws.index(embed=False)


def started_workers(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Commands of the workers started from now on."""
    started: list[list[str]] = []
    real = reader.worker_command

    def recording(chunk_tokens: int) -> list[str]:
        command = real(chunk_tokens)
        started.append(command)
        return command

    monkeypatch.setattr(reader, "worker_command", recording)
    return started


def chunks_read_here(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Sizes of the chunks this process reads itself from now on (the workers read the rest)."""
    sizes: list[int] = []
    real = reader.read_notes

    def counting(jobs, chunk_tokens, pdfs=None):
        sizes.append(len(jobs))
        return real(jobs, chunk_tokens, pdfs)

    monkeypatch.setattr(reader, "read_notes", counting)
    return sizes


@pytest.mark.parametrize("workers", [1, 2])
def test_workers_build_the_index_one_process_builds(
    big_vault, one_process_index, tmp_path, monkeypatch, workers
):
    started = started_workers(monkeypatch)
    read_here = chunks_read_here(monkeypatch)
    report = index(big_vault, tmp_path, workers=workers)
    assert len(started) == workers
    assert sum(read_here) < NOTES, "the workers read part of the vault"
    assert (report.added, report.skipped) == (NOTES, [])
    assert snapshot(tmp_path / "index.db") == snapshot(one_process_index)
    assert_full_text_matches_blocks(tmp_path / "index.db")


def test_a_small_run_parses_in_this_process(make_vault, tmp_path, monkeypatch):
    started = started_workers(monkeypatch)
    vault = make_vault({f"Note {i}.md": f"# Note {i}\n\nText {i}.\n" for i in range(20)})
    assert index(vault, tmp_path, workers=3).added == 20
    assert started == []


def test_no_worker_is_started_when_this_python_is_embedded_in_an_app(
    big_vault, one_process_index, tmp_path, monkeypatch
):
    started = started_workers(monkeypatch)
    monkeypatch.setattr(sys, "executable", "/Applications/Notes.app/Contents/MacOS/Notes")
    assert index(big_vault, tmp_path, workers=2).added == NOTES
    assert started == [], "launching the app's binary would open a second app"
    assert snapshot(tmp_path / "index.db") == snapshot(one_process_index)


WORKERS_THAT_FAIL = {
    "cannot start": ["/nonexistent/python"],
    "dies at once": [sys.executable, "-c", "import sys; sys.exit(3)"],
    "dies midway": [
        sys.executable,
        "-c",
        "from vaultctx.storage import reader; from vaultctx.childproc import receive, send;"
        " import sys; index, jobs = receive(sys.stdin.buffer);"
        " send(sys.stdout.buffer, (index, reader.read_notes(jobs, 200))); sys.exit(3)",
    ],
    "talks nonsense": [
        sys.executable,
        "-c",
        "import sys; sys.stdout.buffer.write(b'\\x05' + bytes(7) + b'hello'); sys.stdout.flush();"
        " sys.stdin.buffer.read()",
    ],
}


@pytest.mark.parametrize("failure", list(WORKERS_THAT_FAIL))
def test_what_a_failed_worker_did_not_deliver_is_read_here(
    big_vault, one_process_index, tmp_path, monkeypatch, failure
):
    monkeypatch.setattr(reader, "worker_command", lambda chunk_tokens: WORKERS_THAT_FAIL[failure])
    report = index(big_vault, tmp_path, workers=1)
    assert (report.added, report.skipped) == (NOTES, [])
    assert snapshot(tmp_path / "index.db") == snapshot(one_process_index)


def test_a_worker_reports_unreadable_and_binary_files_like_this_process(make_vault, tmp_path):
    files: dict[str, str | bytes] = {
        f"Note {i}.md": f"# Note {i}\n\n[[Note {i + 1}]]\n" for i in range(NOTES)
    }
    files["image.md"] = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
    files["latin1.md"] = "caf\xe9 au lait".encode("latin-1")
    vault = make_vault(files)
    report = index(vault, tmp_path, workers=1)
    assert report.skipped == [("image.md", "binary file, not Markdown")]
    assert report.warnings == [("latin1.md", "invalid UTF-8 at byte 3; decoded with replacement")]
    assert report.added == NOTES + 1


def test_a_reader_closed_midway_stops_its_workers_and_threads(big_vault, monkeypatch):
    started = started_workers(monkeypatch)
    jobs = [
        reader.ReadJob(path.relative_to(big_vault).as_posix(), str(path), None)
        for path in sorted(big_vault.rglob("*.md"))
    ]
    reads = reader.read_all(jobs, 200, workers=2)
    first = [next(reads) for _ in range(300)]
    reads.close()
    assert len(started) == 2 and all(read.rows for read in first)
    assert [t.name for t in threading.enumerate() if t.name.startswith("vaultctx-reader")] == []
    if Path("/proc/self").exists():
        assert reader_workers() == []
