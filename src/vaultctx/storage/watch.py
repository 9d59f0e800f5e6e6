"""Live re-index: watch the vault and index changed notes while queries keep running.

A background thread turns file events (from `watchfiles`, debounced) into vault-relative
note paths and hands them to `Vault.index(paths=...)`. Each note is written in one
transaction, so a query running beside a re-index sees the old note or the new one, never
half of it. A folder created or moved in, or a changed `.vaultctxignore`, triggers a full
incremental run instead (its files send no events of their own); a deleted folder expands to
the indexed notes under it.

No single file stops it: a run that fails is logged, recorded in the index for `status`,
and retried as a full run. A watch that dies (watchfiles cannot name a file whose name is
not UTF-8) is replaced by full incremental runs every second, and started again, later and
later, until it works; the error stays in `status` until then.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Protocol

from ..errors import VaultctxError
from .db import IndexDatabase
from .indexer import IndexReport
from .scanner import IGNORE_FILENAME, excluded, is_hidden, is_note_path, is_utf8, load_ignore_spec

if TYPE_CHECKING:
    from ..config import Config

log = logging.getLogger(__name__)

DEFAULT_DEBOUNCE_MS = 150
_TICK_MS = 200  # idle wake-up: proves the watch is live, retries a failed run (IndexLocked)
_READY_TIMEOUT_S = 10.0
_MAX_BACKOFF_S = 30.0
_POLL_S = 1.0  # while the OS watch cannot run: look for changes this often
WATCH_ERROR_KEY = "watch_error"
"""Index meta: the last failure of a watcher ({"at", "error"} JSON), for `status` in any
process; cleared by the watcher's next run that works."""


@dataclass(frozen=True)
class ChangeSet:
    """What one debounced batch of file events asks the indexer to do."""

    paths: frozenset[str]
    full: bool = False

    def __bool__(self) -> bool:
        return self.full or bool(self.paths)


class WatchedVault(Protocol):
    """What the watcher needs of a `Vault` (which creates it): where it is, and `index`."""

    root: Path
    config: Config
    db: IndexDatabase

    def index(
        self,
        *,
        embed: bool | None = None,
        paths: list[str] | None = None,
        reembed_seconds: float | None = None,
    ) -> IndexReport: ...


class VaultWatcher:
    """Watches one vault in a daemon thread; `stop()` ends it.

    `on_index(report)` is called after each run that changed the index (from the watcher's
    thread); `last_error` holds the most recent failure, which is retried until it clears.
    """

    def __init__(
        self,
        vault: WatchedVault,
        *,
        embed: bool | None = None,
        debounce_ms: int = DEFAULT_DEBOUNCE_MS,
        catch_up: bool = True,
        on_index: Callable[[IndexReport], None] | None = None,
        index: Callable[..., IndexReport] | None = None,
        switch: Callable[[], object] | None = None,
    ) -> None:
        """`index`: what a run calls instead of `vault.index` (the workspace's, which also
        brings a team's memories up to date). `switch` starts making the configured model's
        vectors in the background when the index answers with another's
        (`Vault.switch_in_background`): a run of the watcher leaves that work to it."""
        self.vault = vault
        self._run_index = vault.index if index is None else index
        self.embed = embed
        self.debounce_ms = debounce_ms
        self.catch_up = catch_up
        self.on_index = on_index
        self._switch = switch
        self.last_error: str | None = None
        self.runs = 0
        self.indexing = False  # a run is under way: an editor says "indexing"
        self._root = vault.root
        self._index_dir = vault.db.path.parent.resolve()
        self._spec = load_ignore_spec(self._root)
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._run_failures = 0  # failed runs in a row
        self._watch_failures = 0  # failed watches in a row
        self._watch_error: str | None = None  # why the OS watch cannot run, while it cannot
        self._error_recorded = bool(vault.db.get_meta(WATCH_ERROR_KEY))  # by an earlier watcher
        self._retry_at = 0.0  # time.monotonic() before which a failed run waits

    # --- lifecycle -----------------------------------------------------------------------

    def start(self) -> VaultWatcher:
        """Start watching; returns once the OS watch is in place, so no later save is missed."""
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._run, name="vaultctx-watch", daemon=True)
        self._thread.start()
        self._ready.wait(_READY_TIMEOUT_S)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> VaultWatcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- the loop ------------------------------------------------------------------------

    def _run(self) -> None:
        embed = self.vault.config.embed if self.embed is None else self.embed
        if embed and self._switch is not None:
            self._switch()  # a change of model left under way, whatever is saved
        pending = ChangeSet(frozenset(), full=self.catch_up)
        while not self._stop.is_set():
            try:
                pending = self._watch(pending)
            except Exception as exc:  # e.g. watchfiles cannot decode a file name
                self._watch_failures += 1
                self._watch_error = (
                    f"cannot watch the vault ({type(exc).__name__}: {exc});"
                    f" looking for changes every {_POLL_S:g} s instead"
                )
                self._failed(self._watch_error, first=self._watch_failures == 1)
                self._ready.set()
                # The events of the batch that failed are lost: catch up with full runs.
                pending = self._poll(pending, self._backoff(self._watch_failures))
        self._ready.set()

    def _watch(self, pending: ChangeSet) -> ChangeSet:
        """Watch until stopped (or the watch fails: it raises)."""
        from watchfiles import watch

        # yield_on_timeout: the first (possibly empty) batch proves the watch is live, and
        # later empty batches give failed runs a chance to be retried. No watch_filter:
        # watchfiles yields nothing for a batch it filtered out entirely, and a server's
        # queries touch the index files all the time, which would put the retries off.
        for changes in watch(
            self._root,
            watch_filter=None,
            debounce=self.debounce_ms,
            step=50,
            stop_event=self._stop,
            rust_timeout=_TICK_MS,
            yield_on_timeout=True,
            raise_interrupt=False,
        ):
            self._ready.set()
            self._watch_failures, self._watch_error = 0, None
            batch = self.classify(path for _, path in changes)
            pending = ChangeSet(pending.paths | batch.paths, pending.full or batch.full)
            if pending and time.monotonic() >= self._retry_at:
                pending = self._index(pending)
        return pending

    def _poll(self, pending: ChangeSet, seconds: float) -> ChangeSet:
        """What the watch does, without it, for `seconds`: a full incremental run (which
        reads only changed files) every `_POLL_S`. Returns a full run still to do, so the
        next watch starts by catching up."""
        deadline = time.monotonic() + seconds
        while True:
            if time.monotonic() >= self._retry_at:
                pending = self._index(ChangeSet(pending.paths, full=True))
            wait = min(_POLL_S, deadline - time.monotonic())
            if wait <= 0 or self._stop.wait(wait):
                return ChangeSet(pending.paths, full=True)

    def _index(self, changes: ChangeSet) -> ChangeSet:
        """One incremental run; returns what is left to retry (nothing when it worked).

        Another process indexing (`IndexLocked`) is retried at the next tick. Anything else
        is logged and recorded in the index, for `status`; the retry is then a full run
        (which reads each file on its own), later and later while it keeps failing.
        """
        ws = self.vault
        embed = ws.config.embed if self.embed is None else self.embed
        self.indexing = True
        try:
            # Text first, so the edit is searchable at once; then the vectors of new blocks,
            # which may take long when a whole vault still needs embedding. A change of
            # model is `switch`'s work, beside these runs.
            paths = None if changes.full else sorted(changes.paths)
            self._report(self._run_index(embed=False, paths=paths))
            if embed:
                report = self._run_index(embed=True, paths=[], reembed_seconds=0)
                self._report(report)
                if report.reembed_left and self._switch is not None:
                    self._switch()
        except VaultctxError as exc:  # typically IndexLocked: another process is indexing
            self.last_error = str(exc)
            return changes
        except Exception as exc:
            self._run_failures += 1
            self._failed(f"re-index failed: {type(exc).__name__}: {exc}", first=True)
            self._retry_at = time.monotonic() + self._backoff(self._run_failures)
            return ChangeSet(changes.paths, full=True)
        finally:
            self.indexing = False
        self._run_failures = 0
        if self._error_recorded and self._watch_error is None:
            self._error_recorded = not record_watch_error(ws.db, None)
        return ChangeSet(frozenset())

    def _failed(self, message: str, *, first: bool) -> None:
        """Say why (log, `last_error`, the index's meta); called while handling the error.
        A failure repeating the one before is logged without its traceback."""
        self.last_error = message
        log.error(message, exc_info=first)
        self._error_recorded = record_watch_error(self.vault.db, message) or self._error_recorded

    @staticmethod
    def _backoff(failures: int) -> float:
        """Seconds before retrying after `failures` in a row: 0.4 s doubling up to 30."""
        return min(_MAX_BACKOFF_S, _TICK_MS / 1000 * 2 ** min(failures, 10))

    def _report(self, report: IndexReport) -> None:
        self.last_error = report.embed_error or self._watch_error
        self.runs += 1
        answers_changed = report.embedded > report.reembedded or report.switched_to
        if self.on_index is not None and (report.changed or answers_changed):
            self.on_index(report)

    # --- events → paths ------------------------------------------------------------------

    def _relative(self, path: str) -> str | None:
        try:
            return Path(path).relative_to(self._root).as_posix()
        except ValueError:
            return None

    def _wanted(self, path: str) -> bool:
        """Leave out the index folder and hidden entries."""
        if Path(path).is_relative_to(self._index_dir):
            return False
        rel = self._relative(path)
        if rel is None or rel in ("", "."):
            return False
        if rel == IGNORE_FILENAME:
            return True
        return not any(is_hidden(part) for part in rel.split("/"))

    def classify(self, abspaths: Iterable[str]) -> ChangeSet:
        """Map changed absolute paths to note paths to re-index, or ask for a full run."""
        notes: set[str] = set()
        full = False
        for abspath in abspaths:
            rel = self._relative(abspath)
            if rel is None or not is_utf8(rel) or not self._wanted(abspath):
                continue  # a name that is not UTF-8 is never indexed (scanner.py)
            if rel == IGNORE_FILENAME:
                self._spec = load_ignore_spec(self._root)
                full = True
            elif is_note_path(PurePosixPath(rel).name):
                if not excluded(self._spec, rel):
                    notes.add(rel)
            elif Path(abspath).is_dir():
                full = True  # a folder created or moved in: its notes sent no events
            elif not Path(abspath).exists():
                notes.update(self._indexed_under(rel))  # a deleted folder, or nothing
        return ChangeSet(frozenset(notes), full)

    def _indexed_under(self, folder: str) -> list[str]:
        prefix = folder.rstrip("/") + "/"
        rows = self.vault.db.connect().execute(
            "SELECT path FROM notes WHERE path >= ? AND path < ?", (prefix, prefix[:-1] + "0")
        )
        return [row[0] for row in rows]


def record_watch_error(db: IndexDatabase, message: str | None) -> bool:
    """Write (or, with None, clear) the watcher's last failure in the index; best effort,
    since the failure may be the index itself. True when written."""
    value = json.dumps({"at": time.time(), "error": message}) if message else ""
    try:
        with db.transaction() as conn:
            IndexDatabase.set_meta(conn, WATCH_ERROR_KEY, value)
    except (VaultctxError, sqlite3.Error):
        return False
    return True
