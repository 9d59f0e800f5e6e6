"""The background writer: persistence never blocks a response and never fails a turn.

Jobs go on a queue; one worker thread takes them in batches (so embeddings are computed a
batch at a time), prepares them, then commits each job in its own transaction. A failure is
logged and counted, never raised to the caller. `flush()` waits for everything submitted so
far; clean interpreter exit flushes; a killed process loses at most the job in flight,
because each commit is all-or-nothing. A batch whose store cannot be reached (a team's
database restarting: `IndexUnavailable`, met while preparing or committing) is tried again
for about half a minute before it counts as failed.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from ..errors import IndexUnavailable

log = logging.getLogger(__name__)

J = TypeVar("J")
P = TypeVar("P")
T = TypeVar("T")
R = TypeVar("R")

MAX_BATCH = 32
# Waits before trying an unreachable store again: 31 s in all.
RETRY_DELAYS_S = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0)


@dataclass(frozen=True)
class WriterStats:
    submitted: int
    written: int
    errors: int
    pending: int
    last_error: str | None


class BackgroundWriter(Generic[J, P]):
    """One worker thread: `prepare(batch)` (e.g. extract and embed), then `commit(item)`
    for each prepared item."""

    def __init__(
        self,
        prepare: Callable[[list[J]], list[P]],
        commit: Callable[[P], None],
        *,
        name: str = "vaultctx-memory-writer",
        max_batch: int = MAX_BATCH,
    ) -> None:
        self._prepare = prepare
        self._commit = commit
        self._max_batch = max_batch
        self._queue: queue.SimpleQueue[J | None] = queue.SimpleQueue()
        self._done = threading.Condition()
        self._submitted = 0
        self._finished = 0
        self._written = 0
        self._errors = 0
        self._last_error: str | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        atexit.register(_flush_at_exit, weakref.ref(self))

    # --- caller side ---------------------------------------------------------------------

    def submit(self, job: J) -> bool:
        """Queue a job; returns at once. False if the writer is closed (the job is dropped
        and counted as an error: a closed writer must not surprise a turn with an exception)."""
        with self._done:
            if self._closed:
                self._errors += 1
                self._last_error = "submitted after close"
                return False
            self._submitted += 1
        self._queue.put(job)
        return True

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every job submitted so far is written or has failed; False on timeout."""
        with self._done:
            target = self._submitted
            return self._done.wait_for(lambda: self._finished >= target, timeout)

    def close(self, timeout: float | None = 30.0) -> bool:
        """Flush, then stop the worker. Later submits are dropped."""
        with self._done:
            if self._closed:
                return True
            self._closed = True
        flushed = self.flush(timeout)
        self._queue.put(None)
        self._thread.join(timeout)
        return flushed

    @property
    def stats(self) -> WriterStats:
        with self._done:
            return WriterStats(
                submitted=self._submitted,
                written=self._written,
                errors=self._errors,
                pending=self._submitted - self._finished,
                last_error=self._last_error,
            )

    # --- worker side ---------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            batch = [job]
            stop = False
            while len(batch) < self._max_batch:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                batch.append(more)
            self._process(batch)
            if stop:
                return

    def _process(self, batch: list[J]) -> None:
        """Prepare must return one item per job; each item then commits on its own."""
        try:
            prepared = _retrying(self._prepare, batch)
            if len(prepared) != len(batch):
                raise RuntimeError(f"prepare returned {len(prepared)} items for {len(batch)} jobs")
        except Exception:
            # One bad job must not sink its batch: retry each alone.
            prepared = []
            for job in batch:
                try:
                    items = _retrying(self._prepare, [job])
                    if len(items) != 1:
                        raise RuntimeError(f"prepare returned {len(items)} items for 1 job")
                    prepared.append(items[0])
                except Exception as exc:
                    self._failed("prepare", exc)
                    self._finish()
        for item in prepared:
            try:
                _retrying(self._commit, item)
            except Exception as exc:
                self._failed("commit", exc)
            else:
                with self._done:
                    self._written += 1
            self._finish()

    def _failed(self, stage: str, exc: Exception) -> None:
        log.warning("memory write failed in %s: %s: %s", stage, type(exc).__name__, exc)
        with self._done:
            self._errors += 1
            self._last_error = f"{stage}: {type(exc).__name__}: {exc}"

    def _finish(self) -> None:
        with self._done:
            self._finished += 1
            self._done.notify_all()


def _retrying(step: Callable[[T], R], arg: T) -> R:
    """`step(arg)`, tried again while the store is unreachable (`RETRY_DELAYS_S`)."""
    for delay in RETRY_DELAYS_S:
        try:
            return step(arg)
        except IndexUnavailable as exc:
            log.warning("memory write waits %.2f s: %s", delay, exc)
            time.sleep(delay)
    return step(arg)


def _flush_at_exit(ref: weakref.ref[BackgroundWriter]) -> None:
    writer = ref()
    if writer is not None:
        writer.close(timeout=30.0)
