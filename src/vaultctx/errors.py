"""The one exception hierarchy of vaultctx.

Callers catch these, never what a dependency happens to raise. The CLI turns each into one
clear line and a non-zero exit code.
"""

from __future__ import annotations


class VaultctxError(Exception):
    """Base class of every error vaultctx raises on purpose."""

    exit_code = 1


class VaultNotFound(VaultctxError):
    """The vault path does not exist or is not a directory."""

    exit_code = 2


class IndexLocked(VaultctxError):
    """Another process is writing this vault's index."""

    exit_code = 3


class IndexCorrupt(VaultctxError):
    """The index database cannot be opened or is from a newer vaultctx."""

    exit_code = 4


class NotIndexed(VaultctxError):
    """An operation needs an index and the vault has never been indexed."""

    exit_code = 5


class ConfigError(VaultctxError):
    """The vault's configuration file or an option value is invalid."""

    exit_code = 6


class EmbeddingUnavailable(VaultctxError):
    """The embedding model cannot be loaded or failed to encode."""

    exit_code = 7


class InvalidQuery(VaultctxError):
    """A query is empty or otherwise cannot be searched."""

    exit_code = 8


class NoteNotFound(VaultctxError):
    """A note named by the caller is not in the vault's index."""

    exit_code = 9
