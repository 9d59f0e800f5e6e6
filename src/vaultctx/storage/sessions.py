"""Agent session logs: append-only, each row durable before `append` returns.

A session is a `session` header row, then `message`, `tool_call`, `tool_result`,
`completion_trace` and `compaction` rows; the agent layer owns what a row says. A vault's
backend keeps them (`SessionStore`): as files on the SQLite index (`SessionFiles`:
`<index dir>/sessions/<id>.jsonl`, where a process killed mid-write leaves at most a torn last
line, which the reader skips), or in a team's database (`postgres.session_shelf`), so any
server resumes a session another started.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..errors import SessionNotFound
from .db import private_dir, private_file

FORMAT_VERSION = 1
SESSIONS_DIRNAME = "sessions"  # beside the index
SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")


@dataclass(frozen=True)
class SessionSummary:
    """A line of `vaultctx sessions list`."""

    id: str
    path: str
    started: str | None
    updated: str | None
    turns: int
    first_question: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class SessionLog(Protocol):
    """One session, opened for appending."""

    session_id: str

    def append(self, row: dict[str, Any]) -> None:
        """Write one row: after this returns, a crash cannot lose it."""
        ...

    def rows(self) -> list[dict[str, Any]]:
        """Every readable row, header first."""
        ...


class SessionStore(Protocol):
    """Where a vault's agent sessions are kept."""

    def create(self, *, vault: str, version: str) -> SessionLog:
        """A new session, its header written."""
        ...

    def open(self, session_id: str) -> SessionLog:
        """An existing session, to resume; `SessionNotFound` if there is none."""
        ...

    def summaries(self) -> list[SessionSummary]:
        """Every session, most recently updated first."""
        ...

    def move_in(self) -> int:
        """Take in this host's session files the store lacks; how many."""
        ...

    def move_out(self) -> int:
        """Write the store's sessions this host has no file of; how many. The way back."""
        ...


def new_session_id() -> str:
    """Sortable by start time, unique enough for one user's vault."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def session_path(directory: Path, session_id: str) -> Path:
    """The file of `session_id`; ids that could name another path are refused."""
    if not SESSION_ID.match(session_id):
        raise SessionNotFound(f"not a session id: {session_id!r}")
    return directory / f"{session_id}.jsonl"


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Every complete row; a torn or garbled line (a killed writer) is skipped."""
    rows = []
    with path.open("rb") as handle:
        for line in handle:
            try:
                row = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            if isinstance(row, dict):
                rows.append(row)
    return rows


def session_header(session_id: str, vault: str, version: str) -> dict[str, Any]:
    return {
        "type": "session",
        "version": FORMAT_VERSION,
        "id": session_id,
        "vault": vault,
        "vaultctx_version": version,
    }


def stamped(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "ts": _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")}


class SessionFile:
    """One session's file, opened for appending. Thread-safe; each row is flushed."""

    def __init__(self, path: Path, session_id: str) -> None:
        self.path = path
        self.session_id = session_id
        self._lock = threading.Lock()

    def append(self, row: dict[str, Any]) -> None:
        """Write one row and flush it: after this returns, a crash cannot lose it."""
        line = json.dumps(stamped(row), ensure_ascii=False, default=str) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()

    def rows(self) -> list[dict[str, Any]]:
        return read_rows(self.path)


class SessionFiles:
    """Sessions as files in `directory` (`SessionStore`): the SQLite index's, and the
    files a team's database takes in and gives back."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def create(self, *, vault: str, version: str) -> SessionFile:
        session_id = new_session_id()
        private_dir(self.directory)
        log = SessionFile(private_file(session_path(self.directory, session_id)), session_id)
        log.append(session_header(session_id, vault, version))
        return log

    def open(self, session_id: str) -> SessionFile:
        """An existing session, to resume. A torn last line is closed off first, so the
        next row starts on a line of its own."""
        path = session_path(self.directory, session_id)
        if not path.is_file():
            raise SessionNotFound(f"no session {session_id!r} in {self.directory}")
        private_file(path)  # a session written before files were made private
        with path.open("rb+") as handle:
            handle.seek(0, 2)
            if handle.tell():
                handle.seek(-1, 2)
                if handle.read(1) != b"\n":
                    handle.write(b"\n")
        return SessionFile(path, session_id)

    def summaries(self) -> list[SessionSummary]:
        if not self.directory.is_dir():
            return []
        summaries = [summarize(p) for p in self.directory.glob("*.jsonl")]
        return sorted(summaries, key=lambda s: (s.updated or "", s.id), reverse=True)

    def move_in(self) -> int:
        return 0  # the files are this store

    def move_out(self) -> int:
        return 0

    def files(self) -> dict[str, Path]:
        """Every session file, by id."""
        found = self.directory.glob("*.jsonl") if self.directory.is_dir() else []
        return {p.stem: p for p in found if SESSION_ID.match(p.stem)}

    def lacks(self, session_id: str) -> bool:
        """Whether `session_id` could have a file here and has none."""
        return (
            bool(SESSION_ID.match(session_id))
            and not session_path(self.directory, session_id).exists()
        )

    def write(self, session_id: str, rows: list[dict[str, Any]]) -> None:
        """Write a session's rows as they are (their times kept)."""
        private_dir(self.directory)
        lines = (json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        private_file(session_path(self.directory, session_id)).write_text(
            "".join(lines), encoding="utf-8"
        )


def summarize(path: Path) -> SessionSummary:
    rows = read_rows(path)
    questions = [
        r.get("content", "") for r in rows if r.get("type") == "message" and r.get("role") == "user"
    ]
    return SessionSummary(
        id=path.stem,
        path=str(path),
        started=rows[0].get("ts") if rows else None,
        updated=rows[-1].get("ts") if rows else None,
        turns=len(questions),
        first_question=questions[0] if questions else "",
    )
