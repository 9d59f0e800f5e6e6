"""The Researcher: investigates a question with read-only tool calls, in its own worker
with its own ContentProvider, and reports structured findings citing notes."""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, Field

from .. import prompts
from ..llm import LLMSettings, parse_json_model
from ..permissions import Capability
from .registers import INSTRUCTIONS, ContentProvider, ToolCallRecord
from .requests import ResponseRequestBuilder, TurnObserver
from .tools import VAULT_TOOLS, ToolContext, execute

MAX_RESEARCH_CALLS = 5
NOTE_TOOLS = ("read_note", "follow_links", "backlinks")


class Finding(BaseModel):
    claim: str
    notes: list[str] = Field(default_factory=list)


class ResearchFindings(BaseModel):
    summary: str = ""
    findings: list[Finding] = Field(default_factory=list)


class Researcher:
    """Sees every vault tool (writes are denied at execution by its read-only guard)."""

    def __init__(
        self,
        ctx: ToolContext,
        *,
        settings: LLMSettings,
        timeout: float,
        observer: TurnObserver,
        max_calls: int = MAX_RESEARCH_CALLS,
    ) -> None:
        self.ctx = ToolContext(
            ws=ctx.ws,
            guard=ctx.guard.restricted({Capability.VAULT_READ}),
            session_id=ctx.session_id,
            agent="researcher",
        )
        self.settings = settings
        self.timeout = timeout
        self.observer = observer
        self.max_calls = max_calls
        self.provider = ContentProvider()
        self.records: list[ToolCallRecord] = []

    def investigate(self, question: str) -> dict[str, Any]:
        """Up to `max_calls` model calls; the last one must answer. Model failures raise
        (the isolation layer turns them into `researcher_failed`)."""
        deadline = time.monotonic() + self.timeout
        tools = {tool.name: tool for tool in VAULT_TOOLS}
        builder = ResponseRequestBuilder(
            agent="researcher",
            settings=self.settings,
            tools=VAULT_TOOLS,
            timeout=self.timeout,
            observer=self.observer,
        )
        self.provider[INSTRUCTIONS].items.extend(prompts.researcher_messages(question))
        for call_index in range(self.max_calls):
            remaining = max(deadline - time.monotonic(), 0.05)
            completion = builder.invoke(
                self.provider, final=call_index == self.max_calls - 1, timeout=remaining
            )
            if not completion.tool_calls:
                return self._report(completion.content or "")
            for call in completion.tool_calls:
                if self.ctx.cancelled.is_set():
                    break
                self.observer.tool_started("researcher", call.id, call.name, call.arguments)
                record = execute(call, tools, self.ctx)
                self.observer.tool_finished(record)
                self.records.append(record)
                self.provider.manifest.items.append(record)
        return {**self._report(""), "incomplete": True}

    def _report(self, answer: str) -> dict[str, Any]:
        parsed, _ = parse_json_model(answer, ResearchFindings)
        findings = parsed or ResearchFindings(summary=answer.strip())
        notes_read = sorted(
            {r.output["path"] for r in self.records if r.name in NOTE_TOOLS and r.ok}
        )
        return {**findings.model_dump(), "notes_read": notes_read}
