"""A memory file kept in step with its book in a team's database (`database_url`).

The file stays the copy this server searches — FTS5, the vector mirror and every statement
of the memory layer are unchanged — and the database holds the book every server shares
(`storage.books.MemoryBook`: its implementations decide which transaction runs). Each
write takes the book's lock, first applies what other servers wrote since this copy last
looked, then runs, and sends the rows it changed (caught by triggers on this connection) as
the book's next version, committed in the database before the file. A read first catches up
when the book moved on. A memory forgotten anywhere is erased from every copy, its words
merged out of FTS5 like a local hard delete. A conversation's scratchpad notes travel the
same way.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterator

from ..storage.books import BookChanges, BookRow, BookWrite, MemoryBook, SharedBook
from ..storage.db import IndexDatabase, map_sqlite_error
from .models import Tier

# What this connection's statements changed — memories by id, scratchpad notes by
# (session, key) — which a write sends to the book. No key and no OR IGNORE: an upsert's
# conflict clause overrides a trigger's own, so a row changed twice is listed twice, and
# read once.
_CAPTURE = """
    CREATE TEMP TABLE IF NOT EXISTS vx_changed (kind TEXT NOT NULL, id TEXT NOT NULL);
    CREATE TEMP TRIGGER IF NOT EXISTS vx_changed_insert AFTER INSERT ON main.memories
    BEGIN INSERT INTO vx_changed VALUES ('memory', new.id); END;
    CREATE TEMP TRIGGER IF NOT EXISTS vx_changed_update AFTER UPDATE ON main.memories
    BEGIN INSERT INTO vx_changed VALUES ('memory', new.id); END;
    CREATE TEMP TRIGGER IF NOT EXISTS vx_changed_delete AFTER DELETE ON main.memories
    BEGIN INSERT INTO vx_changed VALUES ('memory', old.id); END;
    CREATE TEMP TRIGGER IF NOT EXISTS vx_changed_vector AFTER INSERT ON main.memory_vectors
    BEGIN INSERT INTO vx_changed
        SELECT 'memory', id FROM main.memories WHERE rowid = new.memory_rowid; END;
    CREATE TEMP TRIGGER IF NOT EXISTS vx_changed_vector_update
    AFTER UPDATE ON main.memory_vectors
    BEGIN INSERT INTO vx_changed
        SELECT 'memory', id FROM main.memories WHERE rowid = new.memory_rowid; END;
    CREATE TEMP TRIGGER IF NOT EXISTS vx_changed_pad_insert AFTER INSERT ON main.scratchpad
    BEGIN INSERT INTO vx_changed VALUES ('scratchpad', json_array(new.session_id, new.key));
    END;
    CREATE TEMP TRIGGER IF NOT EXISTS vx_changed_pad_update AFTER UPDATE ON main.scratchpad
    BEGIN INSERT INTO vx_changed VALUES ('scratchpad', json_array(new.session_id, new.key));
    END;
    CREATE TEMP TRIGGER IF NOT EXISTS vx_changed_pad_delete AFTER DELETE ON main.scratchpad
    BEGIN INSERT INTO vx_changed VALUES ('scratchpad', json_array(old.session_id, old.key));
    END;
"""
MEMORY, SCRATCHPAD = "memory", "scratchpad"  # the kinds of a book's rows


class BookSharing:
    """The sharing half of `MemoryRepository`: its transactions and reads as its book
    (`storage.books.BookCopy`) runs them."""

    db: IndexDatabase
    book: MemoryBook
    local_scope: str | None  # this host's workspace scope, when it differs from the book's
    # A copy of a book that was dropped and made anew: merged into the new one (the vault's
    # memories, which a lost database must not take with it), or dropped (a person's, which
    # `team revoke --forget` erased on purpose).
    merges_stale_copy: bool
    connect: Callable[[], sqlite3.Connection]
    _bump: Callable[[sqlite3.Connection], int]
    _erase_leftovers: Callable[[], None]

    def refresh(self) -> None:
        """Catch up with the book when another server wrote to it."""
        self.book.refresh(self)

    def known(self) -> tuple[str, int]:
        return _known(self.connect())

    @contextlib.contextmanager
    def own_transaction(self) -> Iterator[sqlite3.Connection]:
        self.connect()
        with self.db.transaction() as conn:
            yield conn

    @contextlib.contextmanager
    def shared_transaction(self, book: SharedBook) -> Iterator[sqlite3.Connection]:
        conn = self.connect()
        conn.executescript(_CAPTURE)  # this connection's, once (IF NOT EXISTS after that)
        forgotten = 0
        try:
            with book.writing() as write:
                try:
                    conn.execute("BEGIN IMMEDIATE")
                except sqlite3.OperationalError as exc:
                    raise map_sqlite_error(exc, self.db.path) from exc
                forgotten = self._catch_up(conn, write, book)
                yield conn
                self._send(conn, write)
            # the database committed: the file now, or (if that fails) catch up next time
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        if forgotten:
            self._erase_leftovers()

    def _catch_up(self, conn: sqlite3.Connection, write: BookWrite, book: SharedBook) -> int:
        """Apply what the book holds that this copy lacks; memories forgotten."""
        known_id, known_version = _known(conn)
        changes = write.changes(known_version if known_id else 0)
        first = known_id != changes.book_id
        forgotten = 0
        if first and known_id:  # a copy of the book as it was before it was made anew
            changes = write.changes(0)
            if not self.merges_stale_copy:
                forgotten = conn.execute("DELETE FROM memories").rowcount
                conn.execute("DELETE FROM scratchpad")
        forgotten += self._apply(conn, changes)
        conn.execute("DELETE FROM temp.vx_changed")
        if first:  # the rest of this copy joins the book, its workspace memories its scope
            _rescope(conn, self.local_scope, book.scope)
            conn.execute("INSERT INTO temp.vx_changed SELECT 'memory', id FROM memories")
            conn.execute(
                "INSERT INTO temp.vx_changed"
                " SELECT 'scratchpad', json_array(session_id, key) FROM scratchpad"
            )
            IndexDatabase.set_meta(conn, "book_scope", book.scope)
        IndexDatabase.set_meta(conn, "book_id", changes.book_id)
        IndexDatabase.set_meta(conn, "book_version", str(changes.version))
        return forgotten

    def _apply(self, conn: sqlite3.Connection, changes: BookChanges) -> int:
        known = _columns(conn)
        for kind, memory_id, row, model, vector, _ in changes.rows:
            if kind == SCRATCHPAD:
                conn.execute(
                    "INSERT INTO scratchpad (session_id, key, text, updated_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT (session_id, key) DO UPDATE SET"
                    " text = excluded.text, updated_at = excluded.updated_at",
                    (row["session_id"], row["key"], row["text"], row["updated_at"]),
                )
                continue
            if row.get("mkey") is not None:  # the book's memory of this key wins over ours
                conn.execute(
                    "DELETE FROM memories WHERE tier = ? AND scope = ? AND mkey = ? AND id != ?",
                    (row["tier"], row["scope"], row["mkey"], memory_id),
                )
            # the columns both this file and the writer's vaultctx have; the rest default
            columns = [c for c in known if c in row]
            names, marks = ", ".join(columns), ", ".join("?" * len(columns))
            updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c != "id")
            rowid = conn.execute(
                f"INSERT INTO memories ({names}) VALUES ({marks})"
                f" ON CONFLICT (id) DO UPDATE SET {updates} RETURNING rowid",
                [row[c] for c in columns],
            ).fetchone()[0]
            if vector is None:
                conn.execute("DELETE FROM memory_vectors WHERE memory_rowid = ?", (rowid,))
            else:
                conn.execute(
                    "INSERT INTO memory_vectors (memory_rowid, model, vector) VALUES (?, ?, ?)"
                    " ON CONFLICT (memory_rowid) DO UPDATE SET model = excluded.model,"
                    " vector = excluded.vector",
                    (rowid, model, vector),
                )
        forgotten = 0
        for kind, forgotten_id in changes.forgotten:
            if kind == SCRATCHPAD:
                conn.execute(
                    "DELETE FROM scratchpad WHERE session_id = ? AND key = ?",
                    json.loads(forgotten_id),
                )
            else:
                forgotten += conn.execute(
                    "DELETE FROM memories WHERE id = ?", (forgotten_id,)
                ).rowcount
        if changes.rows or forgotten:
            self._bump(conn)  # the mirror reloads
        return forgotten

    def leave_book(self) -> None:
        """A copy opened without its book (the team's database left behind) is this host's
        file again: its workspace memories take this host's scope back."""
        conn = self.connect()
        meta = dict(conn.execute("SELECT key, value FROM meta WHERE key = 'book_scope'"))
        if "book_scope" not in meta or self.local_scope is None:
            return
        with self.db.transaction() as conn:
            _rescope(conn, meta["book_scope"], self.local_scope)
            conn.execute("DELETE FROM meta WHERE key IN ('book_id', 'book_version', 'book_scope')")
            self._bump(conn)

    def _send(self, conn: sqlite3.Connection, write: BookWrite) -> None:
        """The memories and scratchpad notes this transaction changed, as the book's next
        version."""
        if conn.execute("SELECT 1 FROM temp.vx_changed LIMIT 1").fetchone() is None:
            return
        columns = _columns(conn)
        selected = ", ".join(f"m.{c}" for c in columns)
        rows = conn.execute(
            f"SELECT {selected}, v.model, v.vector, m.rowid"
            " FROM (SELECT DISTINCT id FROM temp.vx_changed WHERE kind = 'memory') c"
            " JOIN memories m ON m.id = c.id"
            " LEFT JOIN memory_vectors v ON v.memory_rowid = m.rowid ORDER BY m.rowid"
        ).fetchall()
        n = len(columns)
        present = [
            BookRow(MEMORY, row[columns.index("id")], dict(zip(columns, row[:n], strict=True)),
                    *row[n:])
            for row in rows
        ]  # fmt: skip
        present += [
            BookRow(SCRATCHPAD, pad_id, {"session_id": session_id, "key": key, "text": text,
                                         "updated_at": at}, None, None, 0)
            for pad_id, session_id, key, text, at in conn.execute(
                "SELECT DISTINCT c.id, p.session_id, p.key, p.text, p.updated_at"
                " FROM temp.vx_changed c JOIN scratchpad p"
                " ON c.id = json_array(p.session_id, p.key) WHERE c.kind = 'scratchpad'"
            )
        ]  # fmt: skip
        forgotten = conn.execute(
            "SELECT DISTINCT kind, id FROM temp.vx_changed c WHERE CASE kind"
            " WHEN 'memory' THEN id NOT IN (SELECT id FROM memories)"
            " ELSE id NOT IN (SELECT json_array(session_id, key) FROM scratchpad) END"
        ).fetchall()
        version = write.save(present, forgotten)
        conn.execute("DELETE FROM temp.vx_changed")
        IndexDatabase.set_meta(conn, "book_version", str(version))


def _rescope(conn: sqlite3.Connection, old: str | None, new: str) -> None:
    """Workspace memories of scope `old` move to `new` (a vault's path differs from host to
    host); where both hold a key, `new`'s memory stays."""
    if old is None or old == new:
        return
    workspace = Tier.WORKSPACE.value
    conn.execute(
        "DELETE FROM memories WHERE tier = ? AND scope = ? AND mkey IN"
        " (SELECT mkey FROM memories WHERE tier = ? AND scope = ?)",
        (workspace, old, workspace, new),
    )
    conn.execute(
        "UPDATE memories SET scope = ? WHERE tier = ? AND scope = ?", (new, workspace, old)
    )


def _known(conn: sqlite3.Connection) -> tuple[str, int]:
    """The book this copy last caught up with, and its version then."""
    meta = dict(
        conn.execute("SELECT key, value FROM meta WHERE key IN ('book_id', 'book_version')")
    )
    return meta.get("book_id", ""), int(meta.get("book_version", 0))


def _columns(conn: sqlite3.Connection) -> list[str]:
    """The memory columns a book carries: all but the file's own row number."""
    return [row[1] for row in conn.execute("PRAGMA main.table_info(memories)") if row[1] != "rowid"]
