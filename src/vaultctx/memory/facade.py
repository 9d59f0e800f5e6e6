"""`AgentMemoryFacade`: the one entry point to memory — decides the tier, writes (merging
near-duplicates), persists turns in the background, and retrieves for every turn."""

from __future__ import annotations

import getpass
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError
from ..llm.settings import LLMSettings
from . import extract as ex
from .models import Memory, MemoryContext, MemoryKind, MemorySource, Observation, Tier, to_timestamp
from .paths import ACCOUNT_DB, MEMORY_DB, account_dir
from .retrieval import (
    MemoryRetriever,
    dedupe_episodes,
    dedupe_moments,
    hybrid_search,
    now_ms,
)
from .scratchpad import ScratchpadRepository
from .store import MemoryDraft, MemoryRepository, Scope
from .writer import BackgroundWriter

if TYPE_CHECKING:
    from ..pipeline import Selector
    from ..workspace.core import Workspace
    from ..workspace.embeddings import Embedder

log = logging.getLogger(__name__)

MAX_RULES = 20
DEFAULT_TURN_K = 8


def _user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "user"


@dataclass(frozen=True)
class _TurnJob:
    turn: ex.Turn
    tier: Tier | None


@dataclass(frozen=True)
class _TouchJob:
    ids: tuple[str, ...]
    at: float


@dataclass(frozen=True)
class _Prepared:
    drafts: list[tuple[MemoryDraft, np.ndarray | None]]
    touch: _TouchJob | None = None


class AgentMemoryFacade:
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
        rrf_k: int = 60,
    ) -> None:
        model_id = embedder.model_id if embedder is not None else None
        self.repo = MemoryRepository(Path(path), model_id=model_id)
        self._account_path = account_path or account_dir() / ACCOUNT_DB
        self._account: MemoryRepository | None = None
        self._account_lock = threading.Lock()
        self.vault_scope = vault_scope
        self.user = user or _user()
        self.embedder = embedder
        self._embed_query = embed_query or (embedder.encode_query if embedder else None)
        self.half_lives = half_lives or {
            Tier.CONVERSATION: 1.0,
            Tier.CHANNEL: 14.0,
            Tier.WORKSPACE: 90.0,
            Tier.ACCOUNT: 365.0,
        }
        self.extractor: ex.Extractor = extractor or ex.DeterministicExtractor()
        self._fallback = ex.DeterministicExtractor()
        self.rrf_k = rrf_k
        self.scratchpad = ScratchpadRepository(self.repo)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vaultctx-memory")
        self._counters = {"extract_errors": 0, "embed_errors": 0}
        self._counters_lock = threading.Lock()
        self._rules_cache: dict[tuple, tuple[tuple[int, ...], list[Memory]]] = {}
        self._selector: Selector | None = None
        self._retriever = MemoryRetriever(self._retriever_search)
        self._writer: BackgroundWriter[_TurnJob | _TouchJob, _Prepared] = BackgroundWriter(
            self._prepare, self._commit
        )

    @classmethod
    def for_workspace(cls, ws: Workspace) -> AgentMemoryFacade:
        """Memory beside the index (`memory.db`), the account's under the user data dir.

        Vectors are used when the vault's index has them (or has not been built yet), so a
        vault indexed without embeddings never loads the model for its memories either.
        With `llm_model` configured, turns are extracted by the model (`LLMExtractor`)."""
        cfg = ws.config
        indexed_model = ws.db.get_meta("embedding_model")
        never_indexed = ws.db.get_meta("last_indexed") is None
        vectors = cfg.embed and (
            indexed_model == ws.embedder.model_id or (never_indexed and indexed_model is None)
        )
        return cls(
            ws.db.path.parent / MEMORY_DB,
            vault_scope=str(ws.root),
            embedder=ws.embedder if vectors else None,
            embed_query=(lambda text: ws.selector.embed_query(text)) if vectors else None,
            half_lives={
                Tier.CONVERSATION: cfg.memory_half_life_days_conversation,
                Tier.CHANNEL: cfg.memory_half_life_days_channel,
                Tier.WORKSPACE: cfg.memory_half_life_days_workspace,
                Tier.ACCOUNT: cfg.memory_half_life_days_account,
            },
            rrf_k=cfg.rrf_k,
            extractor=ex.LLMExtractor(LLMSettings.resolve(cfg)) if cfg.llm_model else None,
        )

    # --- where memories live -------------------------------------------------------------

    def _account_repo(self, *, create: bool) -> MemoryRepository | None:
        """The account database, created only when something is written to it."""
        if self._account is None and (create or self._account_path.exists()):
            with self._account_lock:
                if self._account is None:
                    self._account = MemoryRepository(
                        self._account_path, model_id=self.repo.model_id
                    )
        return self._account

    def _repo_for(self, tier: Tier, *, create: bool = True) -> MemoryRepository | None:
        return self._account_repo(create=create) if tier is Tier.ACCOUNT else self.repo

    def scope_for(
        self, tier: Tier, scope: str | None = None, *, session_id: str | None = None,
        channel: str | None = None,
    ) -> str:  # fmt: skip
        """Conversation → session id, channel → channel id, workspace → vault, account → user."""
        if scope:
            return scope
        if tier is Tier.WORKSPACE:
            return self.vault_scope
        if tier is Tier.ACCOUNT:
            return self.user
        value = session_id if tier is Tier.CONVERSATION else channel
        if not value:
            raise ConfigError(f"a {tier.value} memory needs a scope (its {tier.value} id)")
        return value

    def _visible(self, session_id: str | None, channel: str | None) -> list[Scope]:
        scopes: list[Scope] = []
        if session_id:
            scopes.append((Tier.CONVERSATION, session_id))
        if channel:
            scopes.append((Tier.CHANNEL, channel))
        return [*scopes, (Tier.WORKSPACE, self.vault_scope), (Tier.ACCOUNT, self.user)]

    def _scopes(self, tier: Tier | None, scope: str | None, visible: list[Scope]) -> list[Scope]:
        """Explicit tier+scope; a tier alone: all its scopes; nothing: what a turn sees."""
        if tier is None:
            return visible
        if scope or tier in (Tier.WORKSPACE, Tier.ACCOUNT):
            return [(tier, self.scope_for(tier, scope))]
        repo = self._repo_for(tier, create=False)
        if repo is None:
            return []
        rows = repo.connect().execute(
            "SELECT DISTINCT scope FROM memories WHERE tier = ?", (tier.value,)
        )
        return [(tier, row[0]) for row in rows]

    def _targets(self, scopes: Sequence[Scope]) -> list[tuple[MemoryRepository, list[Scope]]]:
        local = [s for s in scopes if s[0] is not Tier.ACCOUNT]
        account = [s for s in scopes if s[0] is Tier.ACCOUNT]
        targets = [(self.repo, local)] if local else []
        account_repo = self._account_repo(create=False) if account else None
        if account_repo is not None:
            targets.append((account_repo, account))
        return targets

    # --- writing -------------------------------------------------------------------------

    def add(
        self,
        text: str,
        *,
        tier: Tier | str = Tier.WORKSPACE,
        scope: str | None = None,
        kind: MemoryKind | str = MemoryKind.SEMANTIC,
        importance: float | None = None,
        summary: str | None = None,
        themes: Sequence[str] | None = None,
        created_at: Any = None,
        source: MemorySource | dict[str, Any] | None = None,
        key: str | None = None,
    ) -> Memory:
        """Write one memory now and return it — or the existing one it was merged into.

        `created_at` (datetime, ISO string or epoch seconds) may lie in the past."""
        tier, kind = Tier(tier), MemoryKind(kind)
        text = text.strip()
        if not text:
            raise ConfigError("a memory needs some text")
        draft = MemoryDraft(
            tier=tier,
            scope=self.scope_for(tier, scope),
            kind=kind,
            text=text,
            summary=summary if summary is not None else ex.summarize(text),
            themes=tuple(themes) if themes is not None else ex.themes(text),
            importance=importance if importance is not None else ex.importance(text, kind),
            created_at=to_timestamp(created_at, time.time()),
            source=MemorySource.model_validate(source or {}),
            key=key,
        )
        vectors = self._embed([draft.text])
        memory = self._write([(draft, vectors[0])])[0]
        return memory

    def _write(self, drafts: list[tuple[MemoryDraft, np.ndarray | None]]) -> list[Memory]:
        out: list[Memory] = []
        for tier_group in (False, True):
            group = [d for d in drafts if (d[0].tier is Tier.ACCOUNT) == tier_group]
            if group:
                repo = self._account_repo(create=True) if tier_group else self.repo
                out += [r.memory for r in repo.write(group)]  # type: ignore[union-attr]
        self._register()
        return out

    def _embed(self, texts: list[str]) -> list[np.ndarray | None]:
        """Vectors for texts, or None each when there is no model or it fails (the memory
        is still written and found by token recall)."""
        if self.embedder is None or not texts:
            return [None] * len(texts)
        try:
            return list(self.embedder.encode(texts))
        except Exception as exc:
            self._count("embed_errors", exc)
            return [None] * len(texts)

    def _count(self, counter: str, exc: Exception) -> None:
        log.warning("memory %s: %s: %s", counter.replace("_", " "), type(exc).__name__, exc)
        with self._counters_lock:
            self._counters[counter] += 1

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
    ) -> bool:
        """Remember a finished turn in the background; returns at once.

        Observations are extracted (the configured extractor, the deterministic one if it
        fails), scored, tiered (the raw turn → conversation, facts → channel or workspace,
        personal facts and rules → account; `tier` puts them all in one tier) and the
        session's episodic arc is extended. `at` is the turn's time (default: now).
        A failing model or database never raises here: it is logged and counted in
        `stats`. Only a caller's mistake does (`tier="channel"` without a `channel`)."""
        tier = None if tier is None else Tier(tier)
        if tier is not None:
            self.scope_for(tier, session_id=session_id, channel=channel)
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
        return self._writer.submit(_TurnJob(turn, tier))

    def _prepare(self, jobs: list[_TurnJob | _TouchJob]) -> list[_Prepared]:
        """Extract and tier every turn of the batch, then embed all texts in one call."""
        per_job: list[list[MemoryDraft] | _TouchJob] = []
        arcs: dict[tuple[Tier, str, str], Memory] = {}
        said: dict[str, tuple[str, str]] = {}  # session -> (turn id, text) said last
        for job in jobs:
            if isinstance(job, _TouchJob):
                per_job.append(job)
            else:
                per_job.append(self._drafts(job, arcs, said))
        texts = [d.text for drafts in per_job if isinstance(drafts, list) for d in drafts]
        vectors = iter(self._embed(texts))
        return [
            _Prepared([], item)
            if isinstance(item, _TouchJob)
            else _Prepared([(d, next(vectors)) for d in item])
            for item in per_job
        ]

    def _drafts(
        self,
        job: _TurnJob,
        arcs: dict[tuple[Tier, str, str], Memory],
        said: dict[str, tuple[str, str]],
    ) -> list[MemoryDraft]:
        turn = job.turn
        try:
            observations = self.extractor.extract(turn)
            origin = self.extractor.name
        except Exception as exc:
            self._count("extract_errors", exc)
            observations, origin = self._fallback.extract(turn), self._fallback.name
        source = MemorySource(
            session_id=turn.session_id,
            turns=() if turn.turn_id is None else (turn.turn_id,),
            speaker=turn.user_name,
            paths=turn.paths,
            origin=origin,
        )
        drafts = [self._draft(o, turn, job.tier, source) for o in observations]
        if not turn.assistant.strip() and turn.user.strip() and turn.turn_id is not None:
            before = said.get(turn.session_id) or self._said_before(turn, job.tier)
            if before is not None:
                pair = source.model_copy(update={"turns": (before[0], turn.turn_id)})
                drafts.append(self._draft(ex.exchange(before[1], turn), turn, job.tier, pair))
            said[turn.session_id] = (turn.turn_id, ex.said(turn))
        arc_tier, arc_scope = self._place("shared", turn, job.tier)
        key = f"arc:{turn.session_id}"
        previous = arcs.get((arc_tier, arc_scope, key))
        if previous is None:
            repo = self._repo_for(arc_tier)
            found = repo.list([(arc_tier, arc_scope)], key_prefix=key, limit=1) if repo else []
            previous = next((m for m in found if m.key == key), None)
        observation = ex.extend_arc(previous, turn)
        arc_source = source.model_copy(update={"turns": ex.arc_turns(previous, turn, observation)})
        arc = replace(self._draft(observation, turn, job.tier, arc_source), whole_source=True)
        arcs[(arc_tier, arc_scope, key)] = Memory(
            id="pending", tier=arc_tier, scope=arc_scope, kind=arc.kind, text=arc.text,
            summary=arc.summary, themes=arc.themes, importance=arc.importance,
            created_at=arc.created_at, updated_at=arc.created_at,
            last_accessed=arc.created_at, source=arc_source, key=key,
        )  # fmt: skip
        return [*drafts, arc]

    def _said_before(self, turn: ex.Turn, tier: Tier | None) -> tuple[str, str] | None:
        """(turn id, text) of the one-speaker turn said last before `turn` in its session."""
        scope = self._place("turn", turn, tier)
        previous = self.repo.latest_turn(scope, turn.session_id, turn.at)
        if previous is None or len(previous.source.turns) != 1:
            return None
        return previous.source.turns[0], previous.text

    def _place(self, reach: str, turn: ex.Turn, tier: Tier | None) -> Scope:
        """The tier decision: who should see an observation."""
        if tier is None:
            if reach == "turn":
                tier = Tier.CONVERSATION
            elif reach == "personal":
                tier = Tier.ACCOUNT
            else:
                tier = Tier.CHANNEL if turn.channel else Tier.WORKSPACE
        return tier, self.scope_for(tier, session_id=turn.session_id, channel=turn.channel)

    def _draft(
        self, o: Observation, turn: ex.Turn, tier: Tier | None, source: MemorySource
    ) -> MemoryDraft:
        tier, scope = self._place(o.reach, turn, tier)
        return MemoryDraft(
            tier=tier,
            scope=scope,
            kind=o.kind,
            text=o.text,
            summary=o.summary or ex.summarize(o.text),
            themes=o.themes,
            importance=o.importance,
            created_at=turn.at,
            source=source,
            key=o.key,
        )

    def _commit(self, item: _Prepared) -> None:
        if item.touch is not None:
            for repo in (self.repo, self._account_repo(create=False)):
                if repo is not None:
                    repo.touch(item.touch.ids, item.touch.at)
            return
        self._write(item.drafts)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for every background write submitted so far; False on timeout."""
        return self._writer.flush(timeout)

    @property
    def stats(self) -> dict[str, Any]:
        """Background writer counters (submitted, written, errors, pending) and fallbacks."""
        s = self._writer.stats
        return {
            "submitted": s.submitted,
            "written": s.written,
            "errors": s.errors,
            "pending": s.pending,
            "last_error": s.last_error,
            **self._counters,
        }

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
    ) -> list[Memory]:
        """Memories ranked for `query`, each with `score` and `scores` (relevance, importance,
        recency, ranks). Without `tier`: what a turn of `session_id`/`channel` may see.
        `refresh` counts this as an access (recency restarts)."""
        return self._search(
            query, k=k, tier=tier, scope=scope, kinds=kinds, session_id=session_id,
            channel=channel, now=now, refresh=refresh, query_vector=query_vector,
        )[0]  # fmt: skip

    def _search(
        self, query: str, *, k: int, tier: Tier | str | None = None, scope: str | None = None,
        kinds: Sequence[MemoryKind | str] = (), session_id: str | None = None,
        channel: str | None = None, now: Any = None, refresh: bool = False,
        query_vector: np.ndarray | None = None,
    ) -> tuple[list[Memory], str]:  # fmt: skip
        at = to_timestamp(now, time.time())
        visible = self._visible(session_id, channel)
        scopes = self._scopes(None if tier is None else Tier(tier), scope, visible)
        result = hybrid_search(
            self._targets(scopes),
            query,
            kinds=[MemoryKind(kd) for kd in kinds] or list(MemoryKind),
            k=k,
            now=at,
            half_lives=self.half_lives,
            embed=self._embed_query,
            query_vector=query_vector,
            pool=self._pool,
            rrf_k=self.rrf_k,
        )
        if result.error:
            self._count("embed_errors", RuntimeError(result.error))
        if refresh and result.memories:
            self._writer.submit(_TouchJob(tuple(m.id for m in result.memories), at))
        return result.memories, result.retrieval_path

    def _retriever_search(
        self, query: str, *, k: int, query_vector: np.ndarray | None = None
    ) -> list[Memory]:
        return self.search(query, k=k, query_vector=query_vector)

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
    ) -> MemoryContext:
        """Everything memory gives one turn: facts and episodes for `query` (deduped),
        the user's procedural rules (always, not by query), on a session's first turn the
        latest episodic arc of an earlier session, and the design's diagnostics.
        `refresh=False` leaves access times alone: a replay or an evaluation must not
        change what it measures."""
        started = time.perf_counter()
        at = to_timestamp(now, time.time())
        visible = self._visible(session_id, channel)
        found, path = self._search(
            query, k=k * 3, kinds=(MemoryKind.SEMANTIC, MemoryKind.EPISODIC),
            session_id=session_id, channel=channel, now=at,
        )  # fmt: skip
        catch_up = self._catch_up(session_id, channel) if first_turn else None
        found = dedupe_moments(dedupe_episodes(found))
        entries = [m for m in found if catch_up is None or m.id != catch_up.id]
        entries = entries[:k]
        rules = self._rules(visible)
        targets = self._targets(visible)
        diagnostics = {
            "load_memory_ms": now_ms(started),
            "semantic_hits": sum(m.kind is MemoryKind.SEMANTIC for m in entries),
            "semantic_store_size": _store_size(targets, MemoryKind.SEMANTIC),
            "episodic_hits": sum(m.kind is MemoryKind.EPISODIC for m in entries)
            + (catch_up is not None),
            "episodic_store_size": _store_size(targets, MemoryKind.EPISODIC),
            "procedural_count": len(rules),
            "retrieval_path": path,
            "catch_up": catch_up is not None,
        }
        accessed = [m.id for m in entries] + ([catch_up.id] if catch_up else [])
        if accessed and refresh:  # after the clock stops: the refresh is written in the background
            self._writer.submit(_TouchJob(tuple(accessed), at))
        return MemoryContext(
            entries=entries, procedural_rules=rules, catch_up=catch_up, diagnostics=diagnostics
        )

    def _catch_up(self, session_id: str, channel: str | None) -> Memory | None:
        """The most recent arc of another session in this channel (or this vault)."""
        tier, scope = (Tier.CHANNEL, channel) if channel else (Tier.WORKSPACE, self.vault_scope)
        for memory in self.repo.list([(tier, scope)], key_prefix="arc:", limit=2):
            if memory.key != f"arc:{session_id}":
                return memory
        return None

    def _rules(self, visible: list[Scope]) -> list[Memory]:
        """Procedural rules of every visible scope, most important first; cached until a
        database changes, since every turn of a session asks for the same ones."""
        targets = self._targets(visible)
        key = (tuple(visible), tuple(repo.generation() for repo, _ in targets))
        cached = self._rules_cache.get(key[0])
        if cached is not None and cached[0] == key[1]:
            return cached[1]
        rules: list[Memory] = []
        for repo, scopes in targets:
            rules += repo.list(
                scopes,
                kinds=[MemoryKind.PROCEDURAL],
                order="importance DESC, updated_at DESC",
                limit=MAX_RULES,
            )
        rules.sort(key=lambda m: (-m.importance, -m.updated_at, m.id))
        if len(self._rules_cache) > 256:
            self._rules_cache.clear()
        self._rules_cache[key[0]] = (key[1], rules[:MAX_RULES])
        return rules[:MAX_RULES]

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
        for repo in (self.repo, self._account_repo(create=False)):
            if repo is None:
                continue
            scopes = None
            if tier is not None:
                t = Tier(tier)
                if (t is Tier.ACCOUNT) != (repo is not self.repo):
                    continue
                scopes = [(t, self.scope_for(t, scope))] if scope or t in (
                    Tier.WORKSPACE, Tier.ACCOUNT) else None  # fmt: skip
                out += repo.list(scopes, tier=t, kinds=kinds, limit=limit)
            else:
                out += repo.list(None, kinds=kinds, limit=limit)
        out.sort(key=lambda m: (-m.updated_at, m.id))
        return out[:limit] if limit is not None else out

    def get(self, memory_id: str) -> Memory | None:
        for repo in (self.repo, self._account_repo(create=False)):
            if repo is not None and (memory := repo.get(memory_id)) is not None:
                return memory
        return None

    def forget(self, ids: str | Iterable[str], *, soft: bool = False) -> int:
        """Delete memories for real (row, FTS text, vector; WAL truncated) — or, `soft`,
        only hide them. Returns how many were found. Waits for pending writes first."""
        ids = [ids] if isinstance(ids, str) else list(ids)
        self.flush()
        count = 0
        for repo in (self.repo, self._account_repo(create=False)):
            if repo is not None:
                count += repo.delete(ids, soft=soft)
        return count

    def export(self, *, tier: Tier | str | None = None, scope: str | None = None) -> list[dict]:
        """Memories as JSON-ready dicts (no vectors: they are recomputed on import)."""
        self.flush()
        return [m.to_dict() for m in reversed(self.list(tier=tier, scope=scope))]

    def import_(self, records: Iterable[dict[str, Any]]) -> int:
        """Write exported memories back, keeping their ids and times; an id that exists
        is updated, so importing twice changes nothing. Returns the number written."""
        drafts = []
        for record in records:
            tier = Tier(record["tier"])
            draft = MemoryDraft(
                tier=tier,
                scope=self.scope_for(tier, record.get("scope")),
                kind=MemoryKind(record.get("kind", "semantic")),
                text=record["text"],
                summary=record.get("summary") or ex.summarize(record["text"]),
                themes=tuple(record.get("themes") or ()),
                importance=float(record.get("importance", 0.5)),
                created_at=to_timestamp(record.get("created_at"), time.time()),
                source=MemorySource.model_validate(record.get("source") or {}),
                key=record.get("key"),
                id=record.get("id"),
            )
            drafts.append(draft)
        written = 0
        for start in range(0, len(drafts), 256):
            chunk = drafts[start : start + 256]
            vectors = self._embed([d.text for d in chunk])
            written += len(self._write(list(zip(chunk, vectors, strict=True))))
        return written

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
        account = self._account_repo(create=False)
        if self.repo.count() or (account is not None and account.count()):
            selector.add_retriever(self._retriever)

    # --- lifecycle -----------------------------------------------------------------------

    def close(self, timeout: float | None = 30.0) -> None:
        """Flush pending writes, stop the writer, close the databases."""
        self._writer.close(timeout)
        self._pool.shutdown(wait=True)
        self.repo.close()
        if self._account is not None:
            self._account.close()

    def __enter__(self) -> AgentMemoryFacade:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _store_size(targets: Sequence[tuple[MemoryRepository, list[Scope]]], kind: MemoryKind) -> int:
    return sum(repo.mirror.count(scopes, kind) for repo, scopes in targets)
