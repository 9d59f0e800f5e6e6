"""The Orchestrator: per user goal, answers from the SessionContext, delegates an
investigation to a Researcher, or hands known-parameter actions to a Worker.

Bounded: at most `max_calls` model calls, the last of which may not call tools. The
Orchestrator's own model failing ends the turn with that error; a Researcher or Worker
failing only becomes a structured error result the model reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..llm import LLMSettings, ToolCall
from .isolation import run_isolated
from .prepare import TurnPreparation
from .registers import INSTRUCTIONS, ContentProvider, ToolCallRecord
from .requests import ResponseRequestBuilder, TurnObserver
from .researcher import Researcher
from .tools import ORCHESTRATOR_TOOLS, ToolContext
from .trace import CompletionTrace
from .worker import Worker

MAX_ORCHESTRATOR_CALLS = 6
GAVE_UP = "I could not finish this within the allowed number of steps."


@dataclass
class OrchestratorRun:
    answer: str
    records: list[ToolCallRecord] = field(default_factory=list)
    traces: list[CompletionTrace] = field(default_factory=list)


class Orchestrator:
    def __init__(
        self,
        ctx: ToolContext,
        *,
        settings: LLMSettings,
        timeout: float,
        observer: TurnObserver,
        max_calls: int = MAX_ORCHESTRATOR_CALLS,
    ) -> None:
        self.ctx = ctx
        self.settings = settings
        self.timeout = timeout
        self.observer = observer
        self.max_calls = max_calls
        self.tools = {tool.name: tool for tool in ORCHESTRATOR_TOOLS}
        self.traces: list[CompletionTrace] = []

    def run(self, preparation: TurnPreparation) -> OrchestratorRun:
        provider = ContentProvider()
        provider[INSTRUCTIONS].items.extend(dict(m) for m in preparation.messages)
        builder = ResponseRequestBuilder(
            agent="orchestrator",
            settings=self.settings,
            tools=ORCHESTRATOR_TOOLS,
            timeout=self.timeout,
            observer=self.observer,
        )
        self.traces = builder.traces
        run = OrchestratorRun(answer=GAVE_UP, traces=self.traces)
        for call_index in range(self.max_calls):
            completion = builder.invoke(provider, final=call_index == self.max_calls - 1)
            if not completion.tool_calls:
                run.answer = (completion.content or "").strip()
                return run
            for record in self._dispatch(completion.tool_calls):
                provider.manifest.items.append(record)
                run.records.append(record)
        return run

    def _dispatch(self, calls: tuple[ToolCall, ...]) -> list[ToolCallRecord]:
        """Investigations go to a Researcher each; the other calls, in order, to a Worker.
        Results come back in the order the model asked for them."""
        results: dict[str, ToolCallRecord] = {}
        actions = [call for call in calls if call.name != "investigate"]
        if actions:
            for record in self._work(actions):
                results[record.call_id] = record
        for call in calls:
            if call.name == "investigate":
                self.observer.tool_started("orchestrator", call.id, call.name, call.arguments)
                output = self._investigate(call.arguments.get("question"))
                record = ToolCallRecord(call.id, call.name, call.arguments, output)
                self.observer.tool_finished(record)
                results[call.id] = record
        return [results[call.id] for call in calls]

    def _work(self, calls: list[ToolCall]) -> list[ToolCallRecord]:
        ctx = ToolContext(
            ws=self.ctx.ws, guard=self.ctx.guard, session_id=self.ctx.session_id, agent="worker"
        )
        worker = Worker(ctx, tools=self.tools, observer=self.observer)
        guard = self.ctx.guard
        asked_before = guard.asking_seconds
        outcome = run_isolated(
            lambda: worker.execute(calls),
            agent="worker",
            timeout=self.timeout,
            cancelled=ctx.cancelled,
            waiting_seconds=lambda: guard.asking_seconds - asked_before,
        )
        done = {record.call_id: record for record in worker.records}
        # Calls the worker never finished carry its error (timeout or crash).
        return [
            done.get(call.id)
            or ToolCallRecord(call.id, call.name, call.arguments, outcome, "worker")
            for call in calls
        ]

    def _investigate(self, question: Any) -> dict[str, Any]:
        if not isinstance(question, str) or not question.strip():
            return {"error": "invalid_arguments", "message": "question: a non-empty string"}
        researcher = Researcher(
            self.ctx, settings=self.settings, timeout=self.timeout, observer=self.observer
        )
        return run_isolated(
            lambda: researcher.investigate(question),
            agent="researcher",
            timeout=self.timeout,
            cancelled=researcher.ctx.cancelled,
        )
