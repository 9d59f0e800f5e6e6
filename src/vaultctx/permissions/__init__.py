"""Capabilities, the per-vault policy and the `PermissionGuard` every tool call goes through.

This package knows nothing about models or tools: it answers "may `capability` touch
`resource`?" and keeps paths inside the vault.
"""

from .guard import Asker, Decision, PermissionGuard
from .paths import confine, vault_relative
from .policy import POLICY_FILENAME, Capability, Effect, Policy, Rule, load_policy

__all__ = [
    "POLICY_FILENAME",
    "Asker",
    "Capability",
    "Decision",
    "Effect",
    "PermissionGuard",
    "Policy",
    "Rule",
    "confine",
    "load_policy",
    "vault_relative",
]
