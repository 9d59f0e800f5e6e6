"""The backend of a vault: where its index is read from and published to, and where its
people, memory books and agent sessions are kept — chosen once, when the vault opens
(`open_backend`), so nothing above storage asks which one it has.

`LocalBackend` is the SQLite index and files beside it; `TeamBackend` a team's PostgreSQL
database (`database_url`), which the SQLite index is published to and every server of the
team reads. Another backend implements `Backend` and is chosen in `backend_kind`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from ..config import Config
from ..errors import ConfigError
from .books import OWN_FILE, VAULT_BOOK, MemoryBook, person_book
from .db import IndexDatabase, WriterLock
from .index_reads import IndexReads, SqliteReads
from .indexer import FULLTEXT_KEY, FULLTEXT_OFF, build_fulltext
from .people import NoTeam, People
from .sessions import SESSIONS_DIRNAME, SessionFiles, SessionStore

if TYPE_CHECKING:
    from .indexer import Indexer, IndexReport
    from .postgres.reads import PostgresReads
    from .postgres.sync import IndexerSeat


class Backend(Protocol):
    """What a vault reads, publishes and keeps through, whichever store holds it."""

    reads: IndexReads  # what select, related and refine read (writes go to the SQLite index)
    people: People
    sessions: SessionStore
    location: str  # where the index is read from, as `status` shows it
    fulltext: bool  # whether the SQLite index keeps its own full-text table
    shared: bool  # whether other servers (on other hosts) answer from it and keep its memories

    def index(self, indexer: Indexer, db: IndexDatabase, paths: list[str] | None) -> IndexReport:
        """Run `indexer` over the SQLite index `db` (its writer lock held), and publish."""
        ...

    def restore(self, db: IndexDatabase, writing: Callable[[], AbstractContextManager[Any]]) -> int:
        """Replace the SQLite index `db` with the backend's copy, inside `writing()` (its
        writer locks); the notes restored."""
        ...

    def memory_book(self, person: str | None, scope: str) -> MemoryBook:
        """What keeps the vault's memory file (with `scope` as its workspace scope) — or,
        with `person`, that person's own."""
        ...

    def sharing(self) -> Backend:
        """This backend over the same connections, for another vault object: its `close`
        leaves them open."""
        ...

    def close(self) -> None: ...


def backend_kind(config: Config) -> type[LocalBackend] | type[TeamBackend]:
    """The one choice of a backend: a team's database when `database_url` names one."""
    return LocalBackend if config.database_url is None else TeamBackend


def open_backend(config: Config, db: IndexDatabase) -> Backend:
    """The backend of a vault whose SQLite index is `db`."""
    return backend_kind(config)(config, db)


class LocalBackend:
    """The SQLite index, read where it is written; sessions as files beside it, memory
    files their own books, no team."""

    fulltext = True
    shared = False

    def __init__(self, config: Config, db: IndexDatabase, *, reads: IndexReads | None = None):
        self._owns_reads = reads is None
        if reads is None:
            _make_fulltext(db, config)
            reads = SqliteReads(db)
        self.reads = reads
        self.config = config
        self.db = db
        self.location = self.where(db.path, config)
        self.people: People = NoTeam()
        self.sessions: SessionStore = SessionFiles(db.path.parent / SESSIONS_DIRNAME)

    @staticmethod
    def where(db_path: Path, config: Config) -> str:
        return str(db_path)

    @staticmethod
    def has_index(db_path: Path) -> bool:
        """Whether an index may be there to open without creating one."""
        return db_path.exists()

    def index(self, indexer: Indexer, db: IndexDatabase, paths: list[str] | None) -> IndexReport:
        return indexer.run(paths)

    def restore(self, db: IndexDatabase, writing: Callable[[], AbstractContextManager[Any]]) -> int:
        raise ConfigError("no database to restore from: set database_url first")

    def memory_book(self, person: str | None, scope: str) -> MemoryBook:
        return OWN_FILE

    def sharing(self) -> LocalBackend:
        return LocalBackend(self.config, self.db, reads=self.reads)

    def close(self) -> None:
        if self._owns_reads:
            self.reads.close()


class TeamBackend:
    """A team's PostgreSQL database: the SQLite index published to it, every read from it,
    its people, the memory books and agent sessions every server of the team shares."""

    fulltext = False  # the database holds the postings; FTS5 is made if the team is left
    shared = True

    def __init__(
        self, config: Config, db: IndexDatabase, *, reads: PostgresReads | None = None
    ) -> None:
        from .postgres.reads import PostgresReads
        from .postgres.session_shelf import SessionShelf, SharedSessions
        from .postgres.team import Team

        assert config.database_url is not None  # backend_kind chose this one for it
        self.url = config.database_url
        self.config = config
        self.db = db
        self._owns_reads = reads is None
        self.pg: PostgresReads = PostgresReads(self.url) if reads is None else reads
        self.reads: IndexReads = self.pg
        self.location = self.where(db.path, config)
        self.people: People = Team(self.pg.query)
        self.sessions: SessionStore = SharedSessions(
            SessionShelf(self.pg), SessionFiles(db.path.parent / SESSIONS_DIRNAME)
        )
        self._seat: IndexerSeat | None = None  # once this one indexes or restores

    @staticmethod
    def where(db_path: Path, config: Config) -> str:
        """The database's URL, its password left out."""
        assert config.database_url is not None
        return _without_password(config.database_url)

    @staticmethod
    def has_index(db_path: Path) -> bool:
        return True  # the database's to tell (`Vault.require_index`)

    def _indexer_seat(self) -> IndexerSeat:
        from .postgres.sync import IndexerSeat

        if self._seat is None:
            self._seat = IndexerSeat(self.url)
        return self._seat

    def index(self, indexer: Indexer, db: IndexDatabase, paths: list[str] | None) -> IndexReport:
        """Index into the SQLite index, then publish what changed to the database, from the
        database's indexer seat (IndexLocked while another vaultctx holds it): one indexer
        at a time, and one taking over after another host indexed first goes on from the
        database's content."""
        from .postgres.sync import catch_up, publish

        pg = self._indexer_seat().take()
        catch_up(db, pg)
        report = indexer.run(paths)
        report.published = asdict(publish(db, pg, self.config.language))
        return report

    def restore(self, db: IndexDatabase, writing: Callable[[], AbstractContextManager[Any]]) -> int:
        from .postgres.sync import restore

        seat = self._indexer_seat()
        with writing():
            return restore(seat.take(), db)

    def memory_book(self, person: str | None, scope: str) -> MemoryBook:
        """The database's book, which every server of the team shares (made if new: the
        vault's with `scope` as its workspace scope)."""
        from .postgres.memory_book import MemoryBook as DatabaseBook

        if person is None:
            return DatabaseBook(self.pg, VAULT_BOOK, scope)
        return DatabaseBook(self.pg, person_book(person), person)

    def sharing(self) -> TeamBackend:
        return TeamBackend(self.config, self.db, reads=self.pg)

    def close(self) -> None:
        if self._seat is not None:
            self._seat.release()
        if self._owns_reads:
            self.pg.close()


def _make_fulltext(db: IndexDatabase, config: Config) -> None:
    """An index last written for a database (`database_url`) has an empty full-text table:
    read here, it is made now, once (or by the process indexing, if one is)."""
    if db.get_meta(FULLTEXT_KEY) != FULLTEXT_OFF:
        return
    lock = WriterLock(db.path.parent / "index.lock")
    if lock.try_acquire() is not None:
        return
    try:
        with db.transaction() as conn:
            build_fulltext(conn, config.language)
    finally:
        lock.release()


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
