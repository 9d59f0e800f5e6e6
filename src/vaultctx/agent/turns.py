"""The AgentRequestHandler: one session's turns, end to end, and everything persisted.

It owns persistence and rehydration: history comes back from the session log, and every
event of a turn (the exact system prompts sent, tool calls and results, one trace per model
call, the question and the answer) is appended to it as it happens.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._version import __version__
from ..errors import NoteNotFound
from ..llm import LLMSettings, count_tokens, require_client
from ..permissions import Asker, Capability, Destination, PermissionGuard, destination_of
from ..pipeline.context import SessionContext
from ..storage.audit import AuditLog
from ..storage.sessions import SESSIONS_DIRNAME, SessionLog, SessionSummary
from .compaction import compact, history_from_rows
from .delegates import Delegates
from .orchestrator import Orchestrator, OrchestratorRun, TurnCrew
from .prepare import TurnPreparation, TurnPreparer, resolve_provider_model
from .skill_tools import NO_SKILLS, TurnSkills, skills_for_turn
from .tools import writable_tiers
from .trace import CompletionTrace
from .transcript import ToolCallRecord
from .workspace_vault import WorkspaceVault

if TYPE_CHECKING:
    from .protocols import TurnWorkspace
    from .skills import SkillRun

log = logging.getLogger(__name__)

CITATION = re.compile(r"\[\[([^\]|#^]+)(?:[#^|][^\]]*)?\]\]")

EventHandler = Callable[[str, dict[str, Any]], None]
"""on_event(kind, data): "tool_call" when a tool starts, "tool_result" when it ends."""


@dataclass(frozen=True)
class TurnResult:
    """One answered turn: the answer, the notes it cites (that exist), what tools did,
    one trace per model call, and where it was logged. `skills_offered` are the skills the
    model was offered as tools (each with why); `skills_ran` those it called."""

    answer: str
    citations: tuple[str, ...]
    tool_activity: tuple[dict[str, Any], ...]
    traces: tuple[CompletionTrace, ...]
    session_id: str
    context_hash: str
    prompt_render_hash: str
    model: str
    skills_offered: tuple[dict[str, str], ...] = ()
    skills_ran: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "citations": list(self.citations),
            "tool_activity": list(self.tool_activity),
            "traces": [t.to_dict() for t in self.traces],
            "session_id": self.session_id,
            "context_hash": self.context_hash,
            "prompt_render_hash": self.prompt_render_hash,
            "model": self.model,
            "skills_offered": list(self.skills_offered),
            "skills_ran": list(self.skills_ran),
        }


def sessions_dir(ws: TurnWorkspace) -> Path:
    """Session files live beside the index: `<vault>/.vaultctx/sessions/` by default."""
    return ws.db.path.parent / SESSIONS_DIRNAME


def list_sessions(ws: TurnWorkspace) -> list[SessionSummary]:
    return ws.sessions.summaries()


def move_sessions(ws: TurnWorkspace, *, back: bool = False) -> int:
    """On a team's database: copy this host's session files it lacks into it — or, `back`,
    its sessions this host has no file of into files; how many."""
    return ws.sessions.move_out() if back else ws.sessions.move_in()


def load_session(ws: TurnWorkspace, session_id: str) -> list[dict[str, Any]]:
    """Every readable row of one session, header first. `SessionNotFound` if none."""
    return open_session(ws, session_id).rows()


def open_session(ws: TurnWorkspace, session_id: str) -> SessionLog:
    """A session to resume: its file, or (on a team's database) its rows there."""
    return ws.sessions.open(session_id)


def cited_notes(ws: TurnWorkspace, answer: str) -> tuple[str, ...]:
    """The `[[path]]` citations of an answer that name notes in the index, deduplicated."""
    found: list[str] = []
    for target in CITATION.findall(answer):
        try:
            path = ws.resolve_note(target.strip())[0]
        except NoteNotFound:
            continue
        if path not in found:
            found.append(path)
    return tuple(found)


@dataclass
class _Turn:
    number: int
    render_hash: str
    activity: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class _PreparedTurn:
    """A turn ready to run: its session and number, what it may do and read, the skills it
    is offered, and the Orchestrator's prepared messages."""

    session_id: str
    number: int
    guard: PermissionGuard
    vault: WorkspaceVault
    context: SessionContext
    skills: TurnSkills
    preparation: TurnPreparation

    def question_metadata(self, skill: SkillRun | None) -> dict[str, Any]:
        """What the question's row records besides the question: the hashes of what was
        sent, the gate, and the skill that was run or those that were offered."""
        metadata: dict[str, Any] = {
            "kind": "chat",
            "context_hash": self.preparation.context_hash,
            "prompt_render_hash": self.preparation.prompt_render_hash,
            "gate": self.context.gate,
        }
        if skill is not None:
            metadata["skill"] = {
                "name": skill.skill.name,
                "path": skill.skill.path,
                "inputs": skill.inputs,
            }
        if self.skills.in_vault:
            metadata["skills_offered"] = [entry.to_dict() for entry in self.skills.offered]
            metadata["skills_in_vault"] = self.skills.in_vault
        return metadata


def _turn_number(rows: list[dict[str, Any]]) -> int:
    """The number of the turn about to run: one more than the questions logged so far."""
    return 1 + sum(1 for r in rows if r.get("type") == "message" and r.get("role") == "user")


class AgentRequestHandler:
    """A session of one vault: `handle(question)` runs one turn. Pass `session_id` to
    resume an existing session; otherwise a new one is created on the first turn."""

    def __init__(
        self,
        ws: TurnWorkspace,
        *,
        session_id: str | None = None,
        model: str | None = None,
        asker: Asker | None = None,
        on_event: EventHandler | None = None,
        preparer: TurnPreparer | None = None,
    ) -> None:
        self.ws = ws
        self.model = model
        self.asker = asker
        self.on_event = on_event
        self.preparer = preparer or TurnPreparer(model_chain=(model, ws.config.llm_model))
        self.log: SessionLog | None = (
            open_session(ws, session_id) if session_id is not None else None
        )
        self._turn: _Turn | None = None
        self._lock = threading.Lock()
        self._destination = Destination.CLIENT  # the turn's model's, once a turn is prepared

    @property
    def session_id(self) -> str | None:
        return self.log.session_id if self.log else None

    def history(self) -> list[dict[str, str]]:
        """Rehydrated from the session file: what the model saw in earlier turns."""
        return history_from_rows(self.log.rows()) if self.log else []

    def handle(self, question: str, *, skill: SkillRun | None = None) -> TurnResult:
        """Context → memory → prepared messages (compacted when over the context budget)
        → Orchestrator → logged answer → memory persisted in the background.
        `LLMNotConfigured` before any work without a model, `LLMNotInstalled` without its
        client (the `llm` extra).

        Otherwise the vault's skills are the Orchestrator's tools (the few most relevant to
        `question` when there are many). With `skill`, `question` is its rendered template,
        step 6 holds the skill's context and the guard allows only the skill's declared
        capabilities."""
        provider, model = resolve_provider_model(None, self.model, self.preparer.model_chain)
        require_client()
        settings = LLMSettings.resolve(
            self.ws.config,
            model=f"{provider}/{model}",
            timeout=self.ws.config.agent_timeout,
            audit_log=AuditLog.of(self.ws.db.path.parent).path,
        )
        # The turn's delegations share a child process; none outlives the turn.
        with Delegates(processes=self.ws.config.agent_processes) as delegates:
            return self._run_turn(question, skill, settings, delegates)

    def _run_turn(
        self,
        question: str,
        skill: SkillRun | None,
        settings: LLMSettings,
        delegates: Delegates,
    ) -> TurnResult:
        """Prepare the turn, log the question, run the Orchestrator, log the answer and
        persist memory, then report what the turn did."""
        turn = self._prepare_turn(question, skill, settings)
        self._turn = _Turn(turn.number, turn.preparation.prompt_render_hash)
        self._row("message", role="user", content=question, metadata=turn.question_metadata(skill))
        orchestrator = self._orchestrator(turn, settings, delegates)
        run = self._orchestrate(orchestrator, turn.preparation)
        citations = self._record_answer(question, run.answer, turn)
        return self._result(turn, orchestrator, run, citations)

    def _session_log(self) -> SessionLog:
        """The session's log; a new session's is created on its first turn."""
        if self.log is None:
            self.log = self.ws.sessions.create(vault=str(self.ws.root), version=__version__)
        return self.log

    def _prepare_turn(
        self, question: str, skill: SkillRun | None, settings: LLMSettings
    ) -> _PreparedTurn:
        """What the turn runs with (its session started on the first turn): its guard, the
        context that guard lets it read, the skills on offer, and the messages prepared from
        all of it and the session so far."""
        log = self._session_log()
        rows = log.rows()
        destination = destination_of(settings.model or "", settings.api_base)
        self._destination = destination
        guard = self._guard(skill, destination)
        vault = WorkspaceVault(self.ws, destination)
        context = readable_context(
            self.ws.context(question, model=settings.model),  # same model, litellm form
            guard,
        )
        skill_context = (
            skill.context(vault, guard, budget_tokens=self.ws.config.budget_tokens)
            if skill is not None
            else None
        )
        skills = skills_for_turn(self.ws, question, destination) if skill is None else NO_SKILLS
        number = _turn_number(rows)
        preparation = self._prepare_messages(
            question,
            log.session_id,
            rows,
            number,
            context=context,
            skill_context=skill_context,
            skills=skills,
        )
        return _PreparedTurn(log.session_id, number, guard, vault, context, skills, preparation)

    def _guard(self, skill: SkillRun | None, destination: Destination) -> PermissionGuard:
        """The vault's policy for what goes to the turn's model (`destination`); for a
        skill, only the capabilities it declares."""
        guard = PermissionGuard(self.ws.policy.current(), asker=self.asker, destination=destination)
        if skill is not None:
            guard = guard.restricted(skill.skill.capabilities)
        return guard

    def _prepare_messages(
        self,
        question: str,
        session_id: str,
        rows: list[dict[str, Any]],
        number: int,
        *,
        context: SessionContext,
        skill_context: str | None,
        skills: TurnSkills,
    ) -> TurnPreparation:
        """The Orchestrator's messages, with the session's history and the memory for
        `question` (compacted when over the context window)."""
        history = history_from_rows(rows)
        prepare = partial(
            self.preparer.prepare,
            session_id=session_id,
            user_message=question,
            context=context,
            memory_context_text=self._memory_text(question, session_id, first=not history),
            skill_context=skill_context,
            skills=[(entry.skill.name, entry.tool) for entry in skills.offered],
            skills_in_vault=skills.in_vault,
        )
        return self._compacted(prepare(history=history), prepare, rows, number, question)

    def _orchestrator(
        self, turn: _PreparedTurn, settings: LLMSettings, delegates: Delegates
    ) -> Orchestrator:
        """The Orchestrator and its crew, with this handler as the observer that logs."""
        crew = TurnCrew(
            vault=turn.vault,
            guard=turn.guard,
            session_id=turn.session_id,
            settings=settings,
            observer=self,
            delegates=delegates,
            timeout=self.ws.config.agent_timeout,
            skill_budget_tokens=self.ws.config.budget_tokens,
            skill_models=self.model is None,
        )
        return Orchestrator(crew, skills=turn.skills)

    def _orchestrate(
        self, orchestrator: Orchestrator, preparation: TurnPreparation
    ) -> OrchestratorRun:
        """The Orchestrator's run; a failure is logged as the turn's answer, then raised."""
        try:
            return orchestrator.run(preparation)
        except Exception as exc:
            self._row(
                "message",
                role="assistant",
                content="",
                metadata={"kind": "error", "error": f"{type(exc).__name__}: {exc}"},
            )
            raise

    def _record_answer(self, question: str, answer: str, turn: _PreparedTurn) -> tuple[str, ...]:
        """Log the answer with the notes it cites, then persist the turn to memory.
        Returns the citations."""
        citations = cited_notes(self.ws, answer)
        self._row(
            "message",
            role="assistant",
            content=answer,
            metadata={"kind": "chat", "citations": list(citations)},
        )
        self._persist_memory(question, answer, turn.session_id, citations, turn.guard)
        return citations

    def _result(
        self,
        turn: _PreparedTurn,
        orchestrator: Orchestrator,
        run: OrchestratorRun,
        citations: tuple[str, ...],
    ) -> TurnResult:
        """What the caller is told: the answer, its citations, what the tools and skills did,
        one trace per model call, and the hashes and model that identify what was sent."""
        assert self._turn is not None
        preparation = turn.preparation
        return TurnResult(
            answer=run.answer,
            citations=citations,
            tool_activity=tuple(self._turn.activity),
            traces=tuple(orchestrator.traces),
            session_id=turn.session_id,
            context_hash=preparation.context_hash,
            prompt_render_hash=preparation.prompt_render_hash,
            model=preparation.litellm_model,
            skills_offered=tuple(entry.to_dict() for entry in turn.skills.offered),
            skills_ran=tuple(turn.skills.ran(run.records)),
        )

    def _compacted(
        self,
        preparation: TurnPreparation,
        prepare: Callable[..., TurnPreparation],
        rows: list[dict[str, Any]],
        number: int,
        question: str,
    ) -> TurnPreparation:
        """`preparation`, or — when its messages exceed `context_window_tokens` — one
        prepared from a compacted history, after logging the `compaction` row."""
        config = self.ws.config
        before = count_tokens(list(preparation.messages), model=preparation.litellm_model)
        if before <= config.context_window_tokens:
            return preparation
        cheap = LLMSettings.resolve(
            config, timeout=config.agent_timeout, audit_log=AuditLog.of(self.ws.db.path.parent).path
        )
        compaction = compact(
            rows, question=question, keep_turns=config.compaction_keep_turns, settings=cheap
        )
        if compaction is None:  # only the kept turns are left: send as is
            return preparation
        row = compaction.row(number)
        compacted = prepare(history=history_from_rows([*rows, row]))
        after = count_tokens(list(compacted.messages), model=compacted.litellm_model)
        assert self.log is not None
        self.log.append({**row, "tokens_before": before, "tokens_after": after})
        return compacted

    # --- memory (best-effort: a memory problem never fails a turn) -------------------------

    def _memory_text(self, question: str, session_id: str, *, first: bool) -> str:
        try:
            memory = self.ws.memory.retrieve_for_turn(
                question,
                session_id=session_id,
                first_turn=first,
                reader=self.ws.view(self._destination),  # where the turn's text goes
            )
            return memory.text
        except Exception as exc:
            log.warning("memory retrieval failed: %s: %s", type(exc).__name__, exc)
            return ""

    def _persist_memory(
        self,
        question: str,
        answer: str,
        session_id: str,
        paths: tuple[str, ...],
        guard: PermissionGuard,
    ) -> None:
        """Only in the tiers the turn's guard lets memory write without asking: a policy that
        denies `memory.write`, or a skill that does not declare it, leaves nothing behind."""
        tiers = writable_tiers(guard)
        if not tiers:
            return
        try:
            self.ws.memory.persist_turn(
                question, answer, session_id=session_id, paths=paths, tiers=tiers
            )
        except Exception as exc:
            log.warning("memory persist failed: %s: %s", type(exc).__name__, exc)

    # --- rows (the TurnObserver the agents report to) --------------------------------------

    def _row(self, kind: str, **fields: Any) -> None:
        assert self.log is not None and self._turn is not None
        self.log.append({"type": kind, "turn": self._turn.number, **fields})

    def request_sent(self, agent: str, invocation: int, messages: list[dict[str, Any]]) -> None:
        """The exact system prompt of each agent's first request, for debugging."""
        if invocation == 1:
            self._row(
                "message",
                role="system",
                content=messages[0]["content"],
                metadata={"debug": "system_prompt", "agent": agent},
            )

    def trace_recorded(self, trace: CompletionTrace) -> None:
        self._row("completion_trace", **trace.to_dict())

    def tool_started(self, agent: str, call_id: str, name: str, arguments: dict) -> None:
        data = {"agent": agent, "call_id": call_id, "name": name, "arguments": arguments}
        self._row("tool_call", **data)
        if self.on_event:
            self.on_event("tool_call", data)

    def tool_finished(self, record: ToolCallRecord) -> None:
        data = {
            "agent": record.agent,
            "call_id": record.call_id,
            "name": record.name,
            "arguments": record.arguments,
            "output": record.output,
            "ok": record.ok,
        }
        self._row("tool_result", **{k: v for k, v in data.items() if k != "arguments"})
        assert self._turn is not None
        with self._lock:
            self._turn.activity.append(data)
        if self.on_event:
            self.on_event("tool_result", data)


def readable_context(context: SessionContext, guard: PermissionGuard) -> SessionContext:
    """The turn's context without the items a `vault.read` policy hides from the agent."""
    items = tuple(
        item
        for item in context.items
        if item.path is None or guard.permits(Capability.VAULT_READ, item.path)
    )
    if len(items) == len(context.items):
        return context
    diagnostics = {**context.diagnostics, "hidden_by_policy": len(context.items) - len(items)}
    return SessionContext.build(
        context.query, items, context.budget, context.gate, context.gate_reason, diagnostics
    )
