"""`Workspace`: the object users hold. A `Vault` (the folder and its index) with select,
refine, memory and the agent wired on top; the CLI, HTTP server and MCP server call it and
import nothing below it.

Every layer it composes loads on first use: `vaultctx index` never pays for the agent, and a
select never imports litellm.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from ._lazy import lazy_exports
from .errors import NoteNotFound, NotIndexed, VaultctxError
from .permissions import Destination, PersonPolicy, VaultPolicy, confine
from .permissions.view import IndexView, ReadScope
from .storage import Embedder, IndexReport, IndexStatus, Vault, VaultWatcher
from .storage.db import erase_tree
from .storage.graph import LinkGraph, build_graph
from .storage.notefile import NoteText, read_vault_file
from .storage.vault import note_not_found, resolve_note

if TYPE_CHECKING:
    from pathlib import Path

    from .agent import SessionSummary, TurnResult
    from .agent.skills import Skill, SkillCatalog
    from .agent.turns import EventHandler
    from .config import Config
    from .memory import Memory, MemoryKind, MemoryService, Tier
    from .pipeline import Filters, Selection, Selector
    from .pipeline.context import SessionContext
    from .pipeline.focus import Focus
    from .pipeline.refine import Refiner
    from .pipeline.retrievers import Retriever
    from .search.query import STOP_WORDS
    from .storage.indexer import Progress
    from .storage.people import People, Person

__all__ = [
    "STOP_WORDS",
    "Embedder",
    "Filters",
    "IndexReport",
    "IndexStatus",
    "Memory",
    "MemoryKind",
    "NoteText",
    "People",
    "Person",
    "Selection",
    "SessionContext",
    "Tier",
    "VaultWatcher",
    "Workspace",
]

# What the interfaces (CLI, HTTP server, MCP) name besides `Workspace`, so they import nothing
# below the facade; loaded on first use (PEP 562), as each pulls in its layer.
_LAZY = {
    "Filters": "vaultctx.pipeline.models",
    "Selection": "vaultctx.pipeline.models",
    "SessionContext": "vaultctx.pipeline.context",
    "Memory": "vaultctx.memory.models",
    "MemoryKind": "vaultctx.memory.models",
    "Tier": "vaultctx.memory.models",
    "STOP_WORDS": "vaultctx.search.query",
    "People": "vaultctx.storage.people",
    "Person": "vaultctx.storage.people",
}

__getattr__ = lazy_exports(__name__, _LAZY, globals())

log = logging.getLogger(__name__)

_WARM_JOIN_S = 60.0  # a first export of the model takes a few seconds on a slow machine


class Workspace:
    """A vault, its index and everything that answers over it. Open with
    `Workspace.open(path)`; use as a context manager or call `close()`.

    It holds its `Vault` (the folder, the index and the model) rather than being one: its
    public methods are the whole surface every door reaches, and each reads the index only
    as the vault's policy lets its reader see it."""

    def __init__(
        self,
        vault: Vault,
        *,
        team_server: Workspace | None = None,
        person: Person | None = None,
        answers_to: Destination = Destination.CLIENT,
    ) -> None:
        """`team_server`: the workspace a person's (`for_person`) or a destination's
        (`answering`) is made from, whose database connections, vectors and link graph it
        shares. `answers_to`: where this workspace's answers go."""
        self._vault = vault
        self._team_server = team_server
        self.person = person  # one person of a team, when `for_person` made it
        # what may leave the index, read anew
        self._policy: VaultPolicy = (
            VaultPolicy(vault.root, vault.db.path.parent)
            if person is None
            else PersonPolicy(vault.root, vault.db.path.parent, person.deny)
        )
        # The reader every answer is for, by where the text goes: each method reads the
        # index through the view of one of these (a client's, unless it goes to a model).
        self._scopes = {d: ReadScope(vault.reads, self._policy, d) for d in Destination}
        self.answers_to = answers_to
        self._scope = self._scopes[answers_to]
        # the link graph of each view in use, by (index generation, what the view hides)
        self._graphs: dict[tuple[str | None, frozenset[int]], LinkGraph] = {}
        self._selector_lock = threading.Lock()  # never waits for a running index()
        self._selector_made: Selector | None = None
        self._refiner_made: Refiner | None = None
        self._memory: MemoryService | None = None
        self._warm_thread: threading.Thread | None = None
        self._people: dict[str, Workspace] = {}
        self._answering: dict[Destination, Workspace] = {}

    @classmethod
    def open(
        cls,
        path: str | Path,
        config: Config | dict[str, Any] | None = None,
        *,
        embedder: Embedder | None = None,
        create: bool = True,
    ) -> Workspace:
        """Open a vault folder, creating its index on first use.

        `config` is a `Config`, or a dict of overrides on top of the vault's config file.
        Pass an `embedder` to share one loaded model between workspaces; it then decides
        the model instead of the config. `create=False` opens only an index that exists
        (`NotIndexed` otherwise), leaving the folder as it was: what a reader wants.
        """
        return cls(Vault.open(path, config, embedder=embedder, create=create))

    @property
    def root(self) -> Path:
        """The vault folder."""
        return self._vault.root

    @property
    def config(self) -> Config:
        return self._vault.config

    @property
    def embedder(self) -> Embedder:
        """The embedding model, loaded on first use; pass it to `open` to share it."""
        return self._vault.embedder

    @property
    def team(self) -> People:
        """The people of a team's database (`database_url`); on the SQLite index nobody
        but the owner (managing a team is refused)."""
        return self._vault.team

    @property
    def shared(self) -> bool:
        """Whether servers on other hosts answer from this vault's index and keep its
        memories too (a team's database), so a server may run beside another."""
        return self._vault.backend.shared

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    # --- a team ----------------------------------------------------------------------------

    def for_person(self, person: Person) -> Workspace:
        """This workspace as one person of a team sees it: the notes their `deny` globs
        match hidden from every answer (on top of the vault's policy), and their own
        account-tier memories; the index, and the vault's shared memories, are the same.
        Made once per person (again when their globs change), closed with this one."""
        with self._selector_lock:
            made = self._people.get(person.name)
            if made is not None and made.person == person:
                return made
            if made is not None:
                made.close()
            made = Workspace(self._shared_vault(), team_server=self, person=person)
            self._people[person.name] = made
            return made

    def answering(self, destination: Destination | str) -> Workspace:
        """This workspace for answers that go to `destination` (`client`, `local_model`,
        `remote_model`): the policy's rules for that destination decide what every one of
        its answers holds, as if the rest were not in the vault. The MCP door answers a
        desktop client's model through one. Made once per destination, closed with this."""
        destination = Destination(destination)
        if destination is self.answers_to:
            return self
        with self._selector_lock:
            made = self._answering.get(destination)
            if made is None:
                made = Workspace(
                    self._shared_vault(), team_server=self, person=self.person,
                    answers_to=destination,
                )  # fmt: skip
                self._answering[destination] = made
            return made

    def _shared_vault(self) -> Vault:
        """This vault over a connection of its own, sharing its reads (a database's pool)."""
        from .storage.db import IndexDatabase

        vault = self._vault
        return Vault(
            vault.root, vault.config, IndexDatabase(vault.db.path), vault.embedder,
            backend=vault.backend.sharing(),
        )  # fmt: skip

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
        `reembed_seconds` bounds a run's work on a model switch (`Vault.index`). With a
        `database_url`, memory and sessions too: the first run moves this host's memories
        into the team's books and its agent sessions into the database, every run brings the
        memories up to date."""
        report = self._vault.index(
            embed=embed, progress=progress, paths=paths, reembed_seconds=reembed_seconds
        )
        if report.published is not None:
            from .agent import move_sessions  # the agent layer: only with a database

            report.published["memories"] = self.memory.share()
            report.published["sessions"] = move_sessions(self._agent_port())
        return report

    def restore_from_database(self) -> int:
        """Replace the SQLite index with the database's (`database_url`), vectors included —
        the way back from PostgreSQL, or a new host's start — and the database's agent
        sessions as files. Returns the notes restored."""
        from .agent import move_sessions

        restored = self._vault.restore_from_database()
        move_sessions(self._agent_port(), back=True)
        return restored

    def forget_departed(self) -> list[str]:
        """On a team's database: erase this host's copies of the memories of people no
        longer on the team (revoked, or removed); their names. A server does it as it
        starts; `vaultctx team revoke --forget` on the host it runs on."""
        from .memory.paths import PEOPLE_DIRNAME  # the memory package: only for a team

        folder = self._vault.db.path.parent / PEOPLE_DIRNAME
        if not folder.is_dir():
            return []
        copies = sorted(d.name for d in folder.iterdir() if d.is_dir())
        gone = [folder / name for name in self.team.departed(copies)]
        for copy in gone:
            with self._selector_lock:
                made = self._people.pop(copy.name, None)
            if made is not None:
                made.close()  # its memory files are open
            erase_tree(copy)
        return [copy.name for copy in gone]

    # --- select --------------------------------------------------------------------------

    @property
    def _selector(self) -> Selector:
        """The warm select state (vectors, link graph, threads), created on first use."""
        if self._selector_made is None:
            from .memory.paths import memory_exists  # the memory package: on first select
            from .pipeline import Selector  # numpy and the vector matrix: first select only

            created = False
            shares = None if self._team_server is None else self._team_server._selector
            with self._selector_lock:
                if self._selector_made is None:
                    self._selector_made = Selector(self._vault, self._scope, shares=shares)
                    created = True
            if created and (
                self._memory is not None
                or self.shared  # the team's memories, in its database
                or memory_exists(self._vault.db.path.parent)
            ):
                self.memory.attach(self._selector_made)
        return self._selector_made

    @property
    def memory(self) -> MemoryService:
        """Tiered memory of this vault and its user (`memory.db` beside the index), opened
        on first use. Closing the workspace flushes its background writes."""
        if self._memory is None:
            from .memory import MemoryService  # pydantic models: only when memory is used

            with self._selector_lock:
                if self._memory is None:
                    shared = self._team_server  # its vault memory: one copy for everyone
                    self._memory = MemoryService.for_vault(
                        self._vault, self._embed_query, scope=self._scope, person=self.person,
                        vault_memory=None if shared is None else shared.memory.repo,
                    )  # fmt: skip
        return self._memory

    def _embed_query(self, text: str, embedder: Embedder) -> Any:
        """A query vector from the select's warm embedder cache (memory shares it), by
        `embedder`: memory's, whose model may answer no more after a switch of models."""
        return self._selector.embed_query(text, embedder)

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
        lifted (diagnostics `focus` names them), notes dated in a time the query names
        ("last week", "in March 2025") preferred and those words not searched (diagnostics
        `time_window`). Deterministic; spends no tokens.

        `use_vectors=False` never loads the embedding model. `retrievers` runs only the
        named ones (`lexical`, `vector`, `graph`, `memory`); `max_per_note` caps blocks per
        note (0: no cap).
        """
        from .pipeline import Filters  # with the selector, on first select

        self._vault.require_index()
        if isinstance(filters, dict):
            filters = Filters(**filters)
        return self._selector.select(
            query,
            k=k,
            filters=filters,
            use_vectors=use_vectors,
            explain=explain,
            max_per_note=max_per_note,
            retrievers=retrievers,
        )

    def related(
        self,
        note: str,
        *,
        k: int = 10,
        use_vectors: bool = True,
        explain: bool = False,
        touch: bool = False,
    ) -> Selection:
        """The notes that matter for `note` (path, file name, title or alias): select with
        the note as the query — its title, headings and text — its links and what was
        touched lifting their notes, the note itself left out; one passage per note. With
        `touch`, the note is recorded as open first, as an editor does when it shows it.
        `NoteNotFound` for a note the index lacks or the policy hides."""
        self._vault.require_index()
        path, note_id = self._find(note)
        if touch:
            self._view().record_access(note_id, time.time(), "open")
        return self._selector.related(note_id, path, k=k, use_vectors=use_vectors, explain=explain)

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

    # --- the index, as a client reads it ---------------------------------------------------

    def status(self) -> IndexStatus:
        """Notes, blocks, links, tags, aliases, vectors, model, size and the last index run
        and watcher failure (`vaultctx status`), of what the reader may see."""
        return self._vault.status(self._view())

    def graph(self) -> LinkGraph:
        """The wiki-link graph of the notes the reader may see (nodes: note paths, with
        their titles), rebuilt only when the index or the policy changed."""
        return self._graph(self.answers_to)

    def _graph(self, destination: Destination | None = None) -> LinkGraph:

        view = self._view(destination)
        key = (view.generation, view.hidden)
        graph = self._graphs.get(key)
        if graph is None:
            graph = build_graph(*view.link_rows())
            kept = {k: g for k, g in self._graphs.items() if k[0] == view.generation}
            self._graphs = {**kept, key: graph}  # a new generation drops the others
        return graph

    def _view(self, destination: Destination | None = None) -> IndexView:
        """The index as what goes to `destination` (default: where answers go) may see it."""
        return self._scopes[destination or self.answers_to].view()

    def add_retriever(
        self,
        retriever: Retriever,
        *,
        weight: float | None = None,
        kinds: Collection[str] | None = None,
    ) -> None:
        """Rank `retriever`'s hits beside the built-in lists in every select, with fusion
        `weight` (None: `PLUGIN_WEIGHT`, 1.0); `kinds`: the candidate kinds its hits are
        (None: any). It is asked a `RetrievalRequest` whose `view` is the index as the
        reader may see it; hits outside that view are dropped. See docs/search.md, "Adding
        a retriever"."""
        self._selector.add_retriever(retriever, weight=weight, kinds=kinds)

    def _agent_port(self) -> _AgentPort:
        """What an agent turn may use of this workspace (`agent.protocols.TurnWorkspace`)."""
        return _AgentPort(self)

    # --- notes, as a client reads them ------------------------------------------------------

    def find_note(self, note: str) -> str:
        """The path of the note `note` names (path, file name, title or alias), if the
        vault's policy lets a client read it; `NoteNotFound` otherwise, as if it were not
        there."""
        return self._find(note)[0]

    def _find(self, note: str, destination: Destination | None = None) -> tuple[str, int]:
        """(path, id) of the note `note` names in the reader's view: a hidden note is as
        missing as one that is not there, with the same words; in a vault with nothing
        indexed, every note is missing for that reason, and `NotIndexed` says so."""
        try:
            return resolve_note(self._view(destination), note, self.root)
        except NoteNotFound:
            self._vault.require_index()
            raise

    def read_note(self, note: str, *, max_chars: int | None = None) -> NoteText:
        """The text of a note a client may read (`find_note`), as `read_vault_file` reads
        it: a note's Markdown from disk now, a canvas's cards, a PDF's indexed text page by
        page. If its file became a symlink since the index run, the policy judges the
        target too."""
        path, note_id = self._find(note)
        real = confine(self.root, path).relative_to(self.root).as_posix()
        if real != path and not self._view().readable(real):
            raise note_not_found(note, self.root)
        return read_vault_file(
            self.root, path, lambda: self._view().note_sections(note_id), max_chars
        )

    def touch(self, note: str, *, kind: str = "touch") -> str:
        """Record that the user opened or worked on `note` (path, file name, title or alias),
        a note a client may read (others are `NoteNotFound`): the next selects favour the
        notes it links to, the most recent touch most. Returns the note's path."""
        path, note_id = self._find(note)
        self._view().record_access(note_id, time.time(), kind)
        return path

    def focus(self) -> Focus:
        """The notes the next selects lean towards — opened or touched, and edited lately —
        each with its weight now (1: opened just now; halves every config
        `focus_half_life_hours`), of those the reader may see."""
        self._vault.require_index()
        return self._selector.focus()

    def clear_focus(self) -> Focus:
        """Forget every note opened or touched (of those the reader may see): the next
        selects rank as if nothing were open. Notes edited lately still count, at half
        weight, until they fade. Returns the focus left, and how many notes were forgotten."""
        self._vault.require_index()
        return self._selector.clear_focus()

    # --- refine --------------------------------------------------------------------------

    @property
    def _refiner(self) -> Refiner:
        """The refine state (the LLM gate's answer cache), created on first use."""
        if self._refiner_made is None:
            from .pipeline.refine import Refiner  # the gate's prompts: only for context()

            selector = self._selector  # takes the lock below itself
            with self._selector_lock:  # not the write lock: a running index() must not block
                if self._refiner_made is None:
                    self._refiner_made = Refiner(self._vault, selector, policy=self._policy)
        return self._refiner_made

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
        deterministic gate does. Never fails because of the model; `LLMNotInstalled` before
        any work when one is configured but its client (the `llm` extra) is not installed.
        """
        from .llm import LLMSettings, require_client, warm_up  # litellm: only with a model

        budget = self.config.budget_tokens if budget_tokens is None else budget_tokens
        settings = LLMSettings.resolve(self.config, model=model)
        if settings.configured:
            require_client()
            warm_up()  # litellm's import overlaps with select
        selection = self.select(query, k=k, filters=filters, use_vectors=use_vectors)
        return self._refiner.refine(
            selection, budget=budget, settings=settings, use_vectors=use_vectors
        )

    def gate_request(
        self,
        query: str,
        *,
        model: str | None = None,
        k: int = 30,
        filters: Filters | dict[str, Any] | None = None,
        use_vectors: bool = True,
    ) -> dict[str, Any]:
        """What `context` would send to the model for `query`, sending nothing: the model
        (None: none configured, so nothing would leave the machine) and the messages."""
        from .llm import LLMSettings

        settings = LLMSettings.resolve(self.config, model=model)
        if not settings.configured:
            return {"model": None, "api_base": None, "messages": []}
        selection = self.select(query, k=k, filters=filters, use_vectors=use_vectors)
        return self._refiner.gate_request(selection, settings)

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
        from .agent import AgentRequestHandler  # the agent layer: only for agent turns

        handler = AgentRequestHandler(
            self._agent_port(), session_id=session_id, model=model, asker=asker, on_event=on_event
        )
        return handler.handle(question)

    def sessions(self) -> list[SessionSummary]:
        """Every agent session of the vault, most recent first."""
        from .agent import list_sessions  # the agent layer: only for agent commands

        return list_sessions(self._agent_port())

    def session(self, session_id: str) -> list[dict[str, Any]]:
        """Every row of session `session_id` (messages, tool calls and results, traces).
        Raises `SessionNotFound`."""
        from .agent import load_session  # the agent layer: only for agent commands

        return load_session(self._agent_port(), session_id)

    def skills(self) -> list[Skill]:
        """The valid skills of the vault (notes under config `skills_folder`); notes there
        that are not valid skills are left out — `skill_catalog()` has their errors."""
        return list(self.skill_catalog().skills)

    def skill_catalog(self) -> SkillCatalog:
        """The vault's skills and, for each invalid skill note, the error naming its field."""
        from .agent.skills import discover  # the agent layer: only for skill commands

        return discover(self._agent_port())

    def skill(self, name: str) -> Skill:
        """The skill `name`; raises `SkillError` if there is none or it is invalid."""
        from .agent.skills import find_skill  # the agent layer: only for skill commands

        return find_skill(self._agent_port(), name)

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
        from .agent import AgentRequestHandler  # the agent layer: only for agent turns
        from .agent.skills import SkillRun

        skill = self.skill(name)
        run = SkillRun.prepare(skill, inputs or {})
        handler = AgentRequestHandler(
            self._agent_port(),
            session_id=session_id,
            model=model or skill.model,
            asker=asker,
            on_event=on_event,
        )
        return handler.handle(run.message, skill=run)

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
        runs in the watcher's thread after each run that changed the index. Starts
        `warm_up()` first, so the first embedding run finds the model loaded.
        """
        self.warm_up(use_vectors=self.config.embed if embed is None else embed)
        return self._vault.watch(
            embed=embed,
            debounce_ms=debounce_ms,
            catch_up=catch_up,
            on_index=on_index,
            index=self.index,
        )

    def switch_in_background(self) -> threading.Thread | None:
        """Complete a change of embedding model in a daemon thread while queries keep
        answering with the old vectors (`Vault.switch_in_background`); for a process that
        does not watch the vault. `close()` stops it."""
        return self._vault.switch_in_background(index=self.index)

    # --- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        self._vault.stop_watching()  # before the memory and selector they feed go
        if self._warm_thread is not None:
            self._warm_thread.join(_WARM_JOIN_S)  # it reads the index being closed
        # before the selector whose state they share
        for made in [*self._people.values(), *self._answering.values()]:
            made.close()
        self._people.clear()
        self._answering.clear()
        if self._memory is not None:
            self._memory.close()
            self._memory = None
        if self._selector_made is not None:
            self._selector_made.close()
        self._vault.close()


class _AgentPort:
    """A workspace as an agent turn uses it (`agent.protocols.TurnWorkspace`): the select,
    context and memory of the workspace, and the parts of its vault a turn needs to find
    notes, keep its session and write through permitted tools."""

    def __init__(self, ws: Workspace) -> None:
        self._ws = ws
        vault = ws._vault
        self.root = vault.root
        self.config = vault.config
        self.db = vault.db
        self.policy = ws._policy
        self.context = ws.context
        self.view = ws._view
        self.graph = ws._graph
        self.resolve_note = ws._find
        self.index = ws.index
        self.require_index = vault.require_index
        self.sessions = vault.sessions

    @property
    def memory(self) -> MemoryService:
        return self._ws.memory

    def select(
        self, query: str, *, destination: Destination | None = None, **options: Any
    ) -> Selection:
        """`Workspace.select`, as what goes to `destination` (default: where the workspace's
        answers go) may see it."""
        ws = self._ws if destination is None else self._ws.answering(destination)
        return ws.select(query, **options)
