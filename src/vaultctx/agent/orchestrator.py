"""The Orchestrator: per user goal, answers from the SessionContext, delegates an
investigation to a Researcher, runs one of the user's skills, or hands known-parameter
actions to a Worker.

It executes no tool itself: every call becomes a delegation (`agent.delegates`) with its own
guard — the Researcher's allows only reads, a skill's only what the skill declares. Bounded:
at most `max_calls` model calls, the last of which may not call tools. The Orchestrator's
own model failing ends the turn with that error; a delegation failing, timing out or dying
only becomes a structured error result the model reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from ..errors import SkillError
from ..llm import LLMSettings, ToolCall
from ..permissions import Capability, PermissionGuard
from .delegates import Delegates
from .host import DelegationHost, audited_complete
from .jobs import ModelJob, WorkerJob
from .prepare import TurnPreparation, resolve_provider_model
from .protocols import IndexedVault
from .requests import ResponseRequestBuilder, TurnObserver
from .researcher import findings_report, research_job
from .skill_tools import TOOL_PREFIX, SkillTool, TurnSkills, answer_report, skill_job
from .tools import INVESTIGATE, VAULT_TOOL_SCHEMAS
from .trace import CompletionTrace
from .transcript import ToolCallRecord, Transcript

Report = Callable[[str, Sequence[ToolCallRecord]], dict[str, Any]]
"""report(a model job's final answer, its tool calls) -> what the Orchestrator's model reads."""

MAX_ORCHESTRATOR_CALLS = 6
GAVE_UP = "I could not finish this within the allowed number of steps."


@dataclass(frozen=True)
class TurnCrew:
    """What the Orchestrator delegates with in one turn: the vault, the turn's guard, the
    model settings, the log, where delegations run, and their limits. `skill_models`: a
    skill that names a model runs on it (not when the caller chose the turn's model)."""

    vault: IndexedVault
    guard: PermissionGuard
    session_id: str
    settings: LLMSettings
    observer: TurnObserver
    delegates: Delegates
    timeout: float
    skill_budget_tokens: int
    skill_models: bool


@dataclass
class OrchestratorRun:
    answer: str
    records: list[ToolCallRecord] = field(default_factory=list)
    traces: list[CompletionTrace] = field(default_factory=list)


class Orchestrator:
    def __init__(
        self, crew: TurnCrew, *, skills: TurnSkills, max_calls: int = MAX_ORCHESTRATOR_CALLS
    ) -> None:
        self.crew = crew
        self.skills = skills
        self.max_calls = max_calls
        self.traces: list[CompletionTrace] = []

    def run(self, preparation: TurnPreparation) -> OrchestratorRun:
        crew = self.crew
        transcript = Transcript([dict(m) for m in preparation.messages])
        builder = ResponseRequestBuilder(
            agent="orchestrator",
            model=crew.settings.model or "",
            complete=partial(audited_complete, settings=crew.settings, guard=crew.guard),
            tools=[*VAULT_TOOL_SCHEMAS, INVESTIGATE, *self.skills.schemas()],
            timeout=crew.timeout,
            observer=crew.observer,
            notes=preparation.notes,
        )
        self.traces = builder.traces
        run = OrchestratorRun(answer=GAVE_UP, traces=self.traces)
        for call_index in range(self.max_calls):
            completion = builder.invoke(transcript, final=call_index == self.max_calls - 1)
            if not completion.tool_calls:
                run.answer = (completion.content or "").strip()
                return run
            for record in self._dispatch(completion.tool_calls):
                transcript.pending.append(record)
                run.records.append(record)
        return run

    def _dispatch(self, calls: tuple[ToolCall, ...]) -> list[ToolCallRecord]:
        """Vault tool calls go, in order, to one Worker; then each investigation to a
        Researcher and each skill to its own run. Results come back in the order the model
        asked for them."""
        results: dict[str, ToolCallRecord] = {}
        actions = [call for call in calls if not self._delegated_alone(call)]
        if actions:
            for record in self._work(actions):
                results[record.call_id] = record
        for call in calls:
            if call.id in results:
                continue
            self.crew.observer.tool_started("orchestrator", call.id, call.name, call.arguments)
            if call.name == "investigate":
                output = self._investigate(call.arguments.get("question"))
            else:
                output = self._run_skill(call)
            record = ToolCallRecord(call.id, call.name, call.arguments, output)
            self.crew.observer.tool_finished(record)
            results[call.id] = record
        return [results[call.id] for call in calls]

    @staticmethod
    def _delegated_alone(call: ToolCall) -> bool:
        return call.name == "investigate" or call.name.startswith(TOOL_PREFIX)

    def _host(self, guard: PermissionGuard, settings: LLMSettings | None = None) -> DelegationHost:
        crew = self.crew
        return DelegationHost(
            crew.vault,
            guard,
            settings=settings or crew.settings,
            observer=crew.observer,
            timeout=crew.timeout,
        )

    def _work(self, calls: list[ToolCall]) -> list[ToolCallRecord]:
        crew = self.crew
        host = self._host(crew.guard)
        job = WorkerJob(
            agent="worker",
            root=str(crew.vault.root),
            session_id=crew.session_id,
            timeout=crew.timeout,
            calls=tuple(calls),
        )
        outcome = crew.delegates.run(job, host)
        done = {record.call_id: record for record in host.records}
        records = []
        for call in calls:
            record = done.get(call.id)
            if record is None:  # the worker never finished it: its error (timeout, crash)
                record = ToolCallRecord(call.id, call.name, call.arguments, outcome, "worker")
                crew.observer.tool_finished(record)
            records.append(record)
        return records

    def _investigate(self, question: Any) -> dict[str, Any]:
        if not isinstance(question, str) or not question.strip():
            return {"error": "invalid_arguments", "message": "question: a non-empty string"}
        crew = self.crew
        job = research_job(
            question,
            root=str(crew.vault.root),
            session_id=crew.session_id,
            model=crew.settings.model or "",
            timeout=crew.timeout,
        )
        host = self._host(crew.guard.restricted({Capability.VAULT_READ}))
        return self._run_model_job(job, host, findings_report)

    def _run_skill(self, call: ToolCall) -> dict[str, Any]:
        entry = self.skills.by_tool.get(call.name)
        if entry is None:
            return self.skills.unknown(call.name)
        crew = self.crew
        skill = entry.skill
        guard = crew.guard.restricted(skill.capabilities)
        settings = self._skill_settings(entry)
        try:
            job = skill_job(
                entry,
                call.arguments,
                vault=crew.vault,
                guard=guard,
                session_id=crew.session_id,
                model=settings.model or "",
                timeout=crew.timeout,
                budget_tokens=crew.skill_budget_tokens,
            )
        except SkillError as exc:
            return {"error": "invalid_arguments", "message": str(exc)}
        output = self._run_model_job(job, self._host(guard, settings), answer_report)
        return {"skill": skill.name, "path": skill.path, **output}

    def _run_model_job(self, job: ModelJob, host: DelegationHost, report: Report) -> dict[str, Any]:
        """The job's report, built here from its answer and the tool calls the host saw;
        or the delegation's structured error."""
        outcome = self.crew.delegates.run(job, host)
        if "error" in outcome:
            return outcome
        result = report(outcome["answer"], host.records)
        return {**result, "incomplete": True} if outcome.get("incomplete") else result

    def _skill_settings(self, entry: SkillTool) -> LLMSettings:
        """The skill's own model if it names one (and may), else the turn's."""
        if entry.skill.model is None or not self.crew.skill_models:
            return self.crew.settings
        provider, model = resolve_provider_model(None, entry.skill.model)
        return replace(self.crew.settings, model=f"{provider}/{model}")
