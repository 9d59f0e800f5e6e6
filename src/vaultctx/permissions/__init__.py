"""Capabilities, the per-vault policy and the `PermissionGuard` every tool call goes through.

This package knows nothing about models or tools: it answers "may `capability` touch
`resource`?" and keeps paths inside the vault.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .capability import Capability
    from .destination import Destination, destination_of
    from .guard import Asker, Decision, PermissionGuard
    from .paths import confine, vault_relative
    from .policy import (
        POLICY_FILENAME,
        Effect,
        PersonPolicy,
        Policy,
        Rule,
        VaultPolicy,
        load_policy,
    )

# Loaded on first use (PEP 562): an agent's child process names capabilities only.
_LAZY = {
    "Capability": ".capability",
    "Destination": ".destination",
    "destination_of": ".destination",
    "Asker": ".guard",
    "Decision": ".guard",
    "PermissionGuard": ".guard",
    "confine": ".paths",
    "vault_relative": ".paths",
    "POLICY_FILENAME": ".policy",
    "Effect": ".policy",
    "PersonPolicy": ".policy",
    "Policy": ".policy",
    "Rule": ".policy",
    "VaultPolicy": ".policy",
    "load_policy": ".policy",
}

__getattr__ = lazy_exports(__name__, _LAZY, globals())

__all__ = [
    "POLICY_FILENAME",
    "Asker",
    "Capability",
    "Decision",
    "Destination",
    "Effect",
    "PermissionGuard",
    "PersonPolicy",
    "Policy",
    "Rule",
    "VaultPolicy",
    "confine",
    "destination_of",
    "load_policy",
    "vault_relative",
]
