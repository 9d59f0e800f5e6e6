"""The Researcher: investigates a question with read-only tool calls, as a delegation with
its own Transcript, and reports structured findings citing notes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from .. import prompts
from ..llm import parse_json_model
from .jobs import ModelJob
from .tool_handlers import notes_read
from .tools import VAULT_TOOL_SCHEMAS
from .transcript import ToolCallRecord

MAX_RESEARCH_CALLS = 5


class Finding(BaseModel):
    claim: str
    notes: list[str] = Field(default_factory=list)


class ResearchFindings(BaseModel):
    summary: str = ""
    findings: list[Finding] = Field(default_factory=list)


def findings_report(answer: str, records: Sequence[ToolCallRecord]) -> dict[str, Any]:
    """The Researcher's JSON answer (or its text as the summary) and the notes it read;
    built in the turn's process, which has pydantic loaded."""
    parsed, _ = parse_json_model(answer, ResearchFindings)
    findings = parsed or ResearchFindings(summary=answer.strip())
    return {**findings.model_dump(), "notes_read": notes_read(records)}


def research_job(
    question: str, *, root: str, session_id: str, model: str, timeout: float
) -> ModelJob:
    """The Researcher sees every vault tool; its guard (the parent's) allows only reads."""
    return ModelJob(
        agent="researcher",
        root=root,
        session_id=session_id,
        timeout=timeout,
        messages=tuple(prompts.researcher_messages(question)),
        tools=VAULT_TOOL_SCHEMAS,
        model=model,
        max_calls=MAX_RESEARCH_CALLS,
    )
