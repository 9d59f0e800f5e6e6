"""What one delegation runs — a Worker's known-parameter calls, or a Researcher or skill
working with the model — whichever process runs it.

A job reaches the vault, the guard, the model and the turn's log only through its `Parent`:
in a child process that is a link over the pipe (`agent.child`), in the fallback thread the
parent's own `DelegationHost`. Jobs are plain data, pickled to the child; so is a model
job's `report`, a module-level function the child imports by name.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import VaultctxError
from ..llm import ToolCall
from .registers import INSTRUCTIONS, ContentProvider, ToolCallRecord
from .requests import ModelCall, ResponseRequestBuilder, TurnObserver
from .tools import VAULT_TOOLS, VAULT_TOOLS_BY_NAME, ToolContext, execute, schemas
from .vault import Guard, VaultAccess
from .worker import Worker

NOTE_TOOLS = ("read_note", "follow_links", "backlinks")


class DelegationTimeout(Exception):
    """The delegation's time ran out while the parent served one of its requests."""


class Parent(VaultAccess, Guard, TurnObserver, Protocol):
    """Everything a job may ask of the turn that delegated it."""

    complete: ModelCall


@dataclass(frozen=True)
class Job(ABC):
    """Common to every job: who runs it (`agent` names it in the log), in which vault and
    session, and how long it may take."""

    agent: str
    root: str
    session_id: str
    timeout: float

    @abstractmethod
    def run(self, ctx: ToolContext, parent: Parent) -> dict[str, Any]:
        """The job's result for the Orchestrator (a dict, or a structured error)."""


@dataclass(frozen=True)
class WorkerJob(Job):
    """The Worker's calls, run in order; each finished call reaches the parent as a
    `tool_finished` event, so what was done before a timeout is known."""

    calls: tuple[ToolCall, ...] = ()

    def run(self, ctx: ToolContext, parent: Parent) -> dict[str, Any]:
        return Worker(ctx, tools=VAULT_TOOLS_BY_NAME, observer=parent).execute(self.calls)


Report = Callable[[str, Sequence[ToolCallRecord]], dict[str, Any]]
"""report(final answer, the job's tool calls) -> what the Orchestrator reads."""


@dataclass(frozen=True)
class ModelJob(Job):
    """An agent that works with the model and the vault tools: up to `max_calls` model
    calls, the last of which may not call tools. Model failures raise (and become the
    delegation's structured error)."""

    messages: tuple[dict[str, Any], ...] = ()
    model: str = ""
    max_calls: int = 5
    report: Report | None = None

    def run(self, ctx: ToolContext, parent: Parent) -> dict[str, Any]:
        assert self.report is not None
        deadline = time.monotonic() + self.timeout
        builder = ResponseRequestBuilder(
            agent=self.agent,
            model=self.model,
            complete=parent.complete,
            tools=schemas(VAULT_TOOLS),
            timeout=self.timeout,
            observer=parent,
        )
        provider = ContentProvider()
        provider[INSTRUCTIONS].items.extend(self.messages)
        records: list[ToolCallRecord] = []
        for call_index in range(self.max_calls):
            remaining = max(deadline - time.monotonic(), 0.05)
            completion = builder.invoke(
                provider, final=call_index == self.max_calls - 1, timeout=remaining
            )
            if not completion.tool_calls:
                return self.report(completion.content or "", records)
            for call in completion.tool_calls:
                if ctx.cancelled.is_set():
                    break
                parent.tool_started(self.agent, call.id, call.name, call.arguments)
                record = execute(call, VAULT_TOOLS_BY_NAME, ctx)
                parent.tool_finished(record)
                records.append(record)
                provider.manifest.items.append(record)
        return {**self.report("", records), "incomplete": True}


def notes_read(records: Sequence[ToolCallRecord]) -> list[str]:
    """The notes a job's successful note tools looked at, sorted."""
    return sorted({r.output["path"] for r in records if r.name in NOTE_TOOLS and r.ok})


def answer_report(answer: str, records: Sequence[ToolCallRecord]) -> dict[str, Any]:
    """A plain answer and the notes behind it (a skill's report)."""
    return {"answer": answer.strip(), "notes_read": notes_read(records)}


def failure(agent: str, exc: BaseException) -> dict[str, Any]:
    """A delegation's exception as the structured error the Orchestrator's model reads."""
    message = str(exc) if isinstance(exc, VaultctxError) else f"{type(exc).__name__}: {exc}"
    return {"error": f"{agent}_failed", "message": message}


def timed_out(agent: str, timeout: float) -> dict[str, Any]:
    return {
        "error": f"{agent}_timeout",
        "message": f"the {agent} did not finish within {timeout:g} s",
    }


def perform(job: Job, parent: Parent, cancelled: threading.Event) -> dict[str, Any]:
    """Run `job` against `parent`; whatever it raises becomes `<agent>_failed`, except the
    parent's own `DelegationTimeout`, which its caller turns into `<agent>_timeout`."""
    ctx = ToolContext(
        vault=parent, guard=parent, session_id=job.session_id, agent=job.agent, cancelled=cancelled
    )
    try:
        return job.run(ctx, parent)
    except DelegationTimeout:
        raise
    except Exception as exc:  # the point of delegating: nothing escapes into the turn
        return failure(job.agent, exc)
