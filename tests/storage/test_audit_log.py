"""The audit log: one owner-only row per model request, never any note text, bounded,
written safely from threads and from other processes."""

from __future__ import annotations

import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from vaultctx.storage import audit as audit_module
from vaultctx.storage.audit import AuditLog, AuditNote, SentNote, public_endpoint


def declared(*paths: str) -> AuditNote:
    return AuditNote(
        purpose="gate",
        destination="local_model",
        notes=tuple(SentNote(p, (1, 2), "policy default") for p in paths),
    )


def test_a_request_is_pending_until_it_ends_then_carries_its_tokens(tmp_path: Path) -> None:
    log = AuditLog.of(tmp_path)
    row = log.begin(model="openai/m", api_base="http://127.0.0.1:9/v1", note=declared("a.md"))
    (pending,) = log.recent()
    assert pending.outcome == "pending" and pending.tokens_in == 0
    log.finish(row, outcome="ok", tokens_in=120, tokens_out=7, attempts=1, latency_ms=3.5)
    (entry,) = log.recent()
    assert (entry.outcome, entry.tokens_in, entry.tokens_out) == ("ok", 120, 7)
    assert entry.notes == (SentNote("a.md", (1, 2), "policy default"),)
    assert (entry.purpose, entry.destination, entry.model) == ("gate", "local_model", "openai/m")


def test_the_log_file_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    log = AuditLog.of(tmp_path / "index")
    log.begin(model="m", api_base=None, note=declared("a.md"))
    for name in ("audit.db", "audit.db-wal"):
        path = tmp_path / "index" / name
        if path.exists():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, name


@pytest.mark.parametrize(
    ("api_base", "kept"),
    [
        ("https://user:s3cret@api.example.com/v1?key=s3cret#s3cret", "https://api.example.com/v1"),
        ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"),
        ("user:s3cret@host.example", "host.example"),
        ("http://[broken@s3cret?key=s3cret", "s3cret"),  # not a URL: still nothing after "?"
    ],
)
def test_credentials_in_the_endpoint_are_never_kept(api_base: str, kept: str) -> None:
    assert public_endpoint(api_base) == kept


def test_an_endpoint_password_never_reaches_the_file(tmp_path: Path) -> None:
    log = AuditLog.of(tmp_path)
    log.begin(model="m", api_base="https://me:hunter2-pw@api.example.com/v1", note=declared())
    assert log.recent()[0].api_base == "https://api.example.com/v1"
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("audit.db*"))
    assert b"hunter2-pw" not in raw


def test_the_newest_requests_come_first_and_limit_counts(tmp_path: Path) -> None:
    log = AuditLog.of(tmp_path)
    for i in range(5):
        log.begin(model=f"m{i}", api_base=None, note=declared())
    assert [e.model for e in log.recent(3)] == ["m4", "m3", "m2"]
    assert log.recent(0) == []


def test_a_vault_that_never_called_a_model_has_an_empty_log(tmp_path: Path) -> None:
    assert AuditLog.of(tmp_path / "nothing-yet").recent() == []


def test_the_log_keeps_the_last_rows_and_drops_old_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit_module, "MAX_ROWS", 3)
    log = AuditLog.of(tmp_path)
    for i in range(7):
        log.begin(model=f"m{i}", api_base=None, note=declared())
    assert [e.model for e in log.recent(100)] == ["m6", "m5", "m4"]
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + (audit_module.MAX_AGE_DAYS + 1) * 86400)
    log.begin(model="later", api_base=None, note=declared())
    assert [e.model for e in log.recent(100)] == ["later"]


def test_threads_and_processes_write_to_one_log_without_losing_a_row(tmp_path: Path) -> None:
    log = AuditLog.of(tmp_path)
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from vaultctx.storage.audit import AuditLog, AuditNote\n"
        "log = AuditLog.of(Path(sys.argv[1]))\n"
        "for i in range(20):\n"
        "    row = log.begin(model='child', api_base=None, note=AuditNote('agent'))\n"
        "    log.finish(row, outcome='ok', tokens_in=1, tokens_out=1, attempts=1, latency_ms=0)\n"
    )
    children = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path)]) for _ in range(2)]

    def write() -> None:
        for _ in range(20):
            row = log.begin(model="thread", api_base=None, note=declared("t.md"))
            log.finish(row, outcome="ok", tokens_in=1, tokens_out=1, attempts=1, latency_ms=0)

    threads = [threading.Thread(target=write) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(child.wait(timeout=60) == 0 for child in children)
    entries = log.recent(1000)
    assert sum(e.model == "thread" for e in entries) == 60
    assert sum(e.model == "child" for e in entries) == 40
    assert all(e.outcome == "ok" for e in entries)
