"""The vault's SQLite index file: connections, pragmas, migrations, the writer lock."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from ..config import private_dir, private_file
from ..errors import IndexCorrupt, IndexDatabaseError, IndexLocked, VaultctxError
from . import migrations
from .language import analyse

_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",  # WAL + NORMAL: durable at checkpoints, never corrupt
    "PRAGMA foreign_keys=ON",
    "PRAGMA temp_store=MEMORY",
    "PRAGMA cache_size=-16384",  # 16 MB per connection; the OS caches the file too
    "PRAGMA mmap_size=67108864",
)


def map_sqlite_error(exc: sqlite3.Error, path: Path) -> Exception:
    """Turn sqlite3's errors into the ones vaultctx documents."""
    message = str(exc)
    if "locked" in message or "busy" in message:
        return IndexLocked(f"index {path} is locked by another process; try again")
    if isinstance(exc, sqlite3.DatabaseError) and (
        "not a database" in message or "malformed" in message
    ):
        return IndexCorrupt(
            f"index {path} is damaged ({message}); delete it and run `vaultctx index`"
        )
    return exc


def sqlite_error(exc: sqlite3.Error, path: Path | None) -> VaultctxError:
    """sqlite3's error as the project's: locked, damaged, or else `IndexDatabaseError`."""
    mapped = map_sqlite_error(exc, path) if path is not None else exc
    return mapped if isinstance(mapped, VaultctxError) else IndexDatabaseError(str(exc))


def database_error(exc: BaseException, path: Path | None = None) -> VaultctxError | None:
    """A database error of either backend (sqlite3's, psycopg's) as the project's error
    (locked, damaged, or `IndexDatabaseError`); None for any other exception. Where the
    storage layer does not map its errors itself, a door maps what reaches it with this."""
    if isinstance(exc, sqlite3.Error):
        return sqlite_error(exc, path)
    psycopg = sys.modules.get("psycopg")  # loaded only where a database URL is used
    if psycopg is not None and isinstance(exc, psycopg.Error):
        return IndexDatabaseError(str(exc))
    return None


def erase_tree(path: Path) -> None:
    """Delete a folder after overwriting each of its files with zeros: what it held (say,
    someone's memories) is not left readable in the freed blocks of the file system (as far
    as the file system writes in place)."""
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        with contextlib.suppress(OSError), open(file, "r+b") as handle:
            handle.write(bytes(os.fstat(handle.fileno()).st_size))
            handle.flush()
            os.fsync(handle.fileno())
    shutil.rmtree(path, ignore_errors=True)


class IndexDatabase:
    """One index file. Each thread gets its own connection; readers never block in WAL."""

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout: float = 5.0,
        migrate: Callable[[sqlite3.Connection], int] = migrations.migrate,
    ) -> None:
        """`migrate` brings the schema up to date; another database (memory.db) passes its own."""
        self.path = path
        self._busy_timeout = busy_timeout
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        try:
            private_file(path)
            conn = self.connect()
            migrate(conn)
        except OSError as exc:
            raise IndexCorrupt(f"index {path}: cannot open: {exc.strerror or exc}") from exc
        except RuntimeError as exc:  # schema from a newer vaultctx
            raise IndexCorrupt(f"index {path}: {exc}") from exc
        except sqlite3.Error as exc:
            self.close()
            raise sqlite_error(exc, path) from exc

    def connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout,
                isolation_level=None,  # explicit BEGIN/COMMIT only
                check_same_thread=False,
            )
            for pragma in _PRAGMAS:
                conn.execute(pragma)
            # The full-text index's text, analysed for its note's language, in SQL.
            conn.create_function("vx_analyse", 2, analyse, deterministic=True)
            self._local.conn = conn
            with self._connections_lock:
                self._connections.append(conn)
        return conn

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE … COMMIT: all or nothing, even if the process is killed."""
        conn = self.connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise sqlite_error(exc, self.path) from exc
        try:
            yield conn
        except sqlite3.Error as exc:
            conn.execute("ROLLBACK")
            raise sqlite_error(exc, self.path) from exc
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise sqlite_error(exc, self.path) from exc

    @contextlib.contextmanager
    def one_checkpoint(self) -> Iterator[None]:
        """Copy the write-ahead log into the database once, when the block ends.

        SQLite's default checkpoints every 4 MB of log; on a big index run FTS5 merges
        rewrite the same pages batch after batch, so one checkpoint copies each page once
        instead of many times.
        """
        conn = self.connect()
        conn.execute("PRAGMA wal_autocheckpoint=0")
        try:
            yield
        finally:
            conn.execute("PRAGMA wal_autocheckpoint=1000")
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self.connect().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else default

    @staticmethod
    def set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
        conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def size_bytes(self) -> int:
        """The index's size as its pages: the same figure however much of it is still in
        the write-ahead log (its file outgrows the pages while a run writes, and stays so
        until the last connection closes)."""
        conn = self.connect()
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        return int(pages * conn.execute("PRAGMA page_size").fetchone()[0])

    def close(self) -> None:
        with self._connections_lock:
            for conn in self._connections:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            self._connections.clear()
        self._local = threading.local()


class ProcessLock:
    """An advisory lock file held by one process at a time, naming the holder's pid. The
    lock goes with the process, however it ends (`flock`): a killed holder never leaves a
    stale lock behind."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def try_acquire(self) -> str | None:
        """Take the lock: None, or the holder's pid (as the lock file says it) if another
        process holds it."""
        private_dir(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            return holder
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return None

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


class WriterLock(ProcessLock):
    """One indexing process per vault at a time."""

    def acquire(self) -> None:
        holder = self.try_acquire()
        if holder is not None:
            raise IndexLocked(f"another vaultctx process (pid {holder}) is indexing this vault")

    def __enter__(self) -> WriterLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
