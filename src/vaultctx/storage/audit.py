"""The audit log: one row per model request — which model at which endpoint, where that is
(a model on this machine or elsewhere), what for, the notes and blocks whose text was in the
request and the rule that let each through, and the tokens it cost. Never any note text or
prompt: paths, block ids and counts only.

`<index dir>/audit.db`, SQLite, owner-only. A row is written before the request is sent
(outcome "pending") and completed after it, so a request that left the machine is on record
even when the call fails, times out or the process dies. Each write opens its own short
connection: threads and processes (the agent's delegations) write to the same file safely.
sqlite3 is imported on first write: a delegation's child process only declares what it
sends (`AuditNote`), its parent records it. The log keeps the last `MAX_ROWS` requests, none
older than `MAX_AGE_DAYS` days.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from ..errors import IndexCorrupt, VaultctxError

if TYPE_CHECKING:
    import sqlite3

AUDIT_FILENAME = "audit.db"
MAX_ROWS = 10_000
MAX_AGE_DAYS = 90
BUSY_TIMEOUT = 30.0  # writers of a busy machine wait their turn; a row is never dropped

_SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY,
    time REAL NOT NULL,
    model TEXT NOT NULL,
    api_base TEXT,
    destination TEXT NOT NULL,
    purpose TEXT NOT NULL,
    notes TEXT NOT NULL,
    tokens_in INTEGER NOT NULL DEFAULT 0,
    tokens_out INTEGER NOT NULL DEFAULT 0,
    outcome TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    latency_ms REAL
);
CREATE INDEX IF NOT EXISTS requests_time ON requests(time);
"""


@dataclass(frozen=True)
class SentNote:
    """A note whose text is in a request: its path, the ids of its blocks sent (none when
    the whole note or only its name was), and the policy's reason it may go there."""

    path: str
    blocks: tuple[int, ...] = ()
    rule: str = ""


def sent_notes(
    pieces: Iterable[tuple[str, int | None]], rule: Callable[[str], str] | None = None
) -> tuple[SentNote, ...]:
    """(note path, block id or None) pieces of a request as its notes: each note once, in
    the order first seen, with its distinct block ids and `rule`'s reason it may go."""
    blocks: dict[str, list[int]] = {}
    for path, block in pieces:
        ids = blocks.setdefault(path, [])
        if block is not None:
            ids.append(block)
    return tuple(
        SentNote(path, tuple(dict.fromkeys(ids)), rule(path) if rule is not None else "")
        for path, ids in blocks.items()
    )


@dataclass(frozen=True)
class AuditNote:
    """What the caller of a model declares is in one request: what it is for (`gate`,
    `agent`, `memory`, `compaction`, …), where it goes (a `Destination` value) and the notes
    in it. Plain data: a delegation's child process sends it to its parent."""

    purpose: str
    destination: str = ""
    notes: tuple[SentNote, ...] = ()


@dataclass(frozen=True)
class AuditEntry:
    """One recorded request, as `vaultctx audit` shows it."""

    id: int
    time: float  # epoch seconds, when it was sent
    model: str
    api_base: str | None
    destination: str
    purpose: str
    notes: tuple[SentNote, ...] = field(default=())
    tokens_in: int = 0
    tokens_out: int = 0
    outcome: str = "pending"
    attempts: int = 0
    latency_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["notes"] = [asdict(n) | {"blocks": list(n.blocks)} for n in self.notes]
        return data


def public_endpoint(api_base: str | None) -> str | None:
    """`api_base` without what may be a secret: a user and password, a query, a fragment."""
    if not api_base:
        return None
    text = api_base.strip()
    try:
        parts = urlsplit(text)
    except ValueError:  # not a URL: what follows the last "@", before any query
        return text.rpartition("@")[2].split("?")[0].split("#")[0] or None
    if not parts.netloc:
        return parts.path.rpartition("@")[2] or None
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


_LOGS: dict[Path, AuditLog] = {}
_LOGS_LOCK = threading.Lock()


class AuditLog:
    """The audit log of one vault (`AuditLog.of(index_dir)`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._ready = False  # the file and its table made, by this object

    @classmethod
    def of(cls, index_dir: Path) -> AuditLog:
        return cls.at(index_dir / AUDIT_FILENAME)

    @classmethod
    def at(cls, path: Path) -> AuditLog:
        """The one log object of `path` in this process, which makes its file once."""
        with _LOGS_LOCK:
            log = _LOGS.get(path)
            if log is None:
                log = _LOGS[path] = cls(path)
            return log

    @contextlib.contextmanager
    def _connection(self, *, create: bool) -> Iterator[sqlite3.Connection]:
        import sqlite3

        from .db import map_sqlite_error, private_file  # the index's helpers: on first write

        make = create and not (self._ready and self.path.is_file())
        try:
            if make:
                private_file(self.path)
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise IndexCorrupt(f"audit log {self.path}: cannot open: {exc}") from exc
        try:
            if make:  # once: switching to WAL and the schema's statements take locks
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("BEGIN IMMEDIATE")  # a write lock, waited for, before any read
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute("COMMIT")
                self._ready = True
            yield conn
        except sqlite3.Error as exc:
            mapped = map_sqlite_error(exc, self.path)
            if not isinstance(mapped, VaultctxError):
                mapped = IndexCorrupt(f"audit log {self.path}: {exc}")
            raise mapped from exc
        finally:
            conn.close()

    def begin(self, *, model: str, api_base: str | None, note: AuditNote) -> int:
        """Record a request about to be sent; its row id, for `finish`. Raises (the
        request must then not be sent) when the log cannot be written."""
        notes = json.dumps(
            [{"path": n.path, "blocks": list(n.blocks), "rule": n.rule} for n in note.notes],
            ensure_ascii=False,
        )
        now = time.time()
        with self._connection(create=True) as conn:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute(
                "INSERT INTO requests (time, model, api_base, destination, purpose, notes)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (now, model, public_endpoint(api_base), note.destination, note.purpose, notes),
            ).lastrowid
            assert row is not None
            conn.execute("DELETE FROM requests WHERE id <= ?", (row - MAX_ROWS,))
            conn.execute("DELETE FROM requests WHERE time < ?", (now - MAX_AGE_DAYS * 86400,))
            conn.execute("COMMIT")
        return row

    def finish(
        self,
        row: int,
        *,
        outcome: str,
        tokens_in: int,
        tokens_out: int,
        attempts: int,
        latency_ms: float,
    ) -> None:
        """Complete the row of a request that was sent: how it ended and what it cost."""
        with self._connection(create=True) as conn:
            # Immediate: a read that then writes could not wait for another writer (WAL).
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "UPDATE requests SET outcome = ?, tokens_in = ?, tokens_out = ?,"
                " attempts = ?, latency_ms = ? WHERE id = ?",
                (outcome, tokens_in, tokens_out, attempts, latency_ms, row),
            )
            conn.execute("COMMIT")

    def recent(self, limit: int = 50) -> list[AuditEntry]:
        """The last `limit` requests, newest first; none when nothing was ever recorded."""
        if not self.path.is_file():
            return []
        with self._connection(create=True) as conn:
            rows = conn.execute(
                "SELECT id, time, model, api_base, destination, purpose, notes, tokens_in,"
                " tokens_out, outcome, attempts, latency_ms FROM requests"
                " ORDER BY id DESC LIMIT ?",
                (max(limit, 0),),
            ).fetchall()
        return [_entry(row) for row in rows]


def _entry(row: tuple[Any, ...]) -> AuditEntry:
    notes = tuple(
        SentNote(n["path"], tuple(n.get("blocks") or ()), n.get("rule") or "")
        for n in json.loads(row[6])
    )
    return AuditEntry(
        id=row[0],
        time=row[1],
        model=row[2],
        api_base=row[3],
        destination=row[4],
        purpose=row[5],
        notes=notes,
        tokens_in=row[7],
        tokens_out=row[8],
        outcome=row[9],
        attempts=row[10],
        latency_ms=row[11],
    )
