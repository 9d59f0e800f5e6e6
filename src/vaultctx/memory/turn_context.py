"""What memory gives one turn of a conversation: the ranked memories for its question (the
same ranking as `search`), the user's rules, a catch-up on the last session, diagnostics."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from .extract import ARC_KEY
from .mirror import Scope
from .models import Memory, MemoryContext, MemoryKind, Tier
from .places import MemoryPlaces, Target
from .ranking import SearchResult
from .store import MemoryRepository

if TYPE_CHECKING:
    from ..permissions.view import IndexView

MAX_RULES = 20

Rank = Callable[..., SearchResult]
Hidden = Mapping[MemoryRepository, Mapping[int, str]]
"""{database: {rowid: id}} of the memories a reader may not see."""


class TurnRecall:
    """Builds a turn's `MemoryContext`; caches the rules, which every turn of a session asks
    for, until a database changes. `hidden(reader)` names the memories a reader's view
    (None: memory's own reader's) hides."""

    def __init__(
        self,
        places: MemoryPlaces,
        rank: Rank,
        hidden: Callable[[IndexView | None], Hidden],
    ) -> None:
        self.places = places
        self._rank = rank
        self._hidden = hidden
        self._rules_cache: dict[tuple, tuple[tuple[int, ...], list[Memory]]] = {}

    def context(
        self, query: str, *, session_id: str, channel: str | None, first_turn: bool, k: int,
        now: float, reader: IndexView | None = None,
    ) -> MemoryContext:  # fmt: skip
        """Entries are the ranking of every memory the turn may see, less what the context
        already holds another way (the rules, the catch-up)."""
        started = time.perf_counter()
        visible = self.places.visible(session_id, channel)
        hidden_rows = self._hidden(reader)
        hidden = {i for rows in hidden_rows.values() for i in rows.values()}
        rules = [m for m in self.rules(visible) if m.id not in hidden]
        catch_up = self.catch_up(session_id, channel) if first_turn else None
        if catch_up is not None and catch_up.id in hidden:
            catch_up = None
        shown = {m.id for m in rules} | ({catch_up.id} if catch_up else set())
        ranked = self._rank(
            query, visible, k=k, now=now, exclude=shown, reader=reader, hidden=hidden_rows
        )
        entries = ranked.memories
        targets = self.places.targets(visible)
        diagnostics = {
            "load_memory_ms": round((time.perf_counter() - started) * 1000, 3),
            "semantic_hits": sum(m.kind is MemoryKind.SEMANTIC for m in entries),
            "semantic_store_size": _store_size(targets, MemoryKind.SEMANTIC, hidden_rows),
            "episodic_hits": sum(m.kind is MemoryKind.EPISODIC for m in entries)
            + (catch_up is not None),
            "episodic_store_size": _store_size(targets, MemoryKind.EPISODIC, hidden_rows),
            "procedural_count": len(rules),
            "retrieval_path": ranked.retrieval_path,
            "catch_up": catch_up is not None,
        }
        return MemoryContext(
            entries=entries, procedural_rules=rules, catch_up=catch_up, diagnostics=diagnostics
        )

    def catch_up(self, session_id: str, channel: str | None) -> Memory | None:
        """The most recent arc of another session in this channel (or this vault)."""
        places = self.places
        tier, scope = (Tier.CHANNEL, channel) if channel else (Tier.WORKSPACE, places.vault_scope)
        for memory in places.repo.list([(tier, scope)], key_prefix=ARC_KEY, limit=2):
            if memory.key != f"{ARC_KEY}{session_id}":
                return memory
        return None

    def rules(self, visible: list[Scope]) -> list[Memory]:
        """Procedural rules of every visible scope, most important first."""
        targets = self.places.targets(visible)
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


def _store_size(targets: Sequence[Target], kind: MemoryKind, hidden: Hidden) -> int:
    """The memories of `kind` the turn may recall."""
    return sum(repo.mirror.count(scopes, kind, hidden.get(repo, {})) for repo, scopes in targets)
