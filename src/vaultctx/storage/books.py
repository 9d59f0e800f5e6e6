"""Memory books: where a memory file's rows are kept besides the file.

A memory file (a vault's `memory.db`, or one person's account file) is searched where it is
— FTS5 and the vector mirror stay local — and its book decides how its transactions run:
`OwnFile` (the SQLite index) leaves the file alone, and a database's book
(`postgres.memory_book.MemoryBook`) has every write take the book's lock and carry what
changed, so every server of a team keeps a copy in step (`memory.sharing.BookSharing` does
the copying). The memory layer holds only these protocols, never a database's class.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

VAULT_BOOK = "vault"  # the vault's memory.db


def person_book(name: str) -> str:
    """The book of a team member's own memories (their account file)."""
    return f"person:{name}"


class BookRow(NamedTuple):
    """One row of a book: its kind (a memory, say) and id, its columns, its vector's model
    and float32 bytes (or None), and its row number in the file of the server that wrote it."""

    kind: str
    id: str
    row: dict[str, Any]
    model: str | None
    vector: bytes | None
    rowid: int


@dataclass(frozen=True)
class BookChanges:
    """What a book holds newer than some version: rows written, (kind, id)s forgotten."""

    book_id: str
    version: int
    rows: list[BookRow]
    forgotten: list[tuple[str, str]]


class BookWrite(Protocol):
    """A book inside its write lock: what changed since a version, and the writing of rows."""

    def changes(self, since: int) -> BookChanges: ...

    def save(self, rows: Sequence[BookRow], forgotten: Sequence[tuple[str, str]]) -> int:
        """Write rows and forget (kind, id)s as the book's next version; that version."""
        ...


class SharedBook(Protocol):
    """A book other servers write too, as the copy keeping in step with it reads it."""

    scope: str  # its workspace scope: the same on every host, wherever its vault is

    def head(self) -> tuple[str, int]:
        """The book's id (new when it was made anew) and its current version."""
        ...

    def writing(self) -> AbstractContextManager[BookWrite]:
        """The book's write lock, held (with one transaction) until the block ends."""
        ...


class BookCopy(Protocol):
    """A memory file as its book runs it (`memory.sharing.BookSharing`)."""

    def known(self) -> tuple[str, int]:
        """The book this copy last caught up with, and its version then."""
        ...

    def own_transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """A transaction of the file alone."""
        ...

    def shared_transaction(self, book: SharedBook) -> AbstractContextManager[sqlite3.Connection]:
        """A transaction of the file inside `book`'s write lock, caught up with it first
        and sending what it changed."""
        ...

    def leave_book(self) -> None:
        """The file is this host's own again (a copy of a book left behind)."""
        ...


class MemoryBook(Protocol):
    """Where a memory file's rows are kept besides the file: how its transactions and
    reads run, and the scope its workspace memories take."""

    def workspace_scope(self, local: str) -> str:
        """The workspace scope of the file's memories, `local` being this host's."""
        ...

    def holds_rows(self) -> bool:
        """Whether the book holds memories written elsewhere (an account file is made
        for them)."""
        ...

    def opened(self, copy: BookCopy) -> None:
        """`copy` was just opened with this book."""
        ...

    def transaction(self, copy: BookCopy) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction of `copy`."""
        ...

    def refresh(self, copy: BookCopy) -> None:
        """Before a read: bring `copy` up to what the book holds."""
        ...


class OwnFile:
    """The book of a memory file kept by this host alone: the file itself."""

    def workspace_scope(self, local: str) -> str:
        return local

    def holds_rows(self) -> bool:
        return False

    def opened(self, copy: BookCopy) -> None:
        copy.leave_book()  # a copy opened without its database is this host's file again

    def transaction(self, copy: BookCopy) -> AbstractContextManager[sqlite3.Connection]:
        return copy.own_transaction()

    def refresh(self, copy: BookCopy) -> None:
        return None


OWN_FILE = OwnFile()
