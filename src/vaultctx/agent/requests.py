"""The ResponseRequestBuilder: sends an agent's `Transcript` as one model request (the
agent's only call of `vaultctx.llm.complete`) and fills that call's trace.

The request is the transcript's messages as they stand (`Transcript.request`); after a
successful call the tool results it delivered and the model's answer join the transcript.

Each call declares the notes whose text its messages hold (an `AuditNote` for the audit
log): those the instructions were built from, and every note a tool result so far names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..errors import LLMError
from ..llm import Completion
from ..storage.audit import AuditNote, SentNote
from .trace import CompletionTrace, CompletionTraceStep
from .transcript import ToolCallRecord, Transcript


class TurnObserver(Protocol):
    """Who hears about a turn as it happens: the request handler, which persists every
    event as a session row and shows tool activity live."""

    def request_sent(self, agent: str, invocation: int, messages: list[dict[str, Any]]) -> None: ...

    def trace_recorded(self, trace: CompletionTrace) -> None: ...

    def tool_started(self, agent: str, call_id: str, name: str, arguments: dict) -> None: ...

    def tool_finished(self, record: ToolCallRecord) -> None: ...


class ModelCall(Protocol):
    """One model call with the agent's settings already bound: `llm.complete` in the turn's
    process, a request to the parent in a delegation's child."""

    def __call__(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]],
        tool_choice: str | None,
        timeout: float,
        audit: AuditNote | None = None,
    ) -> Completion: ...


def notes_in(output: Any) -> list[str]:
    """Every note path a tool's output names (`path` at any depth), in order: what of the
    vault a tool result brings into the messages."""
    found: list[str] = []
    if isinstance(output, Mapping):
        path = output.get("path")
        if isinstance(path, str) and path:
            found.append(path)
        for value in output.values():
            if isinstance(value, Mapping | list):
                found.extend(notes_in(value))
    elif isinstance(output, list):
        for value in output:
            found.extend(notes_in(value))
    return found


def assistant_message(completion: Completion) -> dict[str, Any]:
    """The model's turn as it must be sent back before its tool results."""
    message: dict[str, Any] = {"role": "assistant", "content": completion.content}
    if completion.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.raw_arguments or json.dumps(call.arguments),
                },
            }
            for call in completion.tool_calls
        ]
    return message


class ResponseRequestBuilder:
    """Builds and sends the requests of one agent (`agent` names it in traces, `model` is
    what `complete` calls). `notes` are those the instructions were built from."""

    def __init__(
        self,
        *,
        agent: str,
        model: str,
        complete: ModelCall,
        tools: Sequence[Mapping[str, Any]],
        timeout: float,
        observer: TurnObserver,
        notes: Sequence[SentNote] = (),
    ) -> None:
        self.agent = agent
        self.model = model
        self.complete = complete
        self.observer = observer
        self.tools = list(tools)
        self.timeout = timeout
        self.traces: list[CompletionTrace] = []
        self.last_messages: list[dict[str, Any]] = []
        self.notes: dict[str, SentNote] = {n.path: n for n in notes}

    def audit(self, transcript: Transcript) -> AuditNote:
        """The notes in the next request: the instructions', and those named by the tool
        results delivered so far (they stay in the transcript) or about to be."""
        for record in transcript.pending:
            for path in notes_in(record.output):
                self.notes.setdefault(path, SentNote(path))
        return AuditNote(purpose="agent", notes=tuple(self.notes.values()))

    def invoke(
        self, transcript: Transcript, *, final: bool = False, timeout: float | None = None
    ) -> Completion:
        """One model call. `final` forbids tools (the last allowed call must answer).
        Raises the `LLMError` of a failed call after recording it in the trace."""
        messages = transcript.request()
        self.last_messages = messages
        trace = CompletionTrace(agent=self.agent, invocation=len(self.traces) + 1, model=self.model)
        self.traces.append(trace)
        trace.steps.append(
            CompletionTraceStep(
                "request",
                {"messages": len(messages), "tools": len(self.tools), "final": final},
            )
        )
        self.observer.request_sent(self.agent, trace.invocation, messages)
        try:
            completion = self.complete(
                messages,
                tools=self.tools,
                tool_choice="none" if final else None,
                timeout=timeout or self.timeout,
                audit=self.audit(transcript),
            )
        except LLMError as exc:
            record = exc.record
            trace.outcome = getattr(record, "outcome", "error")
            trace.latency_ms = getattr(record, "latency_ms", 0.0)
            trace.error = str(exc)
            trace.summary = f"failed: {exc}"
            self.observer.trace_recorded(trace)
            raise
        record = completion.record
        trace.tokens_in, trace.tokens_out = record.tokens_in, record.tokens_out
        trace.latency_ms, trace.outcome = record.latency_ms, record.outcome
        for call in completion.tool_calls:
            trace.steps.append(CompletionTraceStep("tool_call", {"id": call.id, "name": call.name}))
        if completion.tool_calls:
            names = ", ".join(call.name for call in completion.tool_calls)
            trace.summary = f"{len(completion.tool_calls)} tool call(s): {names}"
        else:
            trace.summary = f"answer: {len(completion.content or '')} chars"
            trace.steps.append(CompletionTraceStep("answer", {"finish": completion.finish_reason}))
        self.observer.trace_recorded(trace)
        transcript.answered(assistant_message(completion))
        return completion
