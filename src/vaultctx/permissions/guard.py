"""`PermissionGuard.require`: the one check every tool call passes at execution time."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..errors import PermissionDenied
from .capability import Capability
from .destination import Destination
from .policy import Effect, Policy

Asker = Callable[[str, str], bool]
"""asker(capability, resource) -> True to allow; how `ask` reaches a person (the CLI)."""


@dataclass(frozen=True)
class Decision:
    """An allowed call: which capability on which resource, and what allowed it."""

    capability: Capability
    resource: str
    effect: Effect
    reason: str


class PermissionGuard:
    """Applies a `Policy`. `ask` goes to `asker`; without one (non-interactive) it is a
    denial. A yes is remembered for the same capability and resource for this guard's life.

    `only` restricts the guard to some capabilities (a read-only Researcher): anything else
    is denied whatever the policy says."""

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        asker: Asker | None = None,
        only: Iterable[Capability] | None = None,
        destination: Destination = Destination.CLIENT,
    ) -> None:
        """`destination`: where what the guard lets through goes (the agent's model), which
        the policy's rules may name."""
        self.policy = policy or Policy()
        self.asker = asker
        self.only = frozenset(only) if only is not None else None
        self.destination = destination
        self._granted: set[tuple[Capability, str]] = set()
        self._lock = threading.Lock()
        self.asking_seconds = 0.0  # time spent waiting for a person: not the agent's time

    def restricted(self, capabilities: Iterable[Capability]) -> PermissionGuard:
        """A guard with the same policy and asker that allows only `capabilities` — and
        never more than this guard: restricting a restricted guard narrows it further."""
        only = frozenset(capabilities)
        if self.only is not None:
            only &= self.only
        return PermissionGuard(
            self.policy, asker=self.asker, only=only, destination=self.destination
        )

    def require(self, capability: Capability | str, resource: str) -> Decision:
        """Allow or raise `PermissionDenied` (whose `to_dict()` is the model's error)."""
        capability = Capability(capability)
        if self.only is not None and capability not in self.only:
            raise PermissionDenied(capability, resource, "not available to this agent")
        effect, reason = self.policy.effect_for(capability, resource, self.destination)
        if effect is Effect.ALLOW:
            return Decision(capability, resource, effect, reason)
        if effect is Effect.DENY:
            raise PermissionDenied(capability, resource, reason)
        return self._ask(capability, resource)

    def permits(self, capability: Capability | str, resource: str) -> bool:
        """Whether `require` would allow without asking anyone: for quietly leaving out
        search results a policy hides (e.g. `vault.read` denied under `Private/**`)."""
        capability = Capability(capability)
        if self.only is not None and capability not in self.only:
            return False
        effect, _ = self.policy.effect_for(capability, resource, self.destination)
        return effect is Effect.ALLOW or (capability, resource) in self._granted

    def _ask(self, capability: Capability, resource: str) -> Decision:
        with self._lock:  # one question at a time, and a yes counts for repeats
            if (capability, resource) in self._granted:
                return Decision(capability, resource, Effect.ASK, "allowed when asked")
            if self.asker is None:
                raise PermissionDenied(capability, resource, "needs approval; not interactive")
            started = time.monotonic()
            try:
                allowed = bool(self.asker(capability.value, resource))
            finally:
                self.asking_seconds += time.monotonic() - started
            if not allowed:
                raise PermissionDenied(capability, resource, "refused when asked")
            self._granted.add((capability, resource))
            return Decision(capability, resource, Effect.ASK, "allowed when asked")
