"""`MemoryService`: the one entry point to memory. Every door — the Python API, the CLI,
the HTTP server, MCP and the agent's turns — writes and searches through it, so they all
remember the same things and rank them the same way."""

from __future__ import annotations

import builtins
import getpass
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import ValidationError

from ..config import Config, validation_message
from ..errors import ConfigError
from ..llm.settings import LLMSettings
from ..search.fusion import DEFAULT_RRF_K
from ..storage.audit import AuditLog
from ..storage.books import OWN_FILE, MemoryBook
from ..storage.vector_models import VectorModels
from . import extract as ex
from .derive import TurnDeriver, TurnJob
from .merging import MemoryDraft
from .mirror import Scope
from .models import (
    ImportReport,
    Memory,
    MemoryContext,
    MemoryKind,
    MemoryRecord,
    MemorySource,
    Tier,
    to_timestamp,
)
from .paths import ACCOUNT_DB, MEMORY_DB, PEOPLE_DIRNAME, account_dir
from .places import MemoryPlaces
from .ranking import SearchResult, rank
from .scratchpad import ScratchpadRepository
from .select_retriever import MemoryRetriever
from .store import MemoryRepository
from .turn_context import TurnRecall
from .writes import Counters, MemoryWrites

if TYPE_CHECKING:
    from ..permissions.view import IndexView, ReadScope
    from ..pipeline import Selector
    from ..storage import Embedder, Vault
    from ..storage.people import Person

DEFAULT_TURN_K = 8


def tier_half_lives(config: Config) -> dict[Tier, float]:
    """The configured half-life of each tier's recency, in days
    (`memory_half_life_days_<tier>`)."""
    return {tier: getattr(config, f"memory_half_life_days_{tier.value}") for tier in Tier}


def _user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "user"


class MemoryService:
    """Tiered memory for one vault and its user. Thread-safe; writes from `persist_turn`
    happen in a background thread — call `flush()` to wait for them."""

    def __init__(
        self,
        path: str | Path,
        *,
        vault_scope: str,
        account_path: Path | None = None,
        user: str | None = None,
        embedder: Embedder | None = None,
        embed_query: Callable[[str], np.ndarray] | None = None,
        half_lives: dict[Tier, float] | None = None,
        extractor: ex.Extractor | None = None,
        rrf_k: int = DEFAULT_RRF_K,
        scope: ReadScope | None = None,
        book: MemoryBook = OWN_FILE,
        account_book: MemoryBook = OWN_FILE,
        private_tiers: frozenset[Tier] = frozenset({Tier.ACCOUNT}),
        vault_memory: MemoryRepository | None = None,
    ) -> None:
        """`scope`: the reader; every search leaves out the memories drawn from notes its
        view hides. `book` and `account_book` keep the vault's file and the account's (on
        a team's database, the books they are copies of); the workspace scope is then the
        book's (`vault_scope` is this host's, which it replaces). `private_tiers` live in
        the account's database (a team member's conversations too). `vault_memory`: the
        vault's database open already (a team server's, which its people share; `close`
        leaves it open), instead of `path`'s."""
        model_id = embedder.model_id if embedder is not None else None
        repo = vault_memory or MemoryRepository(
            Path(path), model_id=model_id, book=book, local_scope=vault_scope
        )
        self.places = MemoryPlaces(
            repo,
            account_path or account_dir() / ACCOUNT_DB,
            vault_scope=repo.book.workspace_scope(vault_scope),
            user=user or _user(),
            account_book=account_book,
            private_tiers=private_tiers,
            owns_repo=vault_memory is None,
        )
        self.embedder = embedder
        self._embed_query = embed_query or (embedder.encode_query if embedder else None)
        self.half_lives = half_lives or tier_half_lives(Config())
        self.extractor: ex.Extractor = extractor or ex.DeterministicExtractor()
        self.rrf_k = rrf_k
        self.scope = scope
        self.scratchpad = ScratchpadRepository(self.repo)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vaultctx-memory")
        self._counters = Counters()
        deriver = TurnDeriver(self.places, self.extractor, self._counters.count)
        self._writes = MemoryWrites(self.places, deriver, embedder, self._counters)
        self._writes.on_write = self._register
        self._recall = TurnRecall(self.places, self._rank, self._hidden)
        self._selector: Selector | None = None
        self._retriever = MemoryRetriever(self._retriever_search)

    @classmethod
    def for_vault(
        cls,
        vault: Vault,
        embed_query: Callable[[str, Embedder], np.ndarray] | None = None,
        *,
        scope: ReadScope | None = None,
        person: Person | None = None,
        vault_memory: MemoryRepository | None = None,
    ) -> MemoryService:
        """Memory beside the vault's index (`memory.db`), the account's under the user data
        dir — or, for one `person` of a team, in their own folder beside the index, with
        their conversations' memories (nobody else's context ever holds either). With a
        `database_url`, each file is this server's copy of a book the team's servers share
        (a person's included; the owner's account stays on this host). `embed_query` shares
        a warm query-vector cache (the select's) with memory.

        Vectors are used when the vault's index has them (or has not been built yet), so a
        vault indexed without embeddings never loads the model for its memories either.
        With `llm_model` configured, turns are extracted by the model (`LLMExtractor`)."""
        cfg = vault.config
        index = vault.db.path.parent
        # The encoder of the vectors that answer: during a model switch, the old one's.
        answering = vault.query_model()
        never_indexed = vault.reads.meta("last_indexed") is None
        embedder = vault.embedder if answering is None else answering[1]
        vectors = cfg.embed and (
            answering is not None
            or (never_indexed and VectorModels.of(vault.reads.meta).answering is None)
        )
        return cls(
            vault.db.path.parent / MEMORY_DB,
            vault_scope=str(vault.root),
            embedder=embedder if vectors else None,
            embed_query=(
                (lambda text: embed_query(text, embedder)) if vectors and embed_query else None
            ),
            half_lives=tier_half_lives(cfg),
            rrf_k=cfg.rrf_k,
            extractor=(
                ex.LLMExtractor(LLMSettings.resolve(cfg, audit_log=AuditLog.of(index).path))
                if cfg.llm_model
                else None
            ),
            scope=scope,
            account_path=(
                vault.db.path.parent / PEOPLE_DIRNAME / person.name / ACCOUNT_DB
                if person is not None
                else None
            ),
            user=person.name if person is not None else None,
            book=vault.memory_book() if vault_memory is None else OWN_FILE,
            account_book=vault.memory_book(person.name) if person is not None else OWN_FILE,
            private_tiers=frozenset(
                {Tier.ACCOUNT} if person is None else {Tier.ACCOUNT, Tier.CONVERSATION}
            ),
            vault_memory=vault_memory,
        )

    @property
    def repo(self) -> MemoryRepository:
        """The vault's memory database."""
        return self.places.repo

    @property
    def vault_scope(self) -> str:
        return self.places.vault_scope

    @property
    def user(self) -> str:
        return self.places.user

    def scope_for(
        self, tier: Tier, scope: str | None = None, *, session_id: str | None = None,
        channel: str | None = None,
    ) -> str:  # fmt: skip
        """Conversation → session id, channel → channel id, workspace → vault, account → user."""
        return self.places.scope_for(tier, scope, session_id=session_id, channel=channel)

    # --- writing -------------------------------------------------------------------------

    def add(
        self,
        text: str,
        *,
        tier: Tier | str = Tier.WORKSPACE,
        scope: str | None = None,
        kind: MemoryKind | str | None = None,
        importance: float | None = None,
        summary: str | None = None,
        themes: Sequence[str] | None = None,
        created_at: Any = None,
        source: MemorySource | dict[str, Any] | None = None,
        key: str | None = None,
        speaker: str | None = None,
        session: str | None = None,
        turn: str | int | None = None,
    ) -> Memory:
        """Write one memory now and return it — or the existing one it was merged into.

        `created_at` (datetime, ISO string or epoch seconds) may lie in the past.

        With `speaker` or `session`, `text` is a turn of a conversation (`turn`: its id;
        `text` may start with 'Speaker: '; `session` defaults to the scope). Memory then
        derives from it what it derives from a chat turn (`persist_turn`) — the facts it
        states, an exchange with the two turns said before it in the session, the session's
        arc — all in this tier and scope, and returns the turn's own memory; the other
        arguments set that memory's fields."""
        tier = Tier(tier)
        text = text.strip()
        if not text:
            raise ConfigError("a memory needs some text")
        where = (tier, self.scope_for(tier, scope))
        try:
            at = to_timestamp(created_at, time.time())
        except ValueError as exc:
            raise ConfigError(f"created_at {created_at!r} is not a date or time") from exc
        base = MemorySource.model_validate(source or {})
        if speaker is None and session is None:
            if base.speaker is None and (named := ex.said_by(text)):
                base = base.model_copy(update={"speaker": named})
            kind = MemoryKind(kind or MemoryKind.SEMANTIC)
            draft = MemoryDraft(
                tier=where[0],
                scope=where[1],
                kind=kind,
                text=text,
                summary=summary if summary is not None else ex.summarize(text),
                themes=tuple(themes) if themes is not None else ex.themes(text),
                importance=importance if importance is not None else ex.importance(text, kind),
                created_at=at,
                source=base if turn is None else base.model_copy(update={"turns": (str(turn),)}),
                key=key,
            )
            return self._writes.write([draft])[0]
        said = ex.Turn(
            user=ex.unprefixed(text, speaker),
            session_id=session or where[1],
            at=at,
            turn_id=None if turn is None else str(turn),
            user_name=speaker or "",
            paths=base.paths,
        )
        drafts = self._writes.deriver.derive(TurnJob(said, fixed=where))
        overrides: dict[str, Any] = {
            "kind": None if kind is None else MemoryKind(kind),
            "importance": importance,
            "summary": summary,
            "key": key,
            "themes": None if themes is None else tuple(themes),
        }
        own = replace(drafts[0], **{k: v for k, v in overrides.items() if v is not None})
        return self._writes.write([own, *drafts[1:]])[0]

    def persist_turn(
        self,
        user: str,
        assistant: str = "",
        *,
        session_id: str,
        channel: str | None = None,
        turn_id: str | int | None = None,
        at: Any = None,
        user_name: str = "User",
        assistant_name: str = "Assistant",
        paths: Sequence[str] = (),
        tier: Tier | str | None = None,
        tiers: Collection[Tier | str] | None = None,
    ) -> bool:
        """Remember a finished turn in the background; returns at once.

        Observations are extracted (the configured extractor, the deterministic one if it
        fails), scored, tiered (the raw turn → conversation, facts → channel or workspace,
        personal facts and rules → account; `tier` puts them all in one tier) and the
        session's episodic arc is extended. `at` is the turn's time (default: now). With
        `tiers`, memories placed in any other tier are dropped; none at all: nothing is
        extracted, and False is returned.
        A failing model or database never raises here: it is logged and counted in
        `stats`. Only a caller's mistake does (`tier="channel"` without a `channel`)."""
        kept = None if tiers is None else frozenset(Tier(t) for t in tiers)
        if kept is not None and not kept:
            return False
        fixed: Scope | None = None
        if tier is not None:
            tier = Tier(tier)
            fixed = (tier, self.scope_for(tier, session_id=session_id, channel=channel))
        turn = ex.Turn(
            user=user,
            assistant=assistant,
            session_id=session_id,
            channel=channel,
            turn_id=None if turn_id is None else str(turn_id),
            at=to_timestamp(at, time.time()),
            user_name=user_name,
            assistant_name=assistant_name,
            paths=tuple(paths),
        )
        return self._writes.submit_turn(TurnJob(turn, fixed, kept))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for every background write submitted so far; False on timeout."""
        return self._writes.flush(timeout)

    @property
    def stats(self) -> dict[str, Any]:
        """Background writer counters (submitted, written, errors, pending) and fallbacks."""
        return self._writes.stats

    # --- reading -------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        k: int = 10,
        tier: Tier | str | None = None,
        scope: str | None = None,
        kinds: Sequence[MemoryKind | str] = (),
        session_id: str | None = None,
        channel: str | None = None,
        now: Any = None,
        refresh: bool = False,
        query_vector: np.ndarray | None = None,
        reader: IndexView | None = None,
    ) -> list[Memory]:
        """Memories ranked for `query`, each with `score` and `scores` (relevance, importance,
        recency, ranks). Without `tier`: what a turn of `session_id`/`channel` may see.
        `refresh` counts this as an access (recency restarts). The ranking is the one a
        turn's context gets (`retrieve_for_turn`) over the same scopes. `reader`: the view
        whose hidden notes' memories are left out (default: this memory's reader's)."""
        at = to_timestamp(now, time.time())
        visible = self.places.visible(session_id, channel)
        scopes = self.places.scopes(None if tier is None else Tier(tier), scope, visible)
        memories = self._rank(
            query, scopes, k=k, now=at, kinds=kinds, query_vector=query_vector, reader=reader
        ).memories
        if refresh:
            self._writes.submit_touch([m.id for m in memories], at)
        return memories

    def _rank(
        self, query: str, scopes: Sequence[Scope], *, k: int, now: float,
        kinds: Sequence[MemoryKind | str] = (), query_vector: np.ndarray | None = None,
        exclude: Collection[str] = (), reader: IndexView | None = None,
        hidden: Mapping[MemoryRepository, Mapping[int, str]] | None = None,
    ) -> SearchResult:  # fmt: skip
        """`hidden`: `_hidden(reader)`, when the caller has it."""
        if hidden is None:
            hidden = self._hidden(reader)
        result = rank(
            self.places.targets(scopes),
            query,
            kinds=[MemoryKind(kd) for kd in kinds] or list(MemoryKind),
            k=k,
            exclude=exclude,
            hidden={repo: rows.keys() for repo, rows in hidden.items()},
            now=now,
            half_lives=self.half_lives,
            embed=self._embed_query,
            query_vector=query_vector,
            pool=self._pool,
            rrf_k=self.rrf_k,
        )
        if result.error:
            self._counters.count("embed_errors", RuntimeError(result.error))
        return result

    def _hidden(self, reader: IndexView | None = None) -> dict[MemoryRepository, dict[int, str]]:
        """{database: {rowid: id}} of the memories drawn from a note `reader` (default:
        this memory's reader's view) hides: for a search they were never written."""
        view = reader or (self.scope.view() if self.scope is not None else None)
        if view is None or not view.restricts:
            return {}
        hidden: dict[MemoryRepository, dict[int, str]] = {}
        for repo in self.places.repos():
            for rowid, memory_id, paths in repo.note_sources():
                if not all(view.readable(path) for path in paths):
                    hidden.setdefault(repo, {})[rowid] = memory_id
        return hidden

    def _retriever_search(
        self,
        query: str,
        *,
        k: int,
        reader: IndexView | None = None,
    ) -> list[Memory]:
        return self.search(query, k=k, reader=reader)

    def retrieve_for_turn(
        self,
        query: str,
        *,
        session_id: str,
        channel: str | None = None,
        first_turn: bool = False,
        k: int = DEFAULT_TURN_K,
        now: Any = None,
        refresh: bool = True,
        reader: IndexView | None = None,
    ) -> MemoryContext:
        """Everything memory gives one turn: the memories `search` ranks for `query` over
        what the turn sees, the user's procedural rules (always, not by query), on a
        session's first turn the latest episodic arc of an earlier session, and the design's
        diagnostics. `refresh=False` leaves access times alone: a replay or an evaluation
        must not change what it measures. `reader`: the view of where the turn's text goes,
        whose hidden notes' memories are left out (default: this memory's reader's)."""
        at = to_timestamp(now, time.time())
        context = self._recall.context(
            query, session_id=session_id, channel=channel, first_turn=first_turn, k=k, now=at,
            reader=reader,
        )  # fmt: skip
        if refresh:  # after the clock stops: the refresh is written in the background
            accessed = [m.id for m in context.entries]
            self._writes.submit_touch(
                accessed + ([context.catch_up.id] if context.catch_up else []), at
            )
        return context

    def list(
        self,
        *,
        tier: Tier | str | None = None,
        scope: str | None = None,
        kind: MemoryKind | str | None = None,
        limit: int | None = None,
    ) -> list[Memory]:
        """Stored memories, newest first; without `tier`, every tier and scope."""
        kinds = [MemoryKind(kind)] if kind else []
        out: list[Memory] = []
        for repo in self.places.repos():
            if tier is None:
                out += repo.list(None, kinds=kinds, limit=limit)
                continue
            t = Tier(tier)
            if self.places.is_private(t) != (repo is not self.repo):
                continue
            scopes = [(t, self.scope_for(t, scope))] if scope or t in (
                Tier.WORKSPACE, Tier.ACCOUNT) else None  # fmt: skip
            out += repo.list(scopes, tier=t, kinds=kinds, limit=limit)
        out.sort(key=lambda m: (-m.updated_at, m.id))
        return out[:limit] if limit is not None else out

    def get(self, memory_id: str) -> Memory | None:
        for repo in self.places.repos():
            if (memory := repo.get(memory_id)) is not None:
                return memory
        return None

    def share(self) -> int:
        """On a team's database: bring each memory file in step with its book — the first
        time, its memories move into the book, vectors as they are — and return the live
        memories of the vault's. Without a database, just that count. Pending background
        writes are not waited for (an index run of the watcher calls this): they reach the
        book when they commit."""
        for repo in self.places.repos():
            repo.refresh()
        return self.repo.count()

    def forget(self, ids: str | Iterable[str], *, soft: bool = False) -> int:
        """Delete memories for real (row, FTS text, vector; WAL truncated) — or, `soft`,
        only hide them — with everything derived from the same turns (facts, exchanges, the
        session's arc), so neither door finds their words again. Returns how many memories
        went. Waits for pending writes first."""
        ids = [ids] if isinstance(ids, str) else list(ids)
        self.flush()
        return sum(repo.delete(repo.derived_with(ids), soft=soft) for repo in self.places.repos())

    def export(
        self, *, tier: Tier | str | None = None, scope: str | None = None
    ) -> builtins.list[dict]:
        """Memories as JSON-ready dicts (no vectors: they are recomputed on import)."""
        self.flush()
        return [m.to_dict() for m in reversed(self.list(tier=tier, scope=scope))]

    def import_(self, records: Iterable[Any]) -> ImportReport:
        """Write exported memories back, keeping their ids and times; an id that exists
        is updated, so importing twice changes nothing. Each record is validated on its
        own (`MemoryRecord`): a bad one is left out and reported by its position, the
        others are written."""
        drafts: list[MemoryDraft] = []
        rejected: list[tuple[int, str]] = []
        for number, record in enumerate(records, start=1):
            try:
                drafts.append(self._imported(MemoryRecord.model_validate(record)))
            except ValidationError as exc:
                rejected.append((number, validation_message(exc, "record")))
            except ConfigError as exc:  # e.g. a conversation memory without its scope
                rejected.append((number, str(exc)))
        imported = sum(
            len(self._writes.write(drafts[start : start + 256]))
            for start in range(0, len(drafts), 256)
        )
        return ImportReport(imported, tuple(rejected))

    def _imported(self, record: MemoryRecord) -> MemoryDraft:
        return MemoryDraft(
            tier=record.tier,
            scope=self.scope_for(record.tier, record.scope),
            kind=record.kind,
            text=record.text,
            summary=record.summary or ex.summarize(record.text),
            themes=record.themes,
            importance=record.importance,
            created_at=time.time() if record.created_at is None else record.created_at,
            source=record.source,
            key=record.key,
            id=record.id,
        )

    # --- select integration --------------------------------------------------------------

    @property
    def retriever(self) -> MemoryRetriever:
        return self._retriever

    def attach(self, selector: Selector) -> None:
        """Let `selector` fuse memories as its fourth retriever once any exist."""
        self._selector = selector
        self._register()

    def _register(self) -> None:
        selector = self._selector
        if selector is None or "memory" in selector.retrievers:
            return
        if any(repo.count() for repo in self.places.repos()):
            weight = selector.vault.config.weight_memory
            selector.add_retriever(self._retriever, weight=weight, kinds=("memory",))

    # --- lifecycle -----------------------------------------------------------------------

    def close(self, timeout: float | None = 30.0) -> None:
        """Flush pending writes, stop the writer, close the databases."""
        self._writes.close(timeout)
        self._pool.shutdown(wait=True)
        self.places.close()

    def __enter__(self) -> MemoryService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
