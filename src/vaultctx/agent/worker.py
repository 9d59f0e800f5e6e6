"""The Worker: executes discrete tool calls with known parameters — no model call — in a
delegation (`agent.jobs.WorkerJob`) that can be stopped, so a
failing or hanging tool cannot take the turn down."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..llm.client import ToolCall
from .requests import TurnObserver
from .tool_handlers import ToolContext, execute
from .transcript import ToolCallRecord


class Worker:
    """Runs calls in order, each reported to `observer` as it starts and ends (so what was
    done before a timeout is known where the turn is logged)."""

    def __init__(self, ctx: ToolContext, *, observer: TurnObserver) -> None:
        self.ctx = ctx
        self.observer = observer
        self.records: list[ToolCallRecord] = []

    def execute(self, calls: Sequence[ToolCall]) -> dict[str, Any]:
        for call in calls:
            if self.ctx.cancelled.is_set():
                break
            self.observer.tool_started(self.ctx.agent, call.id, call.name, call.arguments)
            record = execute(call, self.ctx)
            self.observer.tool_finished(record)
            self.records.append(record)
        return {"executed": len(self.records)}
