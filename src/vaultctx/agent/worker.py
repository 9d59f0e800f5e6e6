"""The Worker: executes discrete tool calls with known parameters — no model call — with
its own ContentProvider, in a delegation (`agent.jobs.WorkerJob`) that can be stopped, so a
failing or hanging tool cannot take the turn down."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..llm import ToolCall
from .registers import ContentProvider, ToolCallRecord
from .requests import TurnObserver
from .tools import Tool, ToolContext, execute


class Worker:
    """Runs calls in order; `records` holds each finished call, even after a timeout."""

    def __init__(
        self, ctx: ToolContext, *, tools: Mapping[str, Tool], observer: TurnObserver
    ) -> None:
        self.ctx = ctx
        self.tools = tools
        self.observer = observer
        self.provider = ContentProvider()

    @property
    def records(self) -> list[ToolCallRecord]:
        return list(self.provider.manifest.items)

    def execute(self, calls: Sequence[ToolCall]) -> dict[str, Any]:
        for call in calls:
            if self.ctx.cancelled.is_set():
                break
            self.observer.tool_started(self.ctx.agent, call.id, call.name, call.arguments)
            record = execute(call, self.tools, self.ctx)
            self.observer.tool_finished(record)
            self.provider.manifest.items.append(record)
        return {"executed": len(self.provider.manifest.items)}
