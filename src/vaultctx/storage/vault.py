"""`Vault`: one vault folder, its SQLite index, its embedding model and link graph.

The storage half of `vaultctx.Workspace`, which adds select, refine, memory and the agent
on top (`vaultctx/workspace.py`); nothing here knows about those layers.
"""

from __future__ import annotations

import datetime as _dt
import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlsplit, urlunsplit

from ..config import CONFIG_DIRNAME, Config, load_config
from ..errors import ConfigError, NoteNotFound, NotIndexed, VaultNotFound
from .db import IndexDatabase, WriterLock
from .embeddings import Embedder
from .graph import build_graph
from .index_reads import IndexReads, SqliteReads
from .indexer import FULLTEXT_KEY, FULLTEXT_OFF, Indexer, IndexReport, Progress, build_fulltext
from .watch import WATCH_ERROR_KEY, VaultWatcher

if TYPE_CHECKING:
    import networkx as nx

    from .postgres.memory_book import MemoryBook
    from .postgres.session_shelf import SessionShelf
    from .postgres.sync import IndexerSeat
    from .postgres.team import Team


@dataclass(frozen=True)
class IndexStatus:
    vault: str
    index_path: str
    notes: int
    blocks: int
    links: int
    dangling_links: int
    tags: int
    aliases: int
    vectors: int
    model: str | None
    index_bytes: int
    last_indexed: str | None
    notes_with_problems: int
    # The first of them by path, each {"path", "problems"}: what `status` names.
    problem_notes: list[dict[str, Any]] = field(default_factory=list)
    # Notes by the language they are read in: "" too short to tell, "unread" not yet indexed
    # by a vaultctx that reads languages.
    languages: dict[str, int] = field(default_factory=dict)
    watch_error: str | None = None  # the last failure of a watcher, until a run works again
    watch_error_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def never_indexed(cls, path: str | Path) -> IndexStatus:
        """The status of a vault with no index, told without making one."""
        root = Path(path).expanduser().resolve()
        config = load_config(root)
        index_path = (
            index_dir(root, config) / "index.db"
            if config.database_url is None
            else _without_password(config.database_url)
        )
        return cls(
            vault=str(root), index_path=str(index_path), notes=0, blocks=0, links=0,
            dangling_links=0, tags=0, aliases=0, vectors=0, model=None, index_bytes=0,
            last_indexed=None, notes_with_problems=0,
        )  # fmt: skip


class Vault:
    """A vault on disk and its index. Open with `Vault.open(path)`; use as a context
    manager or call `close()`."""

    def __init__(
        self,
        root: Path,
        config: Config,
        db: IndexDatabase,
        embedder: Embedder,
        *,
        reads: IndexReads | None = None,
    ) -> None:
        """`reads`: another vault object's, shared (and left open by `close`)."""
        self.root = root
        self.config = config
        self.db = db
        # What select, related and refine read from the index (the writes go through `db`):
        # the SQLite index, or the PostgreSQL database it is published to.
        self._owns_reads = reads is None
        if reads is None:
            if config.database_url is None:
                self._make_fulltext()
                reads = SqliteReads(db)
            else:
                reads = _postgres_reads(config.database_url)
        self.reads: IndexReads = reads
        self.embedder = embedder
        self._write_lock = threading.Lock()
        self._graph_cache: tuple[str | None, nx.DiGraph] | None = None
        self._watchers: list[VaultWatcher] = []
        self._seat: IndexerSeat | None = None  # with a database_url, once this one indexes

    def _make_fulltext(self) -> None:
        """An index last written for a database (`database_url`) has an empty full-text
        table: read here, it is made now, once (or by the process indexing, if one is)."""
        if self.db.get_meta(FULLTEXT_KEY) != FULLTEXT_OFF:
            return
        lock = WriterLock(self.db.path.parent / "index.lock")
        if lock.try_acquire() is not None:
            return
        try:
            with self.db.transaction() as conn:
                build_fulltext(conn, self.config.language)
        finally:
            lock.release()

    @classmethod
    def open(
        cls,
        path: str | Path,
        config: Config | dict[str, Any] | None = None,
        *,
        embedder: Embedder | None = None,
        create: bool = True,
    ) -> Self:
        """Open a vault folder, creating its index on first use.

        `config` is a `Config`, or a dict of overrides on top of the vault's config file.
        Pass an `embedder` to share one loaded model between workspaces; it then decides
        the model instead of the config. `create=False` opens only an index that exists
        (`NotIndexed` otherwise), leaving the folder as it was.
        """
        root = Path(path).expanduser()
        if not root.exists():
            raise VaultNotFound(f"vault not found: {root}")
        if not root.is_dir():
            raise VaultNotFound(f"vault is not a directory: {root}")
        root = root.resolve()
        if not isinstance(config, Config):
            config = load_config(root, config)
        if embedder is None:
            embedder = Embedder(config.embedding_model, backend=config.embedding_backend)
        db_path = index_dir(root, config) / "index.db"
        if not create and config.database_url is None and not db_path.exists():
            raise not_indexed(root)
        return cls(root, config, IndexDatabase(db_path), embedder)

    # --- indexing ------------------------------------------------------------------------

    def index(
        self,
        *,
        embed: bool | None = None,
        progress: Progress | None = None,
        paths: list[str] | None = None,
    ) -> IndexReport:
        """Bring the index up to date with the vault; only changed notes are re-parsed.

        `embed=False` indexes text and links only. `paths` limits the run to those
        vault-relative files (created, edited or deleted), as a file watcher reports them.
        """
        do_embed = self.config.embed if embed is None else embed
        with self._write_lock, WriterLock(self.db.path.parent / "index.lock"):
            indexer = Indexer(
                self.root,
                self.db,
                chunk_tokens=self.config.chunk_tokens,
                embedder=self.embedder if do_embed else None,
                progress=progress,
                workers=self.config.index_workers,
                language=self.config.language,
                fulltext=self.config.database_url is None,
            )
            if self.config.database_url is None:
                return indexer.run(paths)
            return self._index_and_publish(indexer, paths, self.config.database_url)

    def _index_and_publish(
        self, indexer: Indexer, paths: list[str] | None, url: str
    ) -> IndexReport:
        """Index into the SQLite index, then publish what changed to the database, from the
        database's indexer seat (IndexLocked while another vaultctx holds it): one indexer
        at a time, and one taking over after another host indexed first goes on from the
        database's content."""
        from .postgres.sync import IndexerSeat, catch_up, publish

        if self._seat is None:
            self._seat = IndexerSeat(url)
        pg = self._seat.take()
        catch_up(self.db, pg)
        report = indexer.run(paths)
        report.published = asdict(publish(self.db, pg, self.config.language))
        return report

    @property
    def team(self) -> Team | None:
        """The people of the database (`database_url`); None on the SQLite index."""
        if self.config.database_url is None:
            return None
        from .postgres.team import Team

        return Team(self.reads.query)  # type: ignore[attr-defined]  # database_url: PostgresReads

    def memory_book(self, person: str | None = None) -> MemoryBook | None:
        """The database's book of the vault's memories — or of one `person`'s own — which
        every server of the team shares (made if new: the vault's with this host's path as
        its workspace scope); None on the SQLite index."""
        if self.config.database_url is None:
            return None
        from .postgres.memory_book import VAULT_BOOK, MemoryBook, person_book

        if person is None:
            return MemoryBook(self.reads, VAULT_BOOK, str(self.root))  # type: ignore[arg-type]  # database_url: PostgresReads
        return MemoryBook(self.reads, person_book(person), person)  # type: ignore[arg-type]  # database_url: PostgresReads

    def session_shelf(self) -> SessionShelf | None:
        """The agent sessions of the database (`database_url`), which every server of the
        team resumes; None on the SQLite index (sessions are files there)."""
        if self.config.database_url is None:
            return None
        from .postgres.session_shelf import SessionShelf

        return SessionShelf(self.reads)  # type: ignore[arg-type]  # database_url: PostgresReads

    def restore_from_database(self) -> int:
        """Replace the SQLite index with the database's (`database_url`), vectors included:
        the way back from PostgreSQL, or a new host's start. Returns the notes restored."""
        from .postgres.sync import IndexerSeat, restore

        if self.config.database_url is None:
            raise ConfigError("no database to restore from: set database_url first")
        if self._seat is None:
            self._seat = IndexerSeat(self.config.database_url)
        with self._write_lock, WriterLock(self.db.path.parent / "index.lock"):
            return restore(self._seat.take(), self.db)

    @property
    def generation(self) -> str | None:
        """Changes whenever the index content changes: a key for in-memory caches."""
        return self.reads.meta("generation")

    def require_index(self) -> None:
        """Refuse a vault with nothing indexed; a run killed midway still left notes to use."""
        if self.reads.meta("last_indexed") is None and not self.reads.has_notes():
            raise not_indexed(self.root)

    # --- reading -------------------------------------------------------------------------

    def status(self, reads: IndexReads | None = None) -> IndexStatus:
        """What `vaultctx status` shows, counted in `reads` (a reader's view; default: the
        whole index)."""
        reads = self.reads if reads is None else reads
        model = reads.meta("embedding_model")
        last = reads.meta("last_indexed")
        watch_error = json.loads(self.db.get_meta(WATCH_ERROR_KEY) or "{}")
        counts = reads.index_counts(model, self.config.language)
        return IndexStatus(
            vault=str(self.root),
            # where the index is read from: the database (its password left out), or the file
            index_path=(
                str(self.db.path)
                if self.config.database_url is None
                else _without_password(self.config.database_url)
            ),
            model=model,
            index_bytes=self.db.size_bytes(),
            last_indexed=_iso(float(last)) if last else None,
            watch_error=watch_error.get("error"),
            watch_error_at=_iso(watch_error["at"]) if "at" in watch_error else None,
            **counts,
        )

    def graph(self) -> nx.DiGraph:
        """The wiki-link graph (nodes: note paths), rebuilt only when the index changed."""
        generation = self.generation
        cached = self._graph_cache
        if cached is None or cached[0] != generation:
            cached = (generation, build_graph(*self.reads.link_rows()))
            self._graph_cache = cached
        return cached[1]

    def touch(self, note: str, *, kind: str = "touch") -> str:
        """Record that the user opened or worked on `note` (path, file name, title or alias):
        the next selects favour the notes it links to, the most recent touch most. Returns
        the note's path."""
        path, note_id = self.resolve_note(note)
        self.reads.record_access(note_id, time.time(), kind)
        return path

    def resolve_note(self, note: str) -> tuple[str, int]:
        """`resolve_note` over this vault's whole index."""
        return resolve_note(self.reads, note, self.root)

    # --- live re-index -------------------------------------------------------------------

    def watch(
        self,
        *,
        embed: bool | None = None,
        debounce_ms: int = 150,
        catch_up: bool = True,
        on_index: Callable[[IndexReport], None] | None = None,
        index: Callable[..., IndexReport] | None = None,
    ) -> VaultWatcher:
        """Re-index notes as they are saved, in a background thread, while queries run.

        Returns the started watcher; call its `stop()` (or `close()` this vault). With
        `catch_up`, edits made while nothing watched are indexed first. `on_index(report)`
        runs in the watcher's thread after each run that changed the index; `index` is what
        a run calls instead of `self.index`.
        """
        watcher = VaultWatcher(
            self,
            embed=embed,
            debounce_ms=debounce_ms,
            catch_up=catch_up,
            on_index=on_index,
            index=index,
        )
        self._watchers.append(watcher)
        return watcher.start()

    # --- lifecycle -----------------------------------------------------------------------

    def stop_watching(self) -> None:
        """Stop every watcher this vault started."""
        for watcher in self._watchers:
            watcher.stop()
        self._watchers.clear()

    def close(self) -> None:
        self.stop_watching()
        if self._seat is not None:
            self._seat.release()
        if self._owns_reads:
            self.reads.close()
        self.db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.root)!r})"


def not_indexed(root: Path) -> NotIndexed:
    """The one answer for a vault with nothing indexed."""
    return NotIndexed(f"{root} has not been indexed yet: run `vaultctx index`")


def note_not_found(note: str, root: Path) -> NoteNotFound:
    """The one answer for a note that is not there, or that the reader may not see."""
    return NoteNotFound(f"no note named {note!r} in {root}")


def resolve_note(reads: IndexReads, note: str, root: Path) -> tuple[str, int]:
    """Find a note in `reads` by name, never by pattern: its vault path (with or without
    .md), its file name, its title; then the same ignoring case; then an alias. Among notes
    of one name the shortest path wins, as Obsidian resolves links."""
    wanted = note.strip().replace("\\", "/").removeprefix("./")
    if not wanted:
        raise NoteNotFound("no note named '': give a path, file name, title or alias")
    names = [wanted] if wanted.lower().endswith(".md") else [wanted, f"{wanted}.md"]
    file_names = [f"/{name}" for name in names if "/" not in name]
    for any_case in (False, True):  # exact first, then any case
        tries = [("path", name) for name in names] + [("file", f) for f in file_names]
        for by, name in [*tries, ("title", wanted)]:
            if found := reads.find_note(by, name, any_case):
                return found
    if found := reads.find_note("alias", wanted, True):
        return found
    raise note_not_found(note, root)


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _postgres_reads(url: str) -> IndexReads:
    from .postgres.reads import PostgresReads

    return PostgresReads(url)


def _iso(timestamp: float) -> str:
    return _dt.datetime.fromtimestamp(timestamp, _dt.UTC).isoformat(timespec="seconds")


def index_dir(root: Path, config: Config) -> Path:
    if config.index_dir:
        path = Path(config.index_dir).expanduser()
        return path if path.is_absolute() else root / path
    return root / CONFIG_DIRNAME
