"""Skills as the Orchestrator's tools: which a turn offers, their schemas, and the job that
runs one the model called.

Every valid skill of the vault has a tool name (`skill_<name>`) and can be called by it. A
turn offers the model — in its tool list and its runtime metadata — every skill when there
are at most `MAX_OFFERED_SKILLS`, else the ones select ranks best for the question, so a
vault full of skills does not flood the prompt. A called skill runs as a delegation (the
Skill Composer): its inputs validated, its template rendered in the sandbox, its linked
notes as context, and a guard that allows only the capabilities the skill declares.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import prompts
from ..permissions import Destination, PermissionGuard
from ..storage.audit import SentNote
from .jobs import ModelJob
from .protocols import IndexedVault
from .skills import Skill, SkillRun, discover
from .tool_handlers import notes_read
from .tools import VAULT_TOOL_SCHEMAS, function_schema
from .transcript import ToolCallRecord

if TYPE_CHECKING:
    from .protocols import TurnWorkspace

MAX_OFFERED_SKILLS = 5
MAX_SKILL_CALLS = 5
TOOL_PREFIX = "skill_"
_NOT_NAME = re.compile(r"[^a-z0-9]+")
_MAX_TOOL_NAME = 64  # what OpenAI-compatible function names allow


@dataclass(frozen=True)
class SkillTool:
    """A skill under its tool name; `reason` says why this turn offers it ("" if not)."""

    skill: Skill
    tool: str
    reason: str = ""

    def schema(self) -> dict[str, Any]:
        description = self.skill.description or f"Run the skill {self.skill.name}."
        capabilities = ", ".join(c.value for c in self.skill.capabilities)
        return function_schema(
            self.tool,
            f"{description} (skill '{self.skill.name}'; may use: {capabilities})",
            self.skill.input_model,
        )

    def to_dict(self) -> dict[str, str]:
        return {
            "name": self.skill.name,
            "path": self.skill.path,
            "tool": self.tool,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class TurnSkills:
    """The vault's skills for one turn: every one by tool name, and those offered."""

    by_tool: Mapping[str, SkillTool]
    offered: tuple[SkillTool, ...]

    @property
    def in_vault(self) -> int:
        return len(self.by_tool)

    def schemas(self) -> list[dict[str, Any]]:
        return [entry.schema() for entry in self.offered]

    def ran(self, records: Sequence[ToolCallRecord]) -> list[dict[str, Any]]:
        """The skill calls among a turn's `records`, each with why its skill was offered."""
        ran = []
        for record in records:
            entry = self.by_tool.get(record.name)
            if entry is not None:
                reason = entry.reason or "not offered this turn; called by its tool name"
                ran.append(
                    {
                        **entry.to_dict(),
                        "reason": reason,
                        "call_id": record.call_id,
                        "ok": record.ok,
                    }
                )
        return ran

    def unknown(self, tool: str) -> dict[str, str]:
        offered = ", ".join(entry.tool for entry in self.offered) or "none"
        return {
            "error": "unknown_skill",
            "message": f"no skill with the tool name {tool!r} in the vault (offered: {offered})",
        }


NO_SKILLS = TurnSkills({}, ())


def tool_names(skills: Sequence[Skill]) -> dict[str, Skill]:
    """A function name for each skill, from its name; clashes get a number."""
    named: dict[str, Skill] = {}
    for skill in skills:
        stem = _NOT_NAME.sub("_", skill.name.lower()).strip("_") or "skill"
        base = (TOOL_PREFIX + stem)[:_MAX_TOOL_NAME]
        name, number = base, 1
        while name in named:
            number += 1
            suffix = f"_{number}"
            name = base[: _MAX_TOOL_NAME - len(suffix)] + suffix
        named[name] = skill
    return named


def skills_for_turn(
    ws: TurnWorkspace, question: str, destination: Destination = Destination.CLIENT
) -> TurnSkills:
    """The vault's valid skills that may go to `destination` (the turn's model), and the few
    offered for `question`."""
    catalog = discover(ws, destination)
    named = tool_names(catalog.skills)
    if not named:
        return NO_SKILLS
    if len(named) <= MAX_OFFERED_SKILLS:
        reason = f"every skill is offered when there are at most {MAX_OFFERED_SKILLS}"
        offered = {tool: reason for tool in named}
    else:
        offered = _ranked(ws, question, named, k=MAX_OFFERED_SKILLS + len(catalog.errors))
    by_tool = {tool: SkillTool(skill, tool, offered.get(tool, "")) for tool, skill in named.items()}
    return TurnSkills(by_tool, tuple(by_tool[tool] for tool in offered))


def _ranked(
    ws: TurnWorkspace, question: str, named: Mapping[str, Skill], *, k: int
) -> dict[str, str]:
    """Up to `MAX_OFFERED_SKILLS` tools, best first, with why: select's rank of their notes
    among the skill notes (broken skill notes rank too, hence `k` beyond the limit)."""
    tool_of = {skill.path: tool for tool, skill in named.items()}
    selection = ws.select(
        question,
        k=k,
        filters={"path": ws.config.skills_folder.strip("/"), "kinds": ("block", "note")},
        max_per_note=1,
    )
    ranked = [tool_of[hit.path] for hit in selection.notes() if hit.path in tool_of]
    return {
        tool: f"select ranks it #{rank} of {len(named)} skills for this question"
        for rank, tool in enumerate(ranked[:MAX_OFFERED_SKILLS], start=1)
    }


def skill_job(
    entry: SkillTool,
    inputs: Mapping[str, Any],
    *,
    vault: IndexedVault,
    guard: PermissionGuard,
    session_id: str,
    model: str,
    timeout: float,
    budget_tokens: int,
) -> ModelJob:
    """The job that runs `entry`'s skill with `inputs`; `guard` is already the skill's.
    Raises `SkillError` for inputs the skill does not accept."""
    run = SkillRun.prepare(entry.skill, inputs)
    context = run.context(vault, guard, budget_tokens=budget_tokens)
    return ModelJob(
        agent="skill",
        root=str(vault.root),
        session_id=session_id,
        timeout=timeout,
        messages=tuple(prompts.skill_messages(context, run.message)),
        tools=VAULT_TOOL_SCHEMAS,
        model=model,
        max_calls=MAX_SKILL_CALLS,
        notes=(SentNote(entry.skill.path),),
    )


def answer_report(answer: str, records: Sequence[ToolCallRecord]) -> dict[str, Any]:
    """A skill's plain answer and the notes behind it."""
    return {"answer": answer.strip(), "notes_read": notes_read(records)}
