"""Session JSONL files: append-only, flushed per row, readable after a crash.

`<index dir>/sessions/<id>.jsonl` holds a `session` header row, then `message`,
`tool_call`, `tool_result`, `completion_trace` and `compaction` rows. A process killed
mid-write leaves at most a torn last line, which the reader skips.
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
from typing import Any

from ..errors import SessionNotFound
from ..storage.db import private_dir, private_file

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
        log.append(
            {
                "type": "session",
                "version": FORMAT_VERSION,
                "id": session_id,
                "vault": vault,
                "vaultctx_version": version,
            }
        )
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
        stamped = {**row, "ts": _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")}
        line = json.dumps(stamped, ensure_ascii=False, default=str) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()

    def rows(self) -> list[dict[str, Any]]:
        return read_rows(self.path)


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
