"""Session logs: append-only, each row durable before `append` returns.

`<index dir>/sessions/<id>.jsonl` holds a `session` header row, then `message`,
`tool_call`, `tool_result`, `completion_trace` and `compaction` rows. A process killed
mid-write leaves at most a torn last line, which the reader skips. On a team's database
(`database_url`) the same rows live there instead (`SharedSessionLog`), so any server
resumes a session another started.
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
from typing import TYPE_CHECKING, Any

from ..errors import SessionNotFound
from ..storage.db import private_dir, private_file

if TYPE_CHECKING:
    from ..storage.postgres.session_shelf import SessionShelf

FORMAT_VERSION = 1
SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")


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


class SessionLog:
    """One session's file, opened for appending. Thread-safe; each row is flushed."""

    def __init__(self, path: Path, session_id: str) -> None:
        self.path = path
        self.session_id = session_id
        self._lock = threading.Lock()

    @classmethod
    def create(cls, directory: Path, *, vault: str, version: str) -> SessionLog:
        session_id = new_session_id()
        private_dir(directory)
        log = cls(private_file(session_path(directory, session_id)), session_id)
        log.append(_header(session_id, vault, version))
        return log

    @classmethod
    def open(cls, directory: Path, session_id: str) -> SessionLog:
        """An existing session, to resume. A torn last line is closed off first, so the
        next row starts on a line of its own."""
        path = session_path(directory, session_id)
        if not path.is_file():
            raise SessionNotFound(f"no session {session_id!r} in {directory}")
        private_file(path)  # a session written before files were made private
        with path.open("rb+") as handle:
            handle.seek(0, 2)
            if handle.tell():
                handle.seek(-1, 2)
                if handle.read(1) != b"\n":
                    handle.write(b"\n")
        return cls(path, session_id)

    def append(self, row: dict[str, Any]) -> None:
        """Write one row and flush it: after this returns, a crash cannot lose it."""
        line = json.dumps(_stamped(row), ensure_ascii=False, default=str) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()

    def rows(self) -> list[dict[str, Any]]:
        return read_rows(self.path)


class SharedSessionLog:
    """One session in a team's database: `SessionLog`'s rows, committed per row."""

    def __init__(self, shelf: SessionShelf, session_id: str) -> None:
        self.shelf = shelf
        self.session_id = session_id

    @classmethod
    def create(cls, shelf: SessionShelf, *, vault: str, version: str) -> SharedSessionLog:
        log = cls(shelf, new_session_id())
        log.append(_header(log.session_id, vault, version))
        return log

    @classmethod
    def open(cls, shelf: SessionShelf, session_id: str) -> SharedSessionLog:
        if not SESSION_ID.match(session_id) or not shelf.exists(session_id):
            raise SessionNotFound(f"no session {session_id!r} in the team's database")
        return cls(shelf, session_id)

    def append(self, row: dict[str, Any]) -> None:
        # the row as a file would hold it: what JSON cannot say is written as text
        self.shelf.append(self.session_id, [json.loads(json.dumps(_stamped(row), default=str))])

    def rows(self) -> list[dict[str, Any]]:
        return self.shelf.rows(self.session_id)


def _header(session_id: str, vault: str, version: str) -> dict[str, Any]:
    return {
        "type": "session",
        "version": FORMAT_VERSION,
        "id": session_id,
        "vault": vault,
        "vaultctx_version": version,
    }


def _stamped(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "ts": _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")}


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


def list_session_files(directory: Path) -> list[SessionSummary]:
    """Every session in `directory`, most recently updated first."""
    if not directory.is_dir():
        return []
    summaries = [summarize(p) for p in directory.glob("*.jsonl")]
    return sorted(summaries, key=lambda s: (s.updated or "", s.id), reverse=True)


def list_shared_sessions(shelf: SessionShelf) -> list[SessionSummary]:
    """Every session in the team's database, most recently updated first."""
    return [
        SessionSummary(sid, f"database:{sid}", started, updated, turns, first)
        for sid, started, updated, turns, first in shelf.lines()
    ]


def share_session_files(directory: Path, shelf: SessionShelf) -> int:
    """Copy the session files the database lacks into it, rows as they are (their times
    kept); how many. A vault's sessions move in with its index."""
    files = {
        p.stem: p for p in (directory.glob("*.jsonl") if directory.is_dir() else [])
        if SESSION_ID.match(p.stem)
    }  # fmt: skip
    missing = sorted(set(files) - shelf.ids(list(files))) if files else []
    for session_id in missing:
        shelf.append(session_id, read_rows(files[session_id]))
    return len(missing)


def write_session_files(directory: Path, shelf: SessionShelf) -> int:
    """Write the database's sessions this host has no file of; how many. The way back."""
    written = 0
    for session_id in sorted(shelf.ids()):
        if not SESSION_ID.match(session_id):
            continue
        path = session_path(directory, session_id)
        if not path.exists():
            private_dir(directory)
            lines = (json.dumps(r, ensure_ascii=False) + "\n" for r in shelf.rows(session_id))
            private_file(path).write_text("".join(lines), encoding="utf-8")
            written += 1
    return written
