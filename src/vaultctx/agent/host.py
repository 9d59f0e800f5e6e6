"""The parent's side of one delegation: everything its job may ask of the turn, answered in
the process that holds the warm index, the guard (and the person it may ask), the tools'
schemas, the model settings and the session log.

The host also keeps the delegation's clock: `timeout` seconds from its creation, not
counting time a person spends answering a permission question. A model call is cut to the
time left; when that cut is what stops it, the delegation has timed out.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import LLMTimeout
from ..llm import Completion, LLMSettings, complete
from ..permissions import Capability, PermissionGuard, destination_of, vault_relative
from ..storage.audit import AuditNote, SentNote
from .jobs import DelegationTimeout
from .protocols import Admission, IndexedVault
from .requests import TurnObserver
from .tools import admit, require_memory_write, require_write
from .trace import CompletionTrace
from .transcript import ToolCallRecord


def declared(audit: AuditNote | None, guard: PermissionGuard, settings: LLMSettings) -> AuditNote:
    """An agent's declaration of a request, completed where the request is sent: where it
    goes (the settings' model and endpoint) and the policy's reason each note may go there."""
    destination = destination_of(settings.model or "", settings.api_base)
    audit = audit or AuditNote(purpose="agent")
    notes = tuple(
        SentNote(
            note.path,
            note.blocks,
            note.rule or guard.policy.effect_for(Capability.VAULT_READ, note.path, destination)[1],
        )
        for note in audit.notes
    )
    return AuditNote(purpose=audit.purpose, destination=destination.value, notes=notes)


def audited_complete(
    messages: Sequence[Mapping[str, Any]],
    *,
    settings: LLMSettings,
    guard: PermissionGuard,
    audit: AuditNote | None = None,
    **options: Any,
) -> Completion:
    """`llm.complete` for an agent of a turn under `guard`: its request recorded as
    `declared` says."""
    return complete(messages, settings=settings, audit=declared(audit, guard, settings), **options)


class DelegationHost:
    """Serves one delegation with `guard` (already narrowed to what its agent may do).
    Writes are checked here again, whatever the job checked before asking."""

    def __init__(
        self,
        vault: IndexedVault,
        guard: PermissionGuard,
        *,
        settings: LLMSettings,
        observer: TurnObserver,
        timeout: float,
    ) -> None:
        self.vault = vault
        self.root = vault.root
        self.guard = guard
        self.settings = settings
        self.observer = observer
        self.timeout = timeout
        self.records: list[ToolCallRecord] = []  # every finished tool call, in order
        self._ends = time.monotonic() + timeout
        self._asked_before = guard.asking_seconds

    def remaining(self) -> float:
        asked = self.guard.asking_seconds - self._asked_before
        return self._ends + asked - time.monotonic()

    # VaultAccess
    def select(self, query: str, k: int) -> list[dict[str, str | None]]:
        return self.vault.select(query, k)

    def neighbours(self, path: str, *, incoming: bool) -> list[dict[str, str]]:
        return self.vault.neighbours(path, incoming=incoming)

    def tagged(self, tag: str) -> list[dict[str, str]]:
        return self.vault.tagged(tag)

    def read(self, path: str) -> str:
        return self.vault.read(path)

    def indexed_sections(self, path: str) -> list[tuple[str, str]]:
        self.guard.require(Capability.VAULT_READ, vault_relative(self.root, path))
        return self.vault.indexed_sections(path)

    def create(self, path: str, text: str) -> bool:
        require_write(self.guard, vault_relative(self.root, path))
        return self.vault.create(path, text)

    def append(self, path: str, text: str) -> None:
        require_write(self.guard, vault_relative(self.root, path))
        self.vault.append(path, text)

    def remember(self, text: str, tier: str, scope: str | None, source: dict[str, Any]) -> str:
        require_memory_write(self.guard, tier)
        return self.vault.remember(text, tier, scope, source)

    # Guard
    def admit(self, tool: str, arguments: dict[str, Any]) -> Admission | dict[str, Any]:
        return admit(tool, arguments, self.vault, self.guard)

    def permits(self, capability: Capability, resource: str) -> bool:
        return self.guard.permits(capability, resource)

    # the model
    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]],
        tool_choice: str | None,
        timeout: float,
        audit: AuditNote | None = None,
    ) -> Completion:
        left = self.remaining()
        if left <= 0:
            raise DelegationTimeout
        try:
            return audited_complete(
                messages,
                settings=self.settings,
                guard=self.guard,
                audit=audit,
                tools=tools,
                tool_choice=tool_choice,
                timeout=min(timeout, left),
            )
        except LLMTimeout:
            if left <= timeout:  # cut to the delegation's time: that time is up
                raise DelegationTimeout from None
            raise

    # TurnObserver
    def request_sent(self, agent: str, invocation: int, messages: list[dict[str, Any]]) -> None:
        self.observer.request_sent(agent, invocation, messages)

    def trace_recorded(self, trace: CompletionTrace) -> None:
        self.observer.trace_recorded(trace)

    def tool_started(self, agent: str, call_id: str, name: str, arguments: dict) -> None:
        self.observer.tool_started(agent, call_id, name, arguments)

    def tool_finished(self, record: ToolCallRecord) -> None:
        self.records.append(record)
        self.observer.tool_finished(record)
