"""Where a turn's delegations run: each in a child process that can be stopped.

Past its time a child is killed and the turn goes on with `<agent>_timeout`; a child that
dies is `<agent>_failed`. Either way nothing is left half-written: the child never writes,
its parent applies checked writes atomically. A turn's first delegation starts a child
(a fresh Python importing no pydantic, index or model: tens of milliseconds), which serves
the turn's later delegations while they end cleanly; `close()` stops it, so no child
outlives the turn, and a turn that delegates nothing starts none.

Where no Python can be started (an app that embeds one) or config `agent_processes` is off,
delegations run in threads instead: same jobs, same results, but a thread past its time is
only flagged (its next tool call refuses to act), never stopped.
"""

from __future__ import annotations

import contextlib
import pickle
import queue
import signal
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from ..childproc import child_command, python_can_start, receive, send
from ..errors import VaultctxError
from .child import EVENTS, REQUESTS
from .host import DelegationHost
from .jobs import DelegationTimeout, Job, failure, perform, timed_out

THREAD_POLL_SECONDS = 0.05
_GONE = object()  # what the reading thread says when the child's output ends


class ChildGone(VaultctxError):
    """The child process died, closed its pipe or broke the protocol."""


class ChildProcess:
    """One child: the process, and a thread that queues what it says, so the parent can
    wait for it with a deadline."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            child_command("vaultctx.agent.child", "serve"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self._inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._reader = threading.Thread(target=self._read, name="vaultctx-child-read", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        while True:
            try:
                message = receive(self.process.stdout)
            except Exception:  # end of file, or bytes that are not a message
                self._inbox.put(_GONE)
                return
            self._inbox.put(message)

    def run(self, job: Job, host: DelegationHost) -> dict[str, Any]:
        """Send `job`, serve its requests and events, return its result. Raises
        `DelegationTimeout`, `ChildGone`, or what serving an event raised; the caller stops
        the child then."""
        self._send(job)
        while True:
            match self._next(host):
                case ("done", dict() as result):
                    return result
                case ("event", str() as name, tuple() as args, dict() as kwargs) if name in EVENTS:
                    getattr(host, name)(*args, **kwargs)
                case ("request", str() as name, tuple() as args, dict() as kwargs) if (
                    name in REQUESTS
                ):
                    self._send(self._answer(host, name, args, kwargs))
                case _:
                    raise ChildGone(f"the {job.agent} process broke the protocol")

    @staticmethod
    def _answer(
        host: DelegationHost, name: str, args: tuple, kwargs: dict[str, Any]
    ) -> tuple[str, Any]:
        try:
            return "ok", getattr(host, name)(*args, **kwargs)
        except DelegationTimeout:
            raise
        except Exception as exc:  # the job handles it as if the call had failed there
            return "raise", _portable(exc)

    def _next(self, host: DelegationHost) -> Any:
        while (left := host.remaining()) > 0:
            try:
                message = self._inbox.get(timeout=left)
            except queue.Empty:
                continue
            if message is _GONE:
                raise ChildGone(self._ending())
            return message
        raise DelegationTimeout

    def _send(self, value: object) -> None:
        assert self.process.stdin is not None
        # A dead child cannot read: the reading thread reports its end next.
        with contextlib.suppress(OSError, ValueError):
            send(self.process.stdin, value)

    def _ending(self) -> str:
        try:
            code = self.process.wait(timeout=1)  # its output ended: it is exiting, or broken
        except subprocess.TimeoutExpired:
            return "the process stopped talking (closed its pipe or sent nonsense)"
        if code < 0:
            return f"the process was killed by {signal.Signals(-code).name}"
        return f"the process exited with code {code}"

    def stop(self) -> None:
        """Kill the process if it still runs, reap it, and close the pipes."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._reader.join()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def _portable(exc: Exception) -> Exception:
    """`exc` if it survives the pipe, else a `VaultctxError` saying what it was."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return VaultctxError(f"{type(exc).__name__}: {exc}")
    return exc


class Delegates:
    """The delegations of one turn. Use as a context manager (or call `close`)."""

    def __init__(self, *, processes: bool = True) -> None:
        self.processes = processes and python_can_start()
        self._idle: ChildProcess | None = None

    def run(self, job: Job, host: DelegationHost) -> dict[str, Any]:
        """`job`'s result, or its structured error; never raises for the job's sake."""
        if not self.processes:
            return run_in_thread(job, host)
        try:
            child = self._idle or ChildProcess()
        except OSError as exc:
            return failure(job.agent, exc)
        self._idle = None
        try:
            result = child.run(job, host)
        except DelegationTimeout:
            child.stop()
            return timed_out(job.agent, job.timeout)
        except Exception as exc:  # it died or broke the protocol, or its log failed here
            child.stop()
            return failure(job.agent, exc)
        except BaseException:  # an interrupt: stop the child, then let it through
            child.stop()
            raise
        self._idle = child
        return result

    def close(self) -> None:
        if self._idle is not None:
            self._idle.stop()
            self._idle = None

    def __enter__(self) -> Delegates:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_in_thread(job: Job, host: DelegationHost) -> dict[str, Any]:
    """`job` in a fresh thread; past its time the thread is flagged and left behind."""
    cancelled = threading.Event()
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"vaultctx-{job.agent}")
    try:
        future = pool.submit(perform, job, host, cancelled)
        while True:
            try:
                return future.result(timeout=THREAD_POLL_SECONDS)
            except FutureTimeout:
                if host.remaining() <= 0:
                    cancelled.set()
                    return timed_out(job.agent, job.timeout)
            except DelegationTimeout:
                cancelled.set()
                return timed_out(job.agent, job.timeout)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
