"""The capabilities a tool can need: what the policy and the guard decide about.

Its own module, importing nothing, so an agent's child process can name a capability
without loading the policy machinery (pydantic, pathspec).
"""

from enum import StrEnum


class Capability(StrEnum):
    """What a tool needs to run."""

    VAULT_READ = "vault.read"
    VAULT_WRITE = "vault.write"
    MEMORY_WRITE = "memory.write"
    MEMORY_ACCOUNT = "memory.account"  # and memory.write: account memory reaches every vault
    NET = "net"
