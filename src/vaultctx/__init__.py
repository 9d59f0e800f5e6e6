"""vaultctx: the right context from a Markdown vault for an LLM, fast and local.

The public API. Everything not exported here may change between releases.
"""

from typing import TYPE_CHECKING

from ._lazy import lazy_exports
from ._version import __version__
from .errors import (
    ConfigError,
    EmbeddingUnavailable,
    IndexCorrupt,
    IndexLocked,
    InvalidQuery,
    LLMError,
    LLMFailed,
    LLMNotConfigured,
    LLMNotInstalled,
    LLMRateLimited,
    LLMTimeout,
    NoteNotFound,
    NotIndexed,
    PathOutsideVault,
    PermissionDenied,
    ServerRunning,
    SessionNotFound,
    VaultctxError,
    VaultNotFound,
)

if TYPE_CHECKING:
    from .agent import TurnResult
    from .config import Config
    from .llm import LLMSettings
    from .pipeline.context import ContextItem, SessionContext
    from .pipeline.models import Candidate, Filters, Selection
    from .storage import Embedder, IndexReport, IndexStatus, Link, LinkGraph
    from .workspace import Workspace

# Exports that pull in pydantic or numpy load on first use (PEP 562), so `import vaultctx`
# and the CLI's server client start fast. Add heavy exports here, not as imports above.
_LAZY = {
    "Config": ".config",
    "Embedder": ".storage",
    "IndexReport": ".storage",
    "IndexStatus": ".storage",
    "Link": ".storage",
    "LinkGraph": ".storage",
    "Workspace": ".workspace",
    "LLMSettings": ".llm",
    "Candidate": ".pipeline.models",
    "Filters": ".pipeline.models",
    "Selection": ".pipeline.models",
    "ContextItem": ".pipeline.context",
    "SessionContext": ".pipeline.context",
    "TurnResult": ".agent",
}


__getattr__ = lazy_exports(__name__, _LAZY, globals())


__all__ = [
    "Candidate",
    "Config",
    "ConfigError",
    "ContextItem",
    "Embedder",
    "EmbeddingUnavailable",
    "Filters",
    "IndexCorrupt",
    "IndexLocked",
    "IndexReport",
    "IndexStatus",
    "InvalidQuery",
    "LLMError",
    "LLMFailed",
    "LLMNotConfigured",
    "LLMNotInstalled",
    "LLMRateLimited",
    "LLMSettings",
    "LLMTimeout",
    "Link",
    "LinkGraph",
    "NotIndexed",
    "NoteNotFound",
    "PathOutsideVault",
    "PermissionDenied",
    "Selection",
    "ServerRunning",
    "SessionContext",
    "SessionNotFound",
    "TurnResult",
    "VaultNotFound",
    "VaultctxError",
    "Workspace",
    "__version__",
]
