"""Refine: trim select's candidates to a token budget — a cheap model's judgement when one is
configured, and a deterministic gate that never fails when not (or when the model is slow,
down, rate limited or talks nonsense).

The LLM gate asks the model which candidates to keep, validates the answer against the
candidates, and caches it, so a repeated turn costs no tokens; the deterministic gate is in
`gate.py`.

With a model configured the context is meant for that model: candidates from notes the
policy keeps from its destination (a `vault.read` rule with `destinations`) are withheld
before either gate, so they are neither in the gate's request nor in the context. Each gate
request is recorded in the vault's audit log with the notes and blocks it holds.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, field_validator

from ..errors import InvalidQuery, LLMError, LLMNotInstalled, LLMRateLimited, LLMTimeout
from ..permissions import Capability, Destination, destination_of
from ..prompts import GateCandidate, gate_messages
from ..storage.audit import AuditLog, AuditNote, sent_notes
from .context import ContextItem, GateName, SessionContext
from .gate import Neighbour, deterministic_gate, fill_budget
from .models import Candidate, Selection

if TYPE_CHECKING:
    from ..llm import CallRecord, LLMSettings
    from ..permissions import Policy, VaultPolicy
    from ..permissions.view import IndexView
    from ..storage import Vault
    from .select import Selector

CACHE_SIZE = 256
REASON_CHARS = 200


# --- the model's answer --------------------------------------------------------------------


class GateChoice(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    reason: str = ""


class GateAnswer(BaseModel):
    """The JSON the gate asks the model for: candidate ids to keep, best first."""

    model_config = ConfigDict(extra="ignore")

    keep: list[GateChoice]

    @field_validator("keep", mode="before")
    @classmethod
    def _bare_ids(cls, value: Any) -> Any:
        """Small models often answer ["c1", "c2"]: accept ids without reasons."""
        if isinstance(value, list):
            return [{"id": v} if isinstance(v, str) else v for v in value]
        return value


# --- cache ---------------------------------------------------------------------------------

CacheKey = tuple[str | None, str, tuple[str, ...], str]


class GateCache:
    """LRU of the LLM gate's validated answers, keyed by (index generation, query,
    candidate ids, model): the same turn again costs no call and no tokens."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._data: OrderedDict[CacheKey, tuple[tuple[str, str], ...]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: CacheKey) -> tuple[tuple[str, str], ...] | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: CacheKey, value: tuple[tuple[str, str], ...]) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)


# --- the refiner -----------------------------------------------------------------------------


def gate_prompt(
    query: str, candidates: list[Candidate]
) -> tuple[dict[str, Candidate], list[dict[str, str]]]:
    """The LLM gate's request for `candidates`: the short alias of each (`c1`, `c2`, …) and
    the messages — all that is sent to the model (`vaultctx context --dry-run` prints it)."""
    aliases = {f"c{i}": c for i, c in enumerate(candidates, start=1)}
    shown = [
        GateCandidate(alias, c.title, c.heading_path or c.heading, c.text)
        for alias, c in aliases.items()
    ]
    return aliases, gate_messages(query, shown)


def candidate_notes(candidate: Candidate) -> tuple[str, ...]:
    """The notes whose text a candidate carries: its own, or those a memory came from."""
    if candidate.path is not None:
        return (candidate.path,)
    source = candidate.metadata.get("source")
    paths = source.get("paths") if isinstance(source, dict) else None
    return tuple(p for p in paths or () if isinstance(p, str))


def gate_destination(settings: LLMSettings) -> Destination:
    """Where the gate's request goes: its model; a client's eyes when there is none."""
    if not settings.configured or settings.model is None:
        return Destination.CLIENT
    return destination_of(settings.model, settings.api_base)


def sendable(
    candidates: list[Candidate], policy: Policy | None, destination: Destination
) -> list[Candidate]:
    """The candidates whose every note `policy` lets go to `destination`."""
    if policy is None or not policy.restricts_reading_for(destination):
        return candidates
    return [
        c
        for c in candidates
        if all(policy.readable(path, destination) for path in candidate_notes(c))
    ]


def gate_audit(
    candidates: list[Candidate], policy: Policy | None, destination: Destination
) -> AuditNote:
    """What the audit log keeps of a gate request: each note sent, its block ids, and the
    rule (or default) that let it go to `destination`. No text."""
    pieces = (
        (path, candidate.block_id if candidate.path == path else None)
        for candidate in candidates
        for path in candidate_notes(candidate)
    )

    def rule(path: str) -> str:
        return policy.effect_for(Capability.VAULT_READ, path, destination)[1] if policy else ""

    notes = sent_notes(pieces, rule)
    return AuditNote(purpose="gate", destination=destination.value, notes=notes)


class Refiner:
    """Refine for one reader of one vault: the gate cache, its blocks and their vectors as
    the reader's select sees them (its view, the warm vector matrix), the policy that says
    what may reach the gate's model, and the audit log its requests are recorded in."""

    def __init__(
        self,
        vault: Vault,
        selector: Selector,
        cache_size: int = CACHE_SIZE,
        *,
        policy: VaultPolicy | None = None,
    ) -> None:
        self.vault = vault
        self.selector = selector
        self.policy = policy
        self.cache = GateCache(cache_size)
        self.audit = AuditLog.of(vault.db.path.parent)

    def _policy(self) -> Policy | None:
        return self.policy.current() if self.policy is not None else None

    def gate_request(self, selection: Selection, settings: LLMSettings) -> dict[str, Any]:
        """What `refine` would send to the gate's model for `selection`, sending nothing:
        the model, its endpoint and destination, and the messages (the withheld candidates
        left out, as `refine` leaves them out)."""
        if not settings.configured:
            return {"model": None, "api_base": None, "messages": []}
        destination = gate_destination(settings)
        candidates = sendable(list(selection.candidates), self._policy(), destination)
        messages = gate_prompt(selection.query, candidates)[1] if candidates else []
        return {
            "model": settings.model,
            "api_base": settings.api_base,
            "destination": destination.value,
            "withheld": len(selection.candidates) - len(candidates),
            "messages": messages,
        }

    def refine(
        self,
        selection: Selection,
        *,
        budget: int,
        settings: LLMSettings,
        use_vectors: bool = True,
    ) -> SessionContext:
        """Trim `selection` to `budget` tokens. Never raises on a model failure: the
        deterministic gate takes over and `gate_reason` says why."""
        if budget < 1:
            raise InvalidQuery("the token budget must be at least 1")
        started = time.perf_counter()
        destination = gate_destination(settings)
        policy = self._policy()
        candidates = sendable(list(selection.candidates), policy, destination)
        view = self.selector.scope.view()  # the reader's, as the select saw it
        neighbours = partial(self._neighbours, view)
        vectors, has_vector = self._vectors(candidates, view) if use_vectors else (None, None)
        diagnostics: dict[str, Any] = {
            "select_ms": selection.diagnostics.get("select_ms"),
            "candidates": len(candidates),
            "model": settings.model,
            "tokens_in": 0,
            "tokens_out": 0,
            "cache": None,
        }
        if destination is not Destination.CLIENT:
            diagnostics["destination"] = destination.value
            diagnostics["withheld_from_model"] = len(selection.candidates) - len(candidates)
        gate: GateName = "deterministic"
        reason: str | None
        items: tuple[ContextItem, ...] = ()
        if not candidates:
            reason = "no_candidates"
        elif not settings.configured:
            reason = "no_model"
        else:
            chosen, reason, record = self._llm_choice(
                selection.query,
                candidates,
                settings,
                gate_audit(candidates, policy, destination),
                view.generation,
            )
            diagnostics["cache"] = "hit" if reason == "cache" else "miss"
            if record is not None:
                diagnostics["tokens_in"] = record.tokens_in
                diagnostics["tokens_out"] = record.tokens_out
                diagnostics["llm_ms"] = record.latency_ms
                diagnostics["llm_call"] = record.to_dict()
            if chosen is not None:
                gate = "llm"
                items = fill_budget(chosen, budget, neighbours)
        if gate == "deterministic":
            items, duplicates = deterministic_gate(
                candidates,
                budget,
                vectors=vectors,
                has_vector=has_vector,
                neighbours=neighbours,
            )
            diagnostics["duplicates_dropped"] = duplicates
        diagnostics.update(
            {
                "gate": gate,
                "gate_reason": reason,
                "kept": len(items),
                "refine_ms": round((time.perf_counter() - started) * 1000, 3),
                "retrieval_path": selection.diagnostics.get("retrieval_path"),
            }
        )
        return SessionContext.build(selection.query, items, budget, gate, reason, diagnostics)

    def _llm_choice(
        self,
        query: str,
        candidates: list[Candidate],
        settings: LLMSettings,
        audit: AuditNote,
        generation: str | None,
    ) -> tuple[list[tuple[Candidate, str]] | None, str | None, CallRecord | None]:
        """(kept candidates with reasons, or None to fall back; gate reason; call record).
        The request is recorded in the vault's audit log as `audit` declares it; answers are
        cached per index `generation`."""
        from ..llm import CallRecord, complete_structured  # the client: only with a model

        key: CacheKey = (
            generation,
            query,
            tuple(c.id for c in candidates),
            settings.model or "",
        )
        by_id = {c.id: c for c in candidates}
        cached = self.cache.get(key)
        if cached is not None:
            return [(by_id[cid], why) for cid, why in cached], "cache", None
        aliases, messages = gate_prompt(query, candidates)
        try:
            answer, record = complete_structured(
                messages,
                GateAnswer,
                settings=settings
                if settings.audit_log
                else replace(settings, audit_log=self.audit.path),
                audit=audit,
            )
        except LLMNotInstalled:
            raise  # not the model failing: the install lacks what the caller asked for
        except LLMError as exc:
            failed = exc.record if isinstance(exc.record, CallRecord) else None
            if isinstance(exc, LLMTimeout):
                return None, "timeout", failed
            if isinstance(exc, LLMRateLimited):
                return None, "rate_limited", failed
            return None, f"error: {exc}", failed
        if answer is None:
            return None, "invalid_output", record
        chosen: list[tuple[Candidate, str]] = []
        seen: set[str] = set()
        for choice in answer.keep:
            alias = choice.id.strip().lower()
            candidate = aliases.get(alias)
            if candidate is None or alias in seen:
                continue
            seen.add(alias)
            why = " ".join(choice.reason.split())[:REASON_CHARS] or "chosen by the model"
            chosen.append((candidate, why))
        if answer.keep and not chosen:
            return None, "invalid_output", record
        self.cache.put(key, tuple((c.id, why) for c, why in chosen))
        return chosen, None, record

    def _vectors(
        self, candidates: list[Candidate], view: IndexView
    ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """The candidates' embeddings from the Selector's in-memory matrix (no re-embedding),
        or (None, None) when the index has none for the current model."""
        answering = self.vault.query_model(view)
        if not candidates or answering is None:
            return None, None
        model = answering[0]
        matrix = self.selector.matrix(model)
        if matrix.size == 0:
            return None, None
        ids = np.asarray(
            [c.block_id if c.block_id is not None else -1 for c in candidates], dtype=np.int64
        )
        rows = np.minimum(np.searchsorted(matrix.block_ids, ids), matrix.size - 1)
        found = matrix.block_ids[rows] == ids
        vectors = np.zeros((len(candidates), matrix.matrix.shape[1]), dtype=np.float32)
        vectors[found] = matrix.matrix[rows[found]]
        return vectors, found

    def _neighbours(self, view: IndexView, candidate: Candidate) -> list[Neighbour]:
        if candidate.block_id is None:
            return []
        rows = view.neighbours(candidate.block_id)
        return [Neighbour(f"block:{r[0]}", r[1], r[2], r[3], r[4], r[5]) for r in rows]
