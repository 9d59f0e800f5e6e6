"""TurnPreparer: what one turn starts from — the model resolved, the SessionContext as the
model sees it, the first request's messages (`prompts.turn_messages` orders them) and their
provenance hashes.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import prompts
from ..errors import LLMNotConfigured
from ..pipeline.context import SessionContext, canonical_json
from ..storage.audit import SentNote, sent_notes

Message = dict[str, Any]


@dataclass(frozen=True)
class TurnPreparation:
    """What a turn starts from; frozen so no collaborator can change it behind the log."""

    context_pack: dict[str, Any]
    context_hash: str
    messages: tuple[Message, ...]
    resolved_provider: str
    resolved_model: str
    prompt_render_hash: str
    notes: tuple[SentNote, ...] = ()  # the context's notes and blocks, for the audit log

    @property
    def litellm_model(self) -> str:
        return f"{self.resolved_provider}/{self.resolved_model}"


def stable_hash(data: Any) -> str:
    """sha256 (16 hex) of canonical JSON: equal inputs hash equal across runs."""
    return hashlib.sha256(canonical_json(data).encode("utf-8")).hexdigest()[:16]


def split_model(value: str) -> tuple[str, str] | None:
    """`provider/model` or `provider:model` → (provider, model); None if it names neither.

    The first `/` wins over `:`, so `ollama/qwen2.5:0.5b` is ("ollama", "qwen2.5:0.5b")."""
    value = value.strip()
    for separator in ("/", ":"):
        provider, found, model = value.partition(separator)
        if found and provider and model:
            return provider, model
    return None


def resolve_provider_model(
    runtime_provider: str | None, runtime_model: str | None, chain: Sequence[str | None] = ()
) -> tuple[str, str]:
    """Explicit provider and model as given; else the first entry of `runtime_model` and
    the fallback `chain` that names a provider. `LLMNotConfigured` when none does."""
    if runtime_provider and runtime_model:
        return runtime_provider, runtime_model
    for candidate in (runtime_model, *chain):
        if candidate:
            parsed = split_model(candidate)
            if parsed is not None:
                return parsed
    raise LLMNotConfigured(
        "no model configured: pass --model provider/model, set VAULTCTX_LLM_MODEL, or run"
        " `vaultctx config llm_model openai/gpt-4o-mini`"
    )


def context_pack(context: SessionContext | None) -> dict[str, Any]:
    """The part of a SessionContext the model sees, without timings: hash-stable."""
    if context is None:
        return {"query": "", "items": []}
    return {
        "query": context.query,
        "items": [
            {"path": item.path or item.kind, "heading": item.heading_path, "text": item.text}
            for item in context.items
        ],
    }


def context_notes(context: SessionContext | None) -> tuple[SentNote, ...]:
    """The notes of a SessionContext's items, with the ids of their blocks (neighbours
    merged in included): what of the vault the context block sends."""
    return sent_notes(
        (item.path, int(number) if kind == "block" and number.isdigit() else None)
        for item in (context.items if context is not None else ())
        if item.path is not None
        for kind, _, number in (block.partition(":") for block in (item.id, *item.merged))
    )


class TurnPreparer:
    """Builds `TurnPreparation`s for one system prompt and model chain. `today` is
    injectable so a test can pin the date."""

    def __init__(
        self,
        *,
        system_prompt: str = prompts.ORCHESTRATOR_SYSTEM,
        model_chain: Sequence[str | None] = (),
        today: Callable[[], _dt.date] = _dt.date.today,
    ) -> None:
        self.system_prompt = system_prompt
        self.model_chain = tuple(model_chain)
        self.today = today

    def prepare(
        self,
        *,
        session_id: str,
        user_message: str,
        history: Sequence[Message] = (),
        context: SessionContext | None = None,
        memory_context_text: str = "",
        skill_context: str | None = None,
        skills: Sequence[tuple[str, str]] = (),
        skills_in_vault: int = 0,
        runtime_provider: str | None = None,
        runtime_model: str | None = None,
    ) -> TurnPreparation:
        """`skills` are the (name, tool) pairs offered to the model, of `skills_in_vault`;
        the runtime metadata lists them."""
        provider, model = resolve_provider_model(runtime_provider, runtime_model, self.model_chain)
        today = self.today()
        pack = context_pack(context)
        runtime = prompts.runtime_metadata(
            session_id,
            provider,
            model,
            today.isoformat(),
            (today + _dt.timedelta(days=1)).isoformat(),
            skills=skills,
            skills_in_vault=skills_in_vault,
        )
        messages = prompts.turn_messages(
            self.system_prompt,
            runtime,
            memory_context=memory_context_text,
            history=history,
            context_query=pack["query"],
            context_items=pack["items"],
            skill_context=skill_context,
            user_message=user_message,
        )
        return TurnPreparation(
            context_pack=pack,
            context_hash=stable_hash(pack),
            messages=tuple(messages),
            resolved_provider=provider,
            resolved_model=model,
            prompt_render_hash=stable_hash({"text": self.system_prompt}),
            notes=context_notes(context),
        )
