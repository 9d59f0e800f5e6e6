"""`CompletionTrace`: what one LLM invocation cost and did. Populated by the request builder."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class CompletionTraceStep:
    """One diagnostic step inside an invocation (the request, each tool call, the answer)."""

    kind: str
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class CompletionTrace:
    """Exactly one model invocation; a turn's list of traces is in invocation order."""

    agent: str
    invocation: int
    model: str
    tokens_in: int = 0
    tokens_out: int = 0
    latency_ms: float = 0.0
    outcome: str = "pending"
    error: str | None = None
    summary: str = ""
    steps: list[CompletionTraceStep] = field(default_factory=list)

    @property
    def total_tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total_tokens": self.total_tokens}
