"""Agent sessions in a team's database: any server resumes a session another one started.

A session is its rows in order (the header, then messages, tool calls and results, traces),
each committed when it is appended — what a session file gives a single host, a crash
included. The agent layer owns what a row says; this module stores and lists them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .reads import PostgresReads

SessionLine = tuple[str, str | None, str | None, int, str]
"""(id, first row's time, last row's time, questions asked, the first question)."""


class SessionShelf:
    def __init__(self, reads: PostgresReads) -> None:
        self.reads = reads

    def exists(self, session_id: str) -> bool:
        return bool(
            self.reads.query(
                "SELECT 1 FROM session_rows WHERE session_id = %s LIMIT 1", (session_id,)
            )
        )

    def append(self, session_id: str, rows: Iterable[dict[str, Any]]) -> None:
        """Add rows to a session, in order, in one transaction."""
        from psycopg.types.json import Json

        with self.reads.transaction() as conn, conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO session_rows (session_id, row) VALUES (%s, %s)",
                [(session_id, Json(row)) for row in rows],
            )

    def rows(self, session_id: str) -> list[dict[str, Any]]:
        return [
            row
            for (row,) in self.reads.query(
                "SELECT row FROM session_rows WHERE session_id = %s ORDER BY seq", (session_id,)
            )
        ]

    def ids(self, among: list[str] | None = None) -> set[str]:
        """The sessions the database holds (of `among` only, when given)."""
        if among is None:
            rows = self.reads.query("SELECT DISTINCT session_id FROM session_rows")
        else:
            rows = self.reads.query(
                "SELECT DISTINCT session_id FROM session_rows WHERE session_id = ANY(%s)",
                (among,),
            )
        return {r[0] for r in rows}

    def lines(self) -> list[SessionLine]:
        """A line per session, most recently updated first."""
        return [
            (sid, started, updated, int(turns), first or "")
            for sid, started, updated, turns, first in self.reads.query(
                "SELECT session_id, (array_agg(row->>'ts' ORDER BY seq))[1],"
                " (array_agg(row->>'ts' ORDER BY seq DESC))[1],"
                " count(*) FILTER (WHERE row->>'type' = 'message' AND row->>'role' = 'user'),"
                " (array_agg(row->>'content' ORDER BY seq) FILTER"
                "  (WHERE row->>'type' = 'message' AND row->>'role' = 'user'))[1]"
                " FROM session_rows GROUP BY session_id"
                " ORDER BY 3 DESC NULLS LAST, session_id DESC"
            )
        ]
