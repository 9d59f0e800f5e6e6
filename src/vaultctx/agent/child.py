"""A delegation's child process: a fresh Python that runs the jobs its parent sends.

It stays light — no index, no embedding model, no litellm, no pydantic: admitting a tool
call (its arguments, path and permission), select, link and tag lookups, writes, memory and
model calls are requests to the parent, which holds all of them warm, and so is a PDF's
text (the index's). Running the tools' handlers and reading note files happen here. Over
the pipe (`vaultctx.childproc` frames):

    parent → child   a `Job`; later ("ok", value) or ("raise", error), one per request
    child → parent   ("request", name, args, kwargs)  answered before the child goes on
                     ("event", name, args, kwargs)    the turn's log; no answer
                     ("done", result)                 the job's structured result

The child never writes to the vault or the session file, so stopping it at any moment
leaves both as the parent last committed them.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from ..childproc import receive, send
from ..llm.client import Completion
from ..permissions.capability import Capability
from ..storage.notefile import read_vault_file
from .jobs import Job, perform
from .protocols import Admission
from .trace import CompletionTrace
from .transcript import ToolCallRecord

REQUESTS = frozenset(
    {
        "select",
        "neighbours",
        "tagged",
        "indexed_sections",
        "create",
        "append",
        "remember",
        "admit",
        "permits",
        "complete",
    }
)
EVENTS = frozenset({"request_sent", "trace_recorded", "tool_started", "tool_finished"})


class ParentLink:
    """The child's `Parent`: each call a request to (or an event for) the parent process."""

    def __init__(self, source: BinaryIO, sink: BinaryIO, root: Path) -> None:
        self.source = source
        self.sink = sink
        self.root = root

    def _request(self, name: str, *args: Any, **kwargs: Any) -> Any:
        send(self.sink, ("request", name, args, kwargs))
        outcome, value = receive(self.source)
        if outcome == "raise":
            raise value
        return value

    def _event(self, name: str, *args: Any) -> None:
        send(self.sink, ("event", name, args, {}))

    # VaultAccess
    def select(self, query: str, k: int) -> list[dict[str, str | None]]:
        return self._request("select", query, k)

    def neighbours(self, path: str, *, incoming: bool) -> list[dict[str, str]]:
        return self._request("neighbours", path, incoming=incoming)

    def tagged(self, tag: str) -> list[dict[str, str]]:
        return self._request("tagged", tag)

    def read(self, path: str) -> str:
        indexed = functools.partial(self._request, "indexed_sections", path)
        return read_vault_file(self.root, path, indexed).content

    def create(self, path: str, text: str) -> bool:
        return self._request("create", path, text)

    def append(self, path: str, text: str) -> None:
        self._request("append", path, text)

    def remember(self, text: str, tier: str, scope: str | None, source: dict[str, Any]) -> str:
        return self._request("remember", text, tier, scope, source)

    # Guard
    def admit(self, tool: str, arguments: dict[str, Any]) -> Admission | dict[str, Any]:
        return self._request("admit", tool, arguments)

    def permits(self, capability: Capability, resource: str) -> bool:
        return self._request("permits", capability, resource)

    # the model (a `ModelCall`: tools, tool_choice and timeout by keyword)
    def complete(self, messages: Sequence[Mapping[str, Any]], **options: Any) -> Completion:
        return self._request("complete", list(messages), **options)

    # TurnObserver
    def request_sent(self, agent: str, invocation: int, messages: list[dict[str, Any]]) -> None:
        self._event("request_sent", agent, invocation, messages)

    def trace_recorded(self, trace: CompletionTrace) -> None:
        self._event("trace_recorded", trace)

    def tool_started(self, agent: str, call_id: str, name: str, arguments: dict) -> None:
        self._event("tool_started", agent, call_id, name, arguments)

    def tool_finished(self, record: ToolCallRecord) -> None:
        self._event("tool_finished", record)


def serve() -> None:
    """The child's loop: a job in, its requests and events out, its result out; until the
    parent closes the pipe (or stops the process)."""
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # the pipe carries frames only, whatever a library prints
    while True:
        try:
            job = receive(source)
        except EOFError:
            return
        assert isinstance(job, Job)
        link = ParentLink(source, sink, Path(job.root))
        send(sink, ("done", perform(job, link, threading.Event())))
