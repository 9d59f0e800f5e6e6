"""`ScratchpadRepository`: a conversation's working notes, by key, in the memory database.

Not memories: nothing is scored, decayed or retrieved by query. An agent writes what it is
in the middle of (a plan, a draft list) and reads it back on the next turn of the session.
"""

from __future__ import annotations

import time

from .store import MemoryRepository


class ScratchpadRepository:
    """Working notes of conversations, one text per (session, key)."""

    def __init__(self, repository: MemoryRepository) -> None:
        self._repo = repository

    def write(self, session_id: str, key: str, text: str) -> None:
        with self._repo.transaction() as conn:
            conn.execute(
                "INSERT INTO scratchpad(session_id, key, text, updated_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(session_id, key) DO UPDATE SET text = excluded.text,"
                " updated_at = excluded.updated_at",
                (session_id, key, text, time.time()),
            )

    def read(self, session_id: str, key: str) -> str | None:
        self._repo.refresh()  # on a team's database: what other servers wrote too
        row = (
            self._repo.connect()
            .execute(
                "SELECT text FROM scratchpad WHERE session_id = ? AND key = ?", (session_id, key)
            )
            .fetchone()
        )
        return row[0] if row else None

    def items(self, session_id: str) -> dict[str, str]:
        """Every note of a session, oldest first."""
        self._repo.refresh()
        rows = self._repo.connect().execute(
            "SELECT key, text FROM scratchpad WHERE session_id = ? ORDER BY updated_at, key",
            (session_id,),
        )
        return dict(rows.fetchall())

    def delete(self, session_id: str, key: str | None = None) -> int:
        """Remove one note, or (no key) the whole session's scratchpad."""
        with self._repo.transaction() as conn:
            if key is None:
                cur = conn.execute("DELETE FROM scratchpad WHERE session_id = ?", (session_id,))
            else:
                cur = conn.execute(
                    "DELETE FROM scratchpad WHERE session_id = ? AND key = ?", (session_id, key)
                )
            return cur.rowcount
