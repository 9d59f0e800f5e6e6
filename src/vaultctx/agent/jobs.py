"""What one delegation runs — a Worker's known-parameter calls, or a Researcher or skill
working with the model — whichever process runs it.

A job reaches the vault, the guard, the model and the turn's log only through its `Parent`:
in a child process that is a link over the pipe (`agent.child`), in the fallback thread the
parent's own `DelegationHost`. Jobs are plain data, pickled to the child, and this module
imports nothing heavy (no pydantic): what needs it — tool schemas, argument validation,
reading a model's JSON report — happens in the parent.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import VaultctxError
from ..llm.client import ToolCall
from ..storage.audit import SentNote
from .protocols import Guard, VaultAccess
from .requests import ModelCall, ResponseRequestBuilder, TurnObserver
from .tool_handlers import ToolContext, execute
from .transcript import Transcript
from .worker import Worker


class DelegationTimeout(Exception):
    """The delegation's time ran out while the parent served one of its requests."""


class Parent(VaultAccess, Guard, TurnObserver, Protocol):
    """Everything a job may ask of the turn that delegated it."""

    @property
    def complete(self) -> ModelCall:
        """The model call, settings bound (a method of the host; read, never set)."""
        ...


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
        return Worker(ctx, observer=parent).execute(self.calls)


@dataclass(frozen=True)
class ModelJob(Job):
    """An agent that works with the model and `tools` (their schemas): up to `max_calls`
    model calls, the last of which may not call tools. Its result is the final answer
    (`incomplete` when the calls ran out first); model failures raise and become the
    delegation's structured error. `notes`: those its `messages` hold (for the audit log)."""

    messages: tuple[dict[str, Any], ...] = ()
    tools: tuple[dict[str, Any], ...] = ()
    model: str = ""
    max_calls: int = 5
    notes: tuple[SentNote, ...] = ()

    def run(self, ctx: ToolContext, parent: Parent) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        builder = ResponseRequestBuilder(
            agent=self.agent,
            model=self.model,
            complete=parent.complete,
            tools=self.tools,
            timeout=self.timeout,
            observer=parent,
            notes=self.notes,
        )
        transcript = Transcript(list(self.messages))
        for call_index in range(self.max_calls):
            remaining = max(deadline - time.monotonic(), 0.05)
            completion = builder.invoke(
                transcript, final=call_index == self.max_calls - 1, timeout=remaining
            )
            if not completion.tool_calls:
                return {"answer": completion.content or ""}
            for call in completion.tool_calls:
                if ctx.cancelled.is_set():
                    break
                parent.tool_started(self.agent, call.id, call.name, call.arguments)
                record = execute(call, ctx)
                parent.tool_finished(record)
                transcript.pending.append(record)
        return {"answer": "", "incomplete": True}


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
