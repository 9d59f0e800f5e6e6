"""The one exception hierarchy of vaultctx.

Callers catch these, never what a dependency happens to raise. Each says how every door
answers it: the CLI with one clear line and `exit_code`, HTTP with `http_status` (MCP with
a JSON-RPC error naming the class).
"""

from __future__ import annotations


class VaultctxError(Exception):
    """Base class of every error vaultctx raises on purpose."""

    exit_code = 1
    http_status = 400  # a request the caller can mend


class VaultNotFound(VaultctxError):
    """The vault path does not exist or is not a directory."""

    exit_code = 2


class IndexLocked(VaultctxError):
    """Another process is writing this vault's index."""

    exit_code = 3
    http_status = 409


class IndexCorrupt(VaultctxError):
    """The index database cannot be opened or is from a newer vaultctx."""

    exit_code = 4
    http_status = 503  # answers again once the index is mended or upgraded


class IndexUnavailable(VaultctxError):
    """The database holding the index (`database_url`) cannot be reached or set up."""

    exit_code = 20
    http_status = 503


class IndexDatabaseError(VaultctxError):
    """The index's database failed a read or a write it was asked (a damaged page, a query
    it cannot run): the storage backend's own error in vaultctx's terms, its message as
    `detail`. The storage layer raises it, so nothing above it names sqlite3 or psycopg."""

    http_status = 503  # the index answers again once its database does

    def __init__(self, detail: str) -> None:
        super().__init__(f"index database error: {detail}")
        self.detail = detail

    def __reduce__(self) -> tuple:  # errors cross the pipe of an agent's child process
        return type(self), (self.detail,)


class NotIndexed(VaultctxError):
    """An operation needs an index and the vault has never been indexed."""

    exit_code = 5
    http_status = 409


class ConfigError(VaultctxError):
    """The vault's configuration file or an option value is invalid."""

    exit_code = 6
    http_status = 422


class EmbeddingUnavailable(VaultctxError):
    """The embedding model cannot be loaded or failed to encode."""

    exit_code = 7
    http_status = 503


class InvalidQuery(VaultctxError):
    """A query is empty or otherwise cannot be searched."""

    exit_code = 8
    http_status = 422


class NoteNotFound(VaultctxError):
    """A note named by the caller is not in the vault's index."""

    exit_code = 9
    http_status = 404


class LLMError(VaultctxError):
    """A model call gave no usable answer; `record` is the call's `llm.CallRecord`, if any."""

    exit_code = 10

    def __init__(self, message: str, *, record: object | None = None) -> None:
        super().__init__(message)
        self.record = record


class LLMNotConfigured(LLMError):
    """A model call was asked for, but no model is configured."""

    exit_code = 11


class LLMNotInstalled(LLMError):
    """A model is configured, but its client (litellm, the `llm` extra) is not installed."""

    exit_code = 21
    http_status = 503  # answers once the extra is installed

    def __init__(self, message: str | None = None, *, record: object | None = None) -> None:
        super().__init__(message or LLM_NOT_INSTALLED, record=record)


# The one sentence every door shows for LLMNotInstalled: what is missing and the command.
LLM_NOT_INSTALLED = (
    "a model is configured (llm_model) but its client, litellm, is not installed:"
    " pip install 'vaultctx[llm]' (from a clone: pipx install --force '.[llm]')"
)


class LLMTimeout(LLMError):
    """The model did not answer within the call's time limit."""

    exit_code = 12


class LLMFailed(LLMError):
    """The provider refused or failed the call (HTTP error, connection, bad request)."""

    exit_code = 13


class LLMRateLimited(LLMFailed):
    """The provider answered 429: too many requests or tokens for now."""

    exit_code = 14


class PermissionDenied(VaultctxError):
    """The vault's permission policy (or the user, asked) refused a tool's capability."""

    exit_code = 15
    http_status = 403

    def __init__(self, capability: str, resource: str, reason: str) -> None:
        super().__init__(f"permission denied: {capability} on {resource} ({reason})")
        self.capability = capability
        self.resource = resource
        self.reason = reason

    def __reduce__(self) -> tuple:  # errors cross the pipe of an agent's child process
        return type(self), (self.capability, self.resource, self.reason)

    def to_dict(self) -> dict[str, str]:
        """The structured error a model receives instead of the tool's output."""
        return {
            "error": "permission_denied",
            "capability": self.capability,
            "resource": self.resource,
            "reason": self.reason,
        }


class PathOutsideVault(VaultctxError):
    """A path is absolute, climbs out with `..`, or resolves (via a symlink) outside the vault."""

    exit_code = 16

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"path refused: {path!r} ({reason})")
        self.path = path
        self.reason = reason

    def __reduce__(self) -> tuple:
        return type(self), (self.path, self.reason)

    def to_dict(self) -> dict[str, str]:
        return {"error": "path_outside_vault", "path": self.path, "reason": self.reason}


class SessionNotFound(VaultctxError):
    """No session file with that id exists under the vault's `sessions/` folder."""

    exit_code = 17


class SkillError(VaultctxError):
    """A skill note is invalid (frontmatter, template) or was run with bad inputs; the
    message names the note and the field, so the user knows what to fix."""

    exit_code = 18

    def __init__(self, path: str, field: str, message: str) -> None:
        super().__init__(f"skill {path}: {field}: {message}")
        self.path = path
        self.field = field


class ServerRunning(VaultctxError):
    """A `vaultctx serve` for this vault is already running: one server per vault."""

    exit_code = 19
