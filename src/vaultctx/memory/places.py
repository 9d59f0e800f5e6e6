"""Where memories live and who sees them: the vault's memory database, the account's, the
scope of each tier, and the tier decision for what a turn leaves behind."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from ..errors import ConfigError
from ..storage.books import OWN_FILE, MemoryBook
from .mirror import Scope
from .models import Tier
from .store import MemoryRepository

Target = tuple[MemoryRepository, list[Scope]]
"""One database and the scopes to search in it."""


class MemoryPlaces:
    """The vault's `memory.db` (always open) and the account's database (opened, or created,
    only when needed), with the rules that map a tier to its scope."""

    def __init__(
        self,
        repo: MemoryRepository,
        account_path: Path,
        *,
        vault_scope: str,
        user: str,
        account_book: MemoryBook = OWN_FILE,
        private_tiers: frozenset[Tier] = frozenset({Tier.ACCOUNT}),
        owns_repo: bool = True,
    ) -> None:
        """`account_book`: what keeps the account's file at `account_path` (on a team's
        database, its book there).
        `private_tiers`: the tiers kept in the account's database, not the vault's.
        `owns_repo`: False when `repo` is shared (and stays open on `close`)."""
        self.repo = repo
        self._owns_repo = owns_repo
        self.vault_scope = vault_scope
        self.user = user
        self.private_tiers = private_tiers
        self._account_path = account_path
        self._account_book = account_book
        self._account: MemoryRepository | None = None
        self._lock = threading.Lock()

    def account(self, *, create: bool) -> MemoryRepository | None:
        """The account database, created only when something is written to it (here, or
        to its book by another server)."""
        if self._account is None and (
            create or self._account_path.exists() or self._account_book.holds_rows()
        ):
            with self._lock:
                if self._account is None:
                    self._account = MemoryRepository(
                        self._account_path,
                        model_id=self.repo.model_id,
                        book=self._account_book,
                        merges_stale_copy=False,  # a person's book is dropped to erase it
                    )
        return self._account

    def is_private(self, tier: Tier) -> bool:
        """Whether `tier` lives in the account's database."""
        return tier in self.private_tiers

    def repo_for(self, tier: Tier, *, create: bool = True) -> MemoryRepository | None:
        return self.account(create=create) if self.is_private(tier) else self.repo

    def repos(self) -> list[MemoryRepository]:
        """The databases that exist: the vault's, and the account's if it was ever written."""
        account = self.account(create=False)
        return [self.repo] if account is None else [self.repo, account]

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

    def visible(self, session_id: str | None, channel: str | None) -> list[Scope]:
        """What a turn of `session_id` in `channel` sees: its conversation, its channel, the
        vault and the user."""
        scopes: list[Scope] = []
        if session_id:
            scopes.append((Tier.CONVERSATION, session_id))
        if channel:
            scopes.append((Tier.CHANNEL, channel))
        return [*scopes, (Tier.WORKSPACE, self.vault_scope), (Tier.ACCOUNT, self.user)]

    def scopes(self, tier: Tier | None, scope: str | None, visible: list[Scope]) -> list[Scope]:
        """Explicit tier+scope; a tier alone: all its scopes; nothing: what a turn sees."""
        if tier is None:
            return visible
        if scope or tier in (Tier.WORKSPACE, Tier.ACCOUNT):
            return [(tier, self.scope_for(tier, scope))]
        repo = self.repo_for(tier, create=False)
        if repo is None:
            return []
        rows = repo.connect().execute(
            "SELECT DISTINCT scope FROM memories WHERE tier = ?", (tier.value,)
        )
        return [(tier, row[0]) for row in rows]

    def targets(self, scopes: Sequence[Scope]) -> list[Target]:
        """The scopes grouped by the database that holds them."""
        local = [s for s in scopes if not self.is_private(s[0])]
        account = [s for s in scopes if self.is_private(s[0])]
        targets = [(self.repo, local)] if local else []
        account_repo = self.account(create=False) if account else None
        if account_repo is not None:
            targets.append((account_repo, account))
        return targets

    def place(self, reach: str, *, session_id: str, channel: str | None) -> Scope:
        """The tier decision for an observation of a turn: the raw turn → its conversation,
        what is shared → the channel (the vault without one), what is personal → the account."""
        if reach == "turn":
            tier = Tier.CONVERSATION
        elif reach == "personal":
            tier = Tier.ACCOUNT
        else:
            tier = Tier.CHANNEL if channel else Tier.WORKSPACE
        return tier, self.scope_for(tier, session_id=session_id, channel=channel)

    def close(self) -> None:
        if self._owns_repo:
            self.repo.close()
        if self._account is not None:
            self._account.close()
