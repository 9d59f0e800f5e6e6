"""Agent sessions in a team's database: any server resumes a session another one started.

A session is its rows in order (the header, then messages, tool calls and results, traces),
each committed when it is appended — what a session file gives a single host, a crash
included. The agent layer owns what a row says; this module stores and lists them
(`SharedSessions`, the database's `sessions.SessionStore`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ...errors import SessionNotFound
from ..sessions import (
    SESSION_ID,
    SessionFiles,
    SessionSummary,
    new_session_id,
    read_rows,
    session_header,
    stamped,
)
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


class SharedSession:
    """One session in a team's database (`sessions.SessionLog`): a file's rows, committed
    per row."""

    def __init__(self, shelf: SessionShelf, session_id: str) -> None:
        self.shelf = shelf
        self.session_id = session_id

    def append(self, row: dict[str, Any]) -> None:
        # the row as a file would hold it: what JSON cannot say is written as text
        self.shelf.append(self.session_id, [json.loads(json.dumps(stamped(row), default=str))])

    def rows(self) -> list[dict[str, Any]]:
        return self.shelf.rows(self.session_id)


class SharedSessions:
    """The sessions of a team's database (`sessions.SessionStore`); `files` are this host's
    session files, which it takes in and gives back."""

    def __init__(self, shelf: SessionShelf, files: SessionFiles) -> None:
        self.shelf = shelf
        self.files = files

    def create(self, *, vault: str, version: str) -> SharedSession:
        log = SharedSession(self.shelf, new_session_id())
        log.append(session_header(log.session_id, vault, version))
        return log

    def open(self, session_id: str) -> SharedSession:
        if not SESSION_ID.match(session_id) or not self.shelf.exists(session_id):
            raise SessionNotFound(f"no session {session_id!r} in the team's database")
        return SharedSession(self.shelf, session_id)

    def summaries(self) -> list[SessionSummary]:
        return [
            SessionSummary(sid, f"database:{sid}", started, updated, turns, first)
            for sid, started, updated, turns, first in self.shelf.lines()
        ]

    def move_in(self) -> int:
        """Copy the session files the database lacks into it, rows as they are (their times
        kept); how many. A vault's sessions move in with its index."""
        files = self.files.files()
        missing = sorted(set(files) - self.shelf.ids(list(files))) if files else []
        for session_id in missing:
            self.shelf.append(session_id, read_rows(files[session_id]))
        return len(missing)

    def move_out(self) -> int:
        """Write the database's sessions this host has no file of; how many. The way back."""
        written = 0
        for session_id in sorted(self.shelf.ids()):
            if self.files.lacks(session_id):
                self.files.write(session_id, self.shelf.rows(session_id))
                written += 1
        return written
