"""The Transcript: one agent run's conversation, as its next model request sends it.

Plain data: the instructions the run starts from (`prompts.turn_messages`, or an agent's own
`prompts.*_messages`), what was exchanged since, and the tool calls executed since the last
request, whose results that request delivers once (`agent.requests` sends it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import prompts

Message = dict[str, Any]


@dataclass(frozen=True)
class ToolCallRecord:
    """One executed tool call: its arguments and output, and the agent that made it."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    output: dict[str, Any]
    agent: str = "orchestrator"

    @property
    def ok(self) -> bool:
        return "error" not in self.output


@dataclass
class Transcript:
    """The messages of the next request: `instructions`, then `exchanged` (each model turn
    and the tool results sent after it), then the results of the `pending` tool calls."""

    instructions: list[Message]
    exchanged: list[Message] = field(default_factory=list)
    pending: list[ToolCallRecord] = field(default_factory=list)

    def request(self) -> list[Message]:
        """The messages to send, in their order."""
        return [*self.instructions, *self.exchanged, *map(tool_message, self.pending)]

    def answered(self, reply: Message) -> None:
        """The request went out and the model answered `reply`: the pending results were
        delivered, and both stay in the conversation."""
        self.exchanged.extend(map(tool_message, self.pending))
        self.pending.clear()
        self.exchanged.append(reply)


def tool_message(record: ToolCallRecord) -> Message:
    """A tool call's result as the model receives it."""
    return prompts.tool_result_message(record.call_id, record.name, record.output)
