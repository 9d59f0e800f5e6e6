"""Memory books: the memories every server of a team shares, in the database.

Each memory file of a vault (its `memory.db`, or one person's account file) is a book here:
its memories, and its conversations' scratchpads.
A server keeps its own file as the copy it searches (FTS5 and the vector mirror stay local
and unchanged), and `memory.sharing` keeps that copy in step: it reads what changed since its
last look before every read and write, and writes its own changes here in the same locked
transaction. A book's rows are the memory layer's rows as JSON, so that layer alone owns
their columns and migrations; this module only stores, versions and locks them.
"""

from __future__ import annotations

import contextlib
import sqlite3
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

from ..books import BookChanges, BookCopy, BookRow
from .reads import PostgresReads

# pg_advisory_xact_lock(class, key): the class of memory books' write locks.
_BOOK_LOCK = 0x766D656D  # "vmem"


class BookWrite:
    """A book inside its write lock (`books.BookWrite`)."""

    def __init__(self, conn: Any, name: str) -> None:
        self._conn = conn
        self._name = name

    def changes(self, since: int) -> BookChanges:
        conn, name = self._conn, self._name
        book_id, version = conn.execute(
            "SELECT book_id, version FROM memory_books WHERE name = %s", (name,)
        ).fetchone()
        # In the order the memories were first written, so every copy numbers them in the
        # same order as their writer did (ties in ranking go to the lower number).
        rows = conn.execute(
            "SELECT kind, id, row, model, vector, born_rowid FROM memory_rows"
            " WHERE book = %s AND version > %s ORDER BY born, born_rowid",
            (name, since),
        ).fetchall()
        forgotten = conn.execute(
            "SELECT kind, id FROM memory_forgotten WHERE book = %s AND version > %s",
            (name, since),
        ).fetchall()
        return BookChanges(
            book_id,
            int(version),
            [
                BookRow(kind, i, row, model, None if vec is None else bytes(vec), rowid)
                for kind, i, row, model, vec, rowid in rows
            ],
            [(kind, i) for kind, i in forgotten],
        )

    def save(self, rows: Sequence[BookRow], forgotten: Sequence[tuple[str, str]]) -> int:
        """Write rows and forget (kind, id)s as the book's next version; that version."""
        from psycopg.types.json import Json

        conn, name = self._conn, self._name
        (version,) = conn.execute(
            "UPDATE memory_books SET version = version + 1 WHERE name = %s RETURNING version",
            (name,),
        ).fetchone()
        with conn.cursor() as cur:
            if rows:
                cur.executemany(
                    "INSERT INTO memory_rows (book, kind, id, version, row, model, vector, born,"
                    " born_rowid) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
                    " ON CONFLICT (book, kind, id) DO UPDATE SET version = excluded.version,"
                    " row = excluded.row, model = excluded.model, vector = excluded.vector",
                    [
                        (
                            name,
                            r.kind,
                            r.id,
                            version,
                            Json(r.row),
                            r.model,
                            r.vector,
                            version,
                            r.rowid,
                        )
                        for r in rows
                    ],
                )
                cur.execute(
                    "DELETE FROM memory_forgotten WHERE book = %s"
                    " AND (kind, id) IN (SELECT * FROM unnest(%s::text[], %s::text[]))",
                    (name, [r.kind for r in rows], [r.id for r in rows]),
                )
            if forgotten:
                cur.execute(
                    "DELETE FROM memory_rows WHERE book = %s"
                    " AND (kind, id) IN (SELECT * FROM unnest(%s::text[], %s::text[]))",
                    (name, [k for k, _ in forgotten], [i for _, i in forgotten]),
                )
                cur.executemany(
                    "INSERT INTO memory_forgotten (book, kind, id, version) VALUES (%s, %s, %s, %s)"
                    " ON CONFLICT (book, kind, id) DO UPDATE SET version = excluded.version",
                    [(name, kind, i, version) for kind, i in forgotten],
                )
        return int(version)


class MemoryBook:
    """One book of the database (`books.MemoryBook`, `books.SharedBook`), made (with
    `scope` as its workspace scope) when first opened; `scope` is then the book's, whoever
    opens it later and wherever their vault is. A book dropped meanwhile
    (`Team.revoke(forget=True)`) is made anew at the next write, with a new id."""

    def __init__(self, reads: PostgresReads, name: str, scope: str) -> None:
        self.reads = reads
        self.name = name
        self.scope = scope
        self.scope = self._made(reads.query)

    def _made(self, query: Callable[..., list[tuple]]) -> str:
        """Make the book if it is not there; its scope."""
        query(
            "INSERT INTO memory_books (name, book_id, scope) VALUES (%s, %s, %s)"
            " ON CONFLICT (name) DO NOTHING",
            (self.name, uuid.uuid4().hex, self.scope),
        )
        return query("SELECT scope FROM memory_books WHERE name = %s", (self.name,))[0][0]

    def head(self) -> tuple[str, int]:
        """The book's id (new when it was made anew) and its current version."""
        rows = self.reads.query(
            "SELECT book_id, version FROM memory_books WHERE name = %s", (self.name,)
        )
        return (rows[0][0], int(rows[0][1])) if rows else ("", 0)

    @contextlib.contextmanager
    def writing(self) -> Iterator[BookWrite]:
        """The book's write lock, held (with one transaction) until the block ends: every
        server writes a book in turn, each after reading what the one before wrote."""
        with self.reads.transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_BOOK_LOCK, self.name))
            self._made(lambda sql, args: _rows(conn.execute(sql, args)))
            yield BookWrite(conn, self.name)

    def workspace_scope(self, local: str) -> str:
        return self.scope  # the book's, whichever host made it

    def holds_rows(self) -> bool:
        return self.head()[1] > 0

    def opened(self, copy: BookCopy) -> None:
        return None

    def transaction(self, copy: BookCopy) -> AbstractContextManager[sqlite3.Connection]:
        return copy.shared_transaction(self)

    def refresh(self, copy: BookCopy) -> None:
        """Catch up when another server wrote to the book (one indexed read when nothing
        changed)."""
        book_id, version = self.head()
        known_id, known_version = copy.known()
        if known_id != book_id or known_version < version:
            with copy.shared_transaction(self):
                pass


def _rows(cursor: Any) -> list[tuple]:
    return cursor.fetchall() if cursor.description is not None else []
