"""`Vault`: one vault folder, its SQLite index, its embedding model and link graph.

The storage half of `vaultctx.Workspace`, which adds select, refine, memory and the agent
on top (`vaultctx/workspace.py`); nothing here knows about those layers.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Self

from ..config import CONFIG_DIRNAME, Config, load_config
from ..errors import IndexLocked, NoteNotFound, NotIndexed, VaultctxError, VaultNotFound
from .backend import Backend, backend_kind, open_backend
from .books import MemoryBook
from .db import IndexDatabase, WriterLock
from .embeddings import Embedder, model_suggestion
from .graph import LinkGraph, build_graph
from .index_reads import IndexReads
from .indexer import Indexer, IndexReport, Progress
from .people import People
from .sessions import SessionStore
from .vector_models import Meta, VectorModels, embedder_of
from .watch import WATCH_ERROR_KEY, VaultWatcher

log = logging.getLogger(__name__)
_SWITCH_JOIN_S = 30.0  # a slice and the batch it ends on, on a slow machine
_LOCKED_RETRY_S = 1.0
BACKGROUND_NICE = 10
# A background run's share of a model switch (`Vault.switch_in_background`): a saved note
# waits at most about this long (and the batch it ends on) for the writer lock.
REEMBED_SLICE_S = 2.0


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
    model: str | None  # the model whose vectors answer (and whose encoder reads the query)
    index_bytes: int
    last_indexed: str | None
    notes_with_problems: int
    # The first of them by path, each {"path", "problems"}: what `status` names.
    problem_notes: list[dict[str, Any]] = field(default_factory=list)
    # Notes by the language they are read in: "" too short to tell, "unread" not yet indexed
    # by a vaultctx that reads languages.
    languages: dict[str, int] = field(default_factory=dict)
    # The configured model while the index switches to it (`vector_models`), and the blocks
    # that have its vector so far: it answers once they are all the blocks.
    pending_model: str | None = None
    pending_vectors: int = 0
    watch_error: str | None = None  # the last failure of a watcher, until a run works again
    watch_error_at: str | None = None
    # The multilingual model, when most notes are in languages the model does not read well.
    model_suggestion: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def never_indexed(cls, path: str | Path) -> IndexStatus:
        """The status of a vault with no index, told without making one."""
        root = Path(path).expanduser().resolve()
        config = load_config(root)
        index_path = backend_kind(config).where(index_dir(root, config) / "index.db", config)
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
        backend: Backend | None = None,
    ) -> None:
        """`backend`: what the index is read from and published to, chosen from `config`
        unless given (another vault object's `Backend.sharing()`)."""
        self.root = root
        self.config = config
        self.db = db
        self.backend = open_backend(config, db) if backend is None else backend
        self.embedder = embedder
        self._write_lock = threading.Lock()
        self._graph_cache: tuple[str | None, LinkGraph] | None = None
        self._watchers: list[VaultWatcher] = []
        self._switching: threading.Thread | None = None
        self._stop_switching = threading.Event()
        self._switch_lock = threading.Lock()

    @property
    def reads(self) -> IndexReads:
        """What select, related and refine read from the index (the writes go through
        `db`): the SQLite index, or the database it is published to."""
        return self.backend.reads

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
        if not create and not backend_kind(config).has_index(db_path):
            raise not_indexed(root)
        return cls(root, config, IndexDatabase(db_path), embedder)

    # --- indexing ------------------------------------------------------------------------

    def index(
        self,
        *,
        embed: bool | None = None,
        progress: Progress | None = None,
        paths: list[str] | None = None,
        reembed_seconds: float | None = None,
    ) -> IndexReport:
        """Bring the index up to date with the vault; only changed notes are re-parsed.

        `embed=False` indexes text and links only. `paths` limits the run to those
        vault-relative files (created, edited or deleted), as a file watcher reports them.
        While the index switches to the configured model (`vector_models`), a run spends
        at most `reembed_seconds` on its vectors (None: until the switch; 0: none).
        """
        do_embed = self.config.embed if embed is None else embed
        with self._writing():
            indexer = Indexer(
                self.root,
                self.db,
                chunk_tokens=self.config.chunk_tokens,
                embedder=self.embedder if do_embed else None,
                progress=progress,
                workers=self.config.index_workers,
                language=self.config.language,
                fulltext=self.backend.fulltext,
                attachment_max_bytes=int(self.config.attachment_max_mb * 1_000_000),
                answering_embedder=lambda model: self.answering_embedder(model, self.db.get_meta),
                reembed_seconds=reembed_seconds,
            )
            return self.backend.index(indexer, self.db, paths)

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """The index's writer locks: this process's, then every process's."""
        with self._write_lock, WriterLock(self.db.path.parent / "index.lock"):
            yield

    @property
    def team(self) -> People:
        """The people of the backend: a team's database's, or nobody on the SQLite index."""
        return self.backend.people

    @property
    def sessions(self) -> SessionStore:
        """Where the agent's sessions are kept: files beside the index, or a team's
        database, which every server of the team resumes."""
        return self.backend.sessions

    def memory_book(self, person: str | None = None) -> MemoryBook:
        """What keeps the vault's memory file — or one `person`'s own: on a team's
        database, the book every server of the team shares (made if new: the vault's with
        this host's path as its workspace scope)."""
        return self.backend.memory_book(person, str(self.root))

    def restore_from_database(self) -> int:
        """Replace the SQLite index with the database's (`database_url`), vectors included:
        the way back from PostgreSQL, or a new host's start. Returns the notes restored."""
        return self.backend.restore(self.db, self._writing)

    @property
    def generation(self) -> str | None:
        """Changes whenever the index content changes: a key for in-memory caches."""
        return self.reads.meta("generation")

    def require_index(self) -> None:
        """Refuse a vault with nothing indexed; a run killed midway still left notes to use."""
        if self.reads.meta("last_indexed") is None and not self.reads.has_notes():
            raise not_indexed(self.root)

    # --- reading -------------------------------------------------------------------------

    def answering_embedder(self, model: str, meta: Meta | None = None) -> Embedder | None:
        """The encoder of `model`'s vectors: the configured one, or the one they were made
        with (`vector_models.embedder_of`, read from `meta`: the index's by default)."""
        if model == self.embedder.model_id:
            return self.embedder
        return embedder_of(model, meta or self.reads.meta, self.config.embedding_backend)

    def query_model(self, reads: IndexReads | None = None) -> tuple[str, Embedder] | None:
        """The model whose vectors answer in `reads` (default: the whole index) and the
        encoder the query is embedded with; None when there are no vectors to query."""
        reads = self.reads if reads is None else reads
        model = VectorModels.of(reads.meta).answering
        if model is None:
            return None
        embedder = self.answering_embedder(model, reads.meta)
        return None if embedder is None else (model, embedder)

    def status(self, reads: IndexReads | None = None) -> IndexStatus:
        """What `vaultctx status` shows, counted in `reads` (a reader's view; default: the
        whole index)."""
        reads = self.reads if reads is None else reads
        models = VectorModels.of(reads.meta)
        last = reads.meta("last_indexed")
        watch_error = json.loads(self.db.get_meta(WATCH_ERROR_KEY) or "{}")
        counts = reads.index_counts(models.answering, self.config.language)
        pending_vectors = 0
        if models.pending is not None:
            pending_vectors = reads.index_counts(models.pending, self.config.language)["vectors"]
        return IndexStatus(
            model_suggestion=model_suggestion(counts.get("languages", {}), self.config),
            vault=str(self.root),
            # where the index is read from: the database (its password left out), or the file
            index_path=self.backend.location,
            model=models.answering,
            pending_model=models.pending,
            pending_vectors=pending_vectors,
            index_bytes=self.db.size_bytes(),
            last_indexed=_iso(float(last)) if last else None,
            watch_error=watch_error.get("error"),
            watch_error_at=_iso(watch_error["at"]) if "at" in watch_error else None,
            **counts,
        )

    def graph(self) -> LinkGraph:
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
        """Re-index notes as they are saved, in a background thread, while queries run; a
        change of embedding model is completed beside it (`switch_in_background`).

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
            switch=lambda: self.switch_in_background(index),
        )
        self._watchers.append(watcher)
        return watcher.start()

    def switch_in_background(
        self, index: Callable[..., IndexReport] | None = None
    ) -> threading.Thread | None:
        """While the index answers with another model than the configured one, make the
        configured model's vectors in a daemon thread, a slice per run (`REEMBED_SLICE_S`),
        until the switch: what a process that does not watch the vault (the MCP server)
        does instead of a watcher. `index` is what a run calls instead of `self.index`.
        None when there is nothing to switch (or embedding is off)."""
        answering = VectorModels.of(self.db.get_meta).answering
        if not self.config.embed or answering in (None, self.embedder.model_id):
            return None
        with self._switch_lock:  # the watcher's thread and the process's may both ask
            if self._switching is None or not self._switching.is_alive():
                run = self.index if index is None else index
                self._switching = threading.Thread(
                    target=self._switch, args=(run,), name="vaultctx-switch", daemon=True
                )
                self._switching.start()
            return self._switching

    def _switch(self, run: Callable[..., IndexReport]) -> None:
        background_priority()
        while not self._stop_switching.is_set():
            try:
                report = run(embed=True, paths=[], reembed_seconds=REEMBED_SLICE_S)
            except IndexLocked:  # another process indexes (and may switch): ask again later
                self._stop_switching.wait(_LOCKED_RETRY_S)
                continue
            except VaultctxError as exc:
                log.warning("switching embedding models stopped: %s", exc)
                return
            if report.embed_error or not report.reembed_left:
                return

    # --- lifecycle -----------------------------------------------------------------------

    def stop_watching(self) -> None:
        """Stop every watcher this vault started, and a switch of models in the background."""
        for watcher in self._watchers:
            watcher.stop()
        self._watchers.clear()
        if self._switching is not None:
            self._stop_switching.set()
            self._switching.join(_SWITCH_JOIN_S)
            self._switching = None
            self._stop_switching.clear()

    def close(self) -> None:
        self.stop_watching()
        self.backend.close()
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
    """The one answer for a note that is not there, or that the reader may not see. The
    vault is named by its folder, not its path: the answer also goes to team members and to
    a model, who learn nothing of the server's disk from it."""
    return NoteNotFound(f"no note named {note!r} in {root.name or root}")


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


def background_priority() -> None:
    """Lower this thread's CPU priority by `BACKGROUND_NICE` below the process's (Linux: a
    thread's own nice value, inherited by the threads it starts, such as the encoder's
    workers): work nobody waits for yields the cores to the queries that run beside it, and
    takes them whole when they are idle."""
    with contextlib.suppress(AttributeError, OSError):  # not Linux, or not allowed
        thread = threading.get_native_id()
        nice = os.getpriority(os.PRIO_PROCESS, thread) + BACKGROUND_NICE
        os.setpriority(os.PRIO_PROCESS, thread, min(nice, 19))


def _iso(timestamp: float) -> str:
    return _dt.datetime.fromtimestamp(timestamp, _dt.UTC).isoformat(timespec="seconds")


def index_dir(root: Path, config: Config) -> Path:
    if config.index_dir:
        path = Path(config.index_dir).expanduser()
        return path if path.is_absolute() else root / path
    return root / CONFIG_DIRNAME
