"""A team on one database: people with a token each, what each may not read, and the log of
every request with who made it.

A token is shown once, when the person is added; the database keeps its SHA-256 only, so
reading the database does not give anyone's token. A revoked token stops working at the
next request: every request looks its token up (one indexed row).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from ...errors import ConfigError
from ..books import person_book
from ..people import OWNER, UNKNOWN, Person

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
# The longest text of a request the log keeps (a path, a method): anyone can send a request,
# and whoever reads the log must be able to read it.
LOGGED_CHARS = 200


def printable(text: str, limit: int = LOGGED_CHARS) -> str:
    """`text` safe to print: a control or invisible character (escape, line break, bidi
    override) written as its escape (`\\x1b`, `\\n`, `\\u202e`), and at most `limit` characters,
    the last an ellipsis when cut. Printable text is left as it is, so it is idempotent."""
    shown = "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text
    )
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Team:
    """The people of a database (`people.People`), through `query` (`PostgresReads.query`:
    a statement's rows, and `IndexUnavailable` when the database cannot be reached)."""

    OWNER: ClassVar[str] = OWNER
    UNKNOWN: ClassVar[str] = UNKNOWN

    def __init__(self, query: Callable[..., list[tuple]]) -> None:
        self._query = query

    def add(self, name: str, deny: Sequence[str] = ()) -> str:
        """Add a person (or give a revoked one a new start); their token, shown only now."""
        if not _NAME.fullmatch(name) or name in (self.OWNER, self.UNKNOWN):
            raise ConfigError(
                f"{name!r} cannot name a person: letters, digits and . _ @ - (at most 64),"
                f" and neither {self.OWNER!r} nor {self.UNKNOWN!r}"
            )
        token = secrets.token_urlsafe(32)
        added = self._query(
            "INSERT INTO people (name, token_sha256, deny) VALUES (%s, %s, %s)"
            " ON CONFLICT (name) DO UPDATE SET token_sha256 = excluded.token_sha256,"
            " deny = excluded.deny, created_at = now(), revoked_at = NULL"
            " WHERE people.revoked_at IS NOT NULL RETURNING name",
            (name, _digest(token), list(deny)),
        )
        if not added:
            raise ConfigError(f"{name} is already on the team: revoke them first for a new token")
        return token

    def revoke(self, name: str, *, forget: bool = False) -> bool:
        """Stop the person's token; False when no such person holds one. With `forget`,
        their own memories (their book) are erased from the database too — or, for someone
        revoked before, only that."""
        revoked = self._query(
            "UPDATE people SET revoked_at = now() WHERE name = %s AND revoked_at IS NULL"
            " RETURNING name",
            (name,),
        )
        if forget:
            erased = self._query(
                "DELETE FROM memory_books WHERE name = %s RETURNING name", (person_book(name),)
            )
            return bool(revoked or erased)
        return bool(revoked)

    def people(self) -> list[Person]:
        rows = self._query("SELECT name, deny, created_at, revoked_at FROM people ORDER BY name")
        return [
            Person(name, tuple(deny), _iso(created), _iso(revoked))
            for name, deny, created, revoked in rows
        ]

    def authenticate(self, token: str) -> Person | None:
        """The person whose live token this is, or None."""
        if not token:
            return None
        found = self._query(
            "SELECT name, deny FROM people WHERE token_sha256 = %s AND revoked_at IS NULL",
            (_digest(token),),
        )
        return Person(found[0][0], tuple(found[0][1])) if found else None

    def departed(self, names: Sequence[str]) -> list[str]:
        on_team = {p.name for p in self.people() if p.revoked_at is None}
        return [name for name in names if name not in on_team]

    def log(
        self, person: str, method: str, path: str, status: int, ms: float, server: str, at: float
    ) -> None:
        """One request, at the time it arrived (Unix seconds): it is written once answered,
        so a later, quicker request may be written first. Its method and path, which anyone
        sending a request chooses, are kept `printable`."""
        self._query(
            "INSERT INTO requests (at, person, method, path, status, ms, server)"
            " VALUES (to_timestamp(%s), %s, %s, %s, %s, %s, %s)",
            (at, person, printable(method), printable(path), status, ms, server),
        )

    def requests(self, limit: int = 50, person: str | None = None) -> list[dict[str, Any]]:
        """The latest requests, newest (to arrive) first, their text `printable` whoever
        wrote the rows."""
        rows = self._query(
            "SELECT at, person, method, path, status, ms, server FROM requests"
            " WHERE %s::text IS NULL OR person = %s ORDER BY at DESC, id DESC LIMIT %s",
            (person, person, limit),
        )
        return [
            {"at": _iso(at), "person": printable(who), "method": printable(method),
             "path": printable(path), "status": status, "ms": ms, "server": printable(server)}
            for at, who, method, path, status, ms, server in rows
        ]  # fmt: skip


def _iso(moment: Any) -> str | None:
    return moment.isoformat(timespec="seconds") if moment is not None else None
