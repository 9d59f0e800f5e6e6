"""The ContentProvider: named, ordered registers of prompt state for one agent execution.

State holders only (AGN-030): no rendering, no persistence, no decisions. Session Context
is persistent and rendered into the instructions of every request; Consumable Context is
delivered once, then cleared by whoever delivered it (the request builder).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

INSTRUCTIONS = "instructions"
TRANSCRIPT = "transcript"
TOOL_CALL_MANIFEST = "tool_call_manifest"


class ContextClass(StrEnum):
    SESSION = "session"
    CONSUMABLE = "consumable"


@dataclass(frozen=True)
class ToolCallRecord:
    """One executed tool call: the line item of the ToolCallManifest."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    output: dict[str, Any]
    agent: str = "orchestrator"

    @property
    def ok(self) -> bool:
        return "error" not in self.output


@dataclass
class Register:
    """A named, ordered collection of line items of one context class."""

    name: str
    context_class: ContextClass
    items: list[Any] = field(default_factory=list)


@dataclass
class ContentProvider:
    """All prompt-relevant state of one agent execution (one per Orchestrator, Researcher
    or Worker run). Always holds `instructions`, `transcript` and the ToolCallManifest."""

    registers: dict[str, Register] = field(
        default_factory=lambda: {
            INSTRUCTIONS: Register(INSTRUCTIONS, ContextClass.SESSION),
            TRANSCRIPT: Register(TRANSCRIPT, ContextClass.SESSION),
            TOOL_CALL_MANIFEST: Register(TOOL_CALL_MANIFEST, ContextClass.CONSUMABLE),
        }
    )

    def __getitem__(self, name: str) -> Register:
        return self.registers[name]

    @property
    def manifest(self) -> Register:
        return self.registers[TOOL_CALL_MANIFEST]
