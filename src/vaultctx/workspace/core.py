"""`Workspace`: one vault, its index and its models — the API the CLI, server and apps call."""

from __future__ import annotations

import contextlib
import datetime as _dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import CONFIG_DIRNAME, Config, load_config
from ..errors import NoteNotFound, NotIndexed, VaultctxError, VaultNotFound
from .db import IndexDatabase, WriterLock
from .embeddings import Embedder
from .graph import build_graph
from .indexer import Indexer, IndexReport, Progress

log = logging.getLogger(__name__)

_WARM_JOIN_S = 60.0  # a first export of the model takes a few seconds on a slow machine

if TYPE_CHECKING:
    import networkx as nx

    from ..agent import TurnResult
    from ..agent.handler import EventHandler
    from ..agent.skills import Skill
    from ..memory import AgentMemoryFacade
    from ..pipeline import Filters, Selection, Selector
    from ..pipeline.context import SessionContext
    from ..pipeline.refine import Refiner
    from .watch import VaultWatcher


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Workspace:
    """A vault on disk and its index. Open with `Workspace.open(path)`; use as a context
    manager or call `close()`."""

    def __init__(self, root: Path, config: Config, db: IndexDatabase, embedder: Embedder) -> None:
        self.root = root
        self.config = config
        self.db = db
        self.embedder = embedder
        self._write_lock = threading.Lock()
        self._selector_lock = threading.Lock()  # never waits for a running index()
        self._graph_cache: tuple[str | None, nx.DiGraph] | None = None
        self._selector: Selector | None = None
        self._refiner: Refiner | None = None
        self._watchers: list[VaultWatcher] = []
        self._memory: AgentMemoryFacade | None = None
        self._warm_thread: threading.Thread | None = None

    @classmethod
    def open(
        cls,
        path: str | Path,
        config: Config | dict[str, Any] | None = None,
        *,
        embedder: Embedder | None = None,
    ) -> Workspace:
        """Open a vault folder, creating its index on first use.

        `config` is a `Config`, or a dict of overrides on top of the vault's config file.
        Pass an `embedder` to share one loaded model between workspaces; it then decides
        the model instead of the config.
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
        db = IndexDatabase(index_dir(root, config) / "index.db")
        return cls(root, config, db, embedder)

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
            )
            return indexer.run(paths)

    @property
    def generation(self) -> str | None:
        """Changes whenever the index content changes: a key for in-memory caches."""
        return self.db.get_meta("generation")

    def require_index(self) -> None:
        if self.db.get_meta("last_indexed") is None:
            raise NotIndexed(f"{self.root} has not been indexed yet: run `vaultctx index`")

    # --- reading -------------------------------------------------------------------------

    def status(self) -> IndexStatus:
        conn = self.db.connect()

        def count(sql: str, *args: Any) -> int:
            return int(conn.execute(sql, args).fetchone()[0])

        model = self.db.get_meta("embedding_model")
        last = self.db.get_meta("last_indexed")
        return IndexStatus(
            vault=str(self.root),
            index_path=str(self.db.path),
            notes=count("SELECT count(*) FROM notes"),
            blocks=count("SELECT count(*) FROM blocks"),
            links=count("SELECT count(*) FROM links WHERE target_id IS NOT NULL"),
            dangling_links=count("SELECT count(*) FROM links WHERE target_id IS NULL"),
            tags=count("SELECT count(DISTINCT tag) FROM tags"),
            aliases=count("SELECT count(*) FROM aliases"),
            vectors=count(
                "SELECT count(*) FROM blocks b JOIN embeddings e"
                " ON e.hash = b.embed_hash AND e.model = ?",
                model or "",
            ),
            model=model,
            index_bytes=self.db.size_bytes(),
            last_indexed=(
                _dt.datetime.fromtimestamp(float(last), _dt.UTC).isoformat(timespec="seconds")
                if last
                else None
            ),
            notes_with_problems=count("SELECT count(*) FROM notes WHERE problems != '[]'"),
        )

    def graph(self) -> nx.DiGraph:
        """The wiki-link graph (nodes: note paths), rebuilt only when the index changed."""
        generation = self.generation
        cached = self._graph_cache
        if cached is None or cached[0] != generation:
            cached = (generation, build_graph(self.db.connect()))
            self._graph_cache = cached
        return cached[1]

    # --- select --------------------------------------------------------------------------

    @property
    def selector(self) -> Selector:
        """The warm select state (vectors, link graph, threads), created on first use."""
        if self._selector is None:
            from ..pipeline import Selector

            created = False
            with self._selector_lock:
                if self._selector is None:
                    self._selector = Selector(self)
                    created = True
            if created:
                from ..memory.paths import memory_exists

                if self._memory is not None or memory_exists(self.db.path.parent):
                    self.memory.attach(self._selector)
        return self._selector

    @property
    def memory(self) -> AgentMemoryFacade:
        """Tiered memory of this vault and its user (`memory.db` beside the index), opened
        on first use. Closing the workspace flushes its background writes."""
        if self._memory is None:
            from ..memory import AgentMemoryFacade

            with self._selector_lock:
                if self._memory is None:
                    self._memory = AgentMemoryFacade.for_workspace(self)
        return self._memory

    def select(
        self,
        query: str,
        *,
        k: int = 10,
        filters: Filters | dict[str, Any] | None = None,
        use_vectors: bool = True,
        explain: bool = False,
        max_per_note: int = 3,
        retrievers: list[str] | None = None,
    ) -> Selection:
        """The best blocks (and other candidates) of the notes that best answer `query`:
        FTS5 and vectors in parallel, weighed per note, notes linked to what was `touch`ed
        lifted. Deterministic; spends no tokens.

        `use_vectors=False` never loads the embedding model. `retrievers` runs only the
        named ones (`lexical`, `vector`, `graph`, `memory`); `max_per_note` caps blocks per
        note (0: no cap).
        """
        from ..pipeline import Filters

        self.require_index()
        if isinstance(filters, dict):
            filters = Filters(**filters)
        return self.selector.select(
            query,
            k=k,
            filters=filters,
            use_vectors=use_vectors,
            explain=explain,
            max_per_note=max_per_note,
            retrievers=retrievers,
        )

    def warm_up(self, *, use_vectors: bool = True) -> threading.Thread:
        """Load what the first select needs — the embedding model, the vector matrix, the
        link graph, the index's pages — in a background thread, and return that thread.

        Servers call this as they start, so they answer at once; a select that arrives
        meanwhile waits only for what is still loading. The model is loaded even before the
        index has vectors, for the watcher's first embedding run. `use_vectors=False`, or
        config `embed = false`, leaves the model unloaded. Calling it again is free.
        """
        with self._selector_lock:
            if self._warm_thread is None:
                vectors = use_vectors and self.config.embed
                self._warm_thread = threading.Thread(
                    target=self._warm, args=(vectors,), name="vaultctx-warm", daemon=True
                )
                self._warm_thread.start()
            return self._warm_thread

    def _warm(self, vectors: bool) -> None:
        started = time.perf_counter()
        try:
            with contextlib.suppress(NotIndexed):  # nothing to warm yet: the watcher indexes
                self.select("warm up", k=1, use_vectors=vectors)
            if vectors:
                self.embedder.load()  # loaded by the select above if the index has vectors
        except VaultctxError as exc:  # queries will say it too (and fall back to lexical)
            log.warning("warm-up stopped: %s", exc)
        else:
            log.info("warm in %.2f s", time.perf_counter() - started)

    # --- refine --------------------------------------------------------------------------

    @property
    def refiner(self) -> Refiner:
        """The refine state (the LLM gate's answer cache), created on first use."""
        if self._refiner is None:
            from ..pipeline.refine import Refiner

            with self._write_lock:
                if self._refiner is None:
                    self._refiner = Refiner(self)
        return self._refiner

    def context(
        self,
        query: str,
        *,
        budget_tokens: int | None = None,
        model: str | None = None,
        k: int = 30,
        filters: Filters | dict[str, Any] | None = None,
        use_vectors: bool = True,
    ) -> SessionContext:
        """Select, then refine to `budget_tokens` (default: config `budget_tokens`): the
        SessionContext an agent starts from.

        With a model (`model`, else config `llm_model`) a cheap LLM chooses what to keep;
        without one, or when it times out (`llm_timeout`), fails or answers nonsense, the
        deterministic gate does. Never fails because of the model.
        """
        from ..llm import LLMSettings, warm_up

        budget = self.config.budget_tokens if budget_tokens is None else budget_tokens
        settings = LLMSettings.resolve(self.config, model=model)
        if settings.configured:
            warm_up()  # litellm's import overlaps with select
        selection = self.select(query, k=k, filters=filters, use_vectors=use_vectors)
        return self.refiner.refine(
            selection, budget=budget, settings=settings, use_vectors=use_vectors
        )

    # --- agent turn ----------------------------------------------------------------------

    def ask(
        self,
        question: str,
        *,
        session_id: str | None = None,
        model: str | None = None,
        asker: Callable[[str, str], bool] | None = None,
        on_event: EventHandler | None = None,
    ) -> TurnResult:
        """One agent turn: context, memory, the Orchestrator with its Researcher, Worker and
        the vault's skills (each run in a child process that a timeout stops) under the
        vault's permission policy, an answer citing notes as `[[path]]`.

        `session_id` continues a session (its history is read back from the session file);
        without it a new session is started. `asker(capability, resource)` answers `ask`
        permissions; without one they are denied. Raises `LLMNotConfigured` without a model.
        """
        from ..agent import AgentRequestHandler

        handler = AgentRequestHandler(
            self, session_id=session_id, model=model, asker=asker, on_event=on_event
        )
        return handler.handle(question)

    def skills(self) -> list[Skill]:
        """The valid skills of the vault (notes under config `skills_folder`); notes there
        that are not valid skills are left out — `vaultctx skills list` shows their errors."""
        from ..agent.skills import discover

        return list(discover(self).skills)

    def run_skill(
        self,
        name: str,
        inputs: dict[str, Any] | None = None,
        *,
        session_id: str | None = None,
        model: str | None = None,
        asker: Callable[[str, str], bool] | None = None,
        on_event: EventHandler | None = None,
    ) -> TurnResult:
        """Run the skill `name` as one agent turn: inputs validated, its template rendered,
        its linked notes in context, and only the capabilities it declares allowed.

        The model is `model`, else the skill's own, else config `llm_model`. Raises
        `SkillError` (naming the note and field) for a bad skill or inputs before any work.
        """
        from ..agent import AgentRequestHandler
        from ..agent.skills import SkillRun, find_skill

        skill = find_skill(self, name)
        run = SkillRun.prepare(skill, inputs or {})
        handler = AgentRequestHandler(
            self,
            session_id=session_id,
            model=model or skill.model,
            asker=asker,
            on_event=on_event,
        )
        return handler.handle(run.message, skill=run)

    def touch(self, note: str, *, kind: str = "touch") -> str:
        """Record that the user opened or worked on `note` (path, file name, title or alias):
        the next selects favour the notes it links to, the most recent touch most. Returns
        the note's path."""
        path, note_id = self.resolve_note(note)
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO accesses(note_id, at, kind) VALUES (?, ?, ?)",
                (note_id, time.time(), kind),
            )
        return path

    def resolve_note(self, note: str) -> tuple[str, int]:
        """Find a note by vault path (with or without .md), file name, title or alias."""
        conn = self.db.connect()
        wanted = note.strip().replace("\\", "/").removeprefix("./")
        queries = (
            ("SELECT path, id FROM notes WHERE path = ?", wanted),
            ("SELECT path, id FROM notes WHERE path = ?", f"{wanted}.md"),
            ("SELECT path, id FROM notes WHERE lower(path) = lower(?)", wanted),
            ("SELECT path, id FROM notes WHERE lower(path) = lower(?)", f"{wanted}.md"),
            (
                "SELECT path, id FROM notes WHERE lower(title) = lower(?) ORDER BY length(path)",
                wanted,
            ),
            (
                "SELECT n.path, n.id FROM aliases a JOIN notes n ON n.id = a.note_id"
                " WHERE lower(a.alias) = lower(?) ORDER BY length(n.path)",
                wanted,
            ),
            (
                "SELECT path, id FROM notes WHERE lower(path) LIKE '%/' || lower(?)"
                " ORDER BY length(path)",
                f"{wanted}.md",
            ),
        )
        for sql, arg in queries:
            row = conn.execute(sql, (arg,)).fetchone()
            if row:
                return row[0], row[1]
        raise NoteNotFound(f"no note named {note!r} in {self.root}")

    # --- live re-index -------------------------------------------------------------------

    def watch(
        self,
        *,
        embed: bool | None = None,
        debounce_ms: int = 150,
        catch_up: bool = True,
        on_index: Callable[[IndexReport], None] | None = None,
    ) -> VaultWatcher:
        """Re-index notes as they are saved, in a background thread, while queries run.

        Returns the started watcher; call its `stop()` (or `close()` this workspace). With
        `catch_up`, edits made while nothing watched are indexed first. `on_index(report)`
        runs in the watcher's thread after each run that changed the index. It starts
        `warm_up()` too, so the first embedding run finds the model loaded.
        """
        from .watch import VaultWatcher

        self.warm_up(use_vectors=self.config.embed if embed is None else embed)
        watcher = VaultWatcher(
            self, embed=embed, debounce_ms=debounce_ms, catch_up=catch_up, on_index=on_index
        )
        self._watchers.append(watcher)
        return watcher.start()

    # --- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        for watcher in self._watchers:
            watcher.stop()
        self._watchers.clear()
        if self._warm_thread is not None:
            self._warm_thread.join(_WARM_JOIN_S)  # it reads the index being closed
        if self._memory is not None:
            self._memory.close()
            self._memory = None
        if self._selector is not None:
            self._selector.close()
        self.db.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"


def index_dir(root: Path, config: Config) -> Path:
    if config.index_dir:
        path = Path(config.index_dir).expanduser()
        return path if path.is_absolute() else root / path
    return root / CONFIG_DIRNAME
