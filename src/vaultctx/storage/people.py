"""The people a server answers: a token each, what each may not read, and the log of every
request with who made it — on a team's database (`postgres.team.Team`). The SQLite index has
no team (`NoTeam`): only the server's own token is let in, and nothing is logged."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from ..errors import ConfigError

OWNER = "owner"  # who a request made with the server's own token is logged as
UNKNOWN = "unknown"  # who a request with no valid token is logged as
NO_TEAM = "a team needs a database: set database_url (see `vaultctx config`)"


@dataclass(frozen=True)
class Person:
    name: str
    deny: tuple[str, ...] = ()  # vault paths (gitignore globs) hidden from this person
    created_at: str | None = None
    revoked_at: str | None = None


class People(Protocol):
    """The people of a vault's backend."""

    OWNER: ClassVar[str]
    UNKNOWN: ClassVar[str]

    def add(self, name: str, deny: Sequence[str] = ()) -> str:
        """Add a person (or give a revoked one a new start); their token, shown only now."""
        ...

    def revoke(self, name: str, *, forget: bool = False) -> bool:
        """Stop the person's token (with `forget`, erase their own memories too); False
        when there was nothing to stop or erase."""
        ...

    def people(self) -> list[Person]: ...

    def authenticate(self, token: str) -> Person | None:
        """The person whose live token this is, or None."""
        ...

    def departed(self, names: Sequence[str]) -> list[str]:
        """Those of `names` no longer on the team (revoked, or removed)."""
        ...

    def log(
        self, person: str, method: str, path: str, status: int, ms: float, server: str, at: float
    ) -> None:
        """One request, at the time it arrived (Unix seconds)."""
        ...

    def requests(self, limit: int = 50, person: str | None = None) -> list[dict[str, Any]]:
        """The latest requests, newest (to arrive) first."""
        ...


class NoTeam:
    """The SQLite index's people: nobody but the owner. Managing a team is refused
    (`ConfigError`); no token is anyone's, nobody departs, and requests are not logged."""

    OWNER: ClassVar[str] = OWNER
    UNKNOWN: ClassVar[str] = UNKNOWN

    def add(self, name: str, deny: Sequence[str] = ()) -> str:
        raise ConfigError(NO_TEAM)

    def revoke(self, name: str, *, forget: bool = False) -> bool:
        raise ConfigError(NO_TEAM)

    def people(self) -> list[Person]:
        raise ConfigError(NO_TEAM)

    def authenticate(self, token: str) -> Person | None:
        return None

    def departed(self, names: Sequence[str]) -> list[str]:
        return []

    def log(
        self, person: str, method: str, path: str, status: int, ms: float, server: str, at: float
    ) -> None:
        return None

    def requests(self, limit: int = 50, person: str | None = None) -> list[dict[str, Any]]:
        raise ConfigError(NO_TEAM)
