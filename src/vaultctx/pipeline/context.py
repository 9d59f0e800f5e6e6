"""SessionContext: what refine hands to the agent — a frozen, hashed, budgeted context."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .models import CandidateKind, Source, item_contract

GateName = Literal["llm", "deterministic"]


class ContextItem(BaseModel):
    """One piece of the context: a block (possibly merged with its neighbours or truncated
    to fit), a note or a memory, with why it was kept."""

    model_config = ConfigDict(frozen=True)

    id: str
    kind: CandidateKind
    path: str | None = None
    title: str = ""
    heading: str = ""
    heading_path: str = ""
    text: str
    score: float = 0.0
    reason: str = ""
    sources: dict[str, Source] = Field(default_factory=dict)
    tokens: int
    start_line: int | None = None
    end_line: int | None = None
    merged: tuple[str, ...] = Field((), description="neighbouring block ids merged in")
    truncated: bool = False

    def contract(self) -> dict[str, Any]:
        return {
            **item_contract(self),
            "reason": self.reason,
            "merged": list(self.merged),
            "truncated": self.truncated,
        }


class SessionContext(BaseModel):
    """The refined context for one query: items within `budget` tokens, which gate chose
    them (and why it fell back, if it did), a content hash, and diagnostics.

    `token_count` is the sum of the items' `tokens`, counted with the index's estimator
    (words and punctuation marks), and never exceeds `budget`.
    """

    model_config = ConfigDict(frozen=True)

    query: str
    items: tuple[ContextItem, ...]
    token_count: int
    budget: int
    gate: GateName
    gate_reason: str | None = None
    context_hash: str
    diagnostics: dict[str, Any] = Field(default_factory=dict)

    @staticmethod
    def compute_hash(items: tuple[ContextItem, ...], budget: int, gate: GateName) -> str:
        """sha256 (16 hex) of the canonical JSON of what the agent will see; timings and
        the fallback reason are left out, so the same context always hashes the same."""
        payload = {"items": [i.contract() for i in items], "budget": budget, "gate": gate}
        return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()[:16]

    @classmethod
    def build(
        cls,
        query: str,
        items: tuple[ContextItem, ...],
        budget: int,
        gate: GateName,
        gate_reason: str | None,
        diagnostics: dict[str, Any],
    ) -> SessionContext:
        return cls(
            query=query,
            items=items,
            token_count=sum(i.tokens for i in items),
            budget=budget,
            gate=gate,
            gate_reason=gate_reason,
            context_hash=cls.compute_hash(items, budget, gate),
            diagnostics=diagnostics,
        )

    def contract(self) -> dict[str, Any]:
        """The JSON shape documented in DESIGN.md for `vaultctx context --json`."""
        return {
            "query": self.query,
            "items": [i.contract() for i in self.items],
            "token_count": self.token_count,
            "budget": self.budget,
            "context_hash": self.context_hash,
            "gate": self.gate,
            "gate_reason": self.gate_reason,
            "diagnostics": self.diagnostics,
        }

    def to_json(self) -> str:
        """Canonical JSON: the same SessionContext always serializes to the same bytes."""
        return canonical_json(self.contract())


def canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
