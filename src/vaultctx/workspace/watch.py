"""Live re-index: watch the vault and index changed notes while queries keep running.

A background thread turns file events (from `watchfiles`, debounced) into vault-relative
note paths and hands them to `Vault.index(paths=...)`. Each note is written in one
transaction, so a query running beside a re-index sees the old note or the new one, never
half of it. A folder created or moved in, or a changed `.vaultctxignore`, triggers a full
incremental run instead (its files send no events of their own); a deleted folder expands to
the indexed notes under it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Protocol

from ..errors import VaultctxError
from .indexer import IndexReport
from .scanner import IGNORE_FILENAME, excluded, is_hidden, is_note_path, load_ignore_spec

if TYPE_CHECKING:
    from ..config import Config
    from .db import IndexDatabase

log = logging.getLogger(__name__)

DEFAULT_DEBOUNCE_MS = 150
_TICK_MS = 200  # idle wake-up: proves the watch is live, retries a failed run (IndexLocked)
_READY_TIMEOUT_S = 10.0


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
        self, *, embed: bool | None = None, paths: list[str] | None = None
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
    ) -> None:
        self.vault = vault
        self.embed = embed
        self.debounce_ms = debounce_ms
        self.catch_up = catch_up
        self.on_index = on_index
        self.last_error: str | None = None
        self.runs = 0
        self._root = vault.root
        self._index_dir = vault.db.path.parent.resolve()
        self._spec = load_ignore_spec(self._root)
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None

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
        from watchfiles import watch

        pending = ChangeSet(frozenset(), full=self.catch_up)
        try:
            # yield_on_timeout: the first (possibly empty) batch proves the watch is live,
            # and later empty batches give failed runs a chance to be retried.
            for changes in watch(
                self._root,
                watch_filter=self._wanted,
                debounce=self.debounce_ms,
                step=50,
                stop_event=self._stop,
                rust_timeout=_TICK_MS,
                yield_on_timeout=True,
                raise_interrupt=False,
            ):
                self._ready.set()
                batch = self.classify(path for _, path in changes)
                pending = ChangeSet(pending.paths | batch.paths, pending.full or batch.full)
                if pending and self._index(pending):
                    pending = ChangeSet(frozenset())
        except Exception as exc:  # the watch itself died: say so, queries keep working
            self.last_error = f"watcher stopped: {type(exc).__name__}: {exc}"
            log.error(self.last_error)
        finally:
            self._ready.set()

    def _index(self, changes: ChangeSet) -> bool:
        """One incremental run; False when it failed and should be retried."""
        ws = self.vault
        embed = ws.config.embed if self.embed is None else self.embed
        try:
            # Text first, so the edit is searchable at once; then the vectors of new blocks,
            # which may take long when a whole vault still needs embedding.
            report = ws.index(embed=False, paths=None if changes.full else sorted(changes.paths))
            self._report(report)
            if embed:
                self._report(ws.index(embed=True, paths=[]))
        except VaultctxError as exc:  # typically IndexLocked: another process is indexing
            self.last_error = str(exc)
            return False
        return True

    def _report(self, report: IndexReport) -> None:
        self.last_error = report.embed_error
        self.runs += 1
        if self.on_index is not None and (report.changed or report.embedded):
            self.on_index(report)

    # --- events → paths ------------------------------------------------------------------

    def _relative(self, path: str) -> str | None:
        try:
            return Path(path).relative_to(self._root).as_posix()
        except ValueError:
            return None

    def _wanted(self, _change: object, path: str) -> bool:
        """watchfiles filter: drop the index folder and hidden entries before debouncing."""
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
            if rel is None or not self._wanted(None, abspath):
                continue
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
