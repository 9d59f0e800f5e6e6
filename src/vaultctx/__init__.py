"""vaultctx: the right context from a Markdown vault for an LLM, fast and local.

The public API. Everything not exported here may change between releases.
"""

from .config import Config
from .errors import (
    ConfigError,
    EmbeddingUnavailable,
    IndexCorrupt,
    IndexLocked,
    InvalidQuery,
    NoteNotFound,
    NotIndexed,
    VaultctxError,
    VaultNotFound,
)
from .workspace import Embedder, IndexReport, IndexStatus, Workspace

__version__ = "0.1.0"

__all__ = [
    "Config",
    "ConfigError",
    "Embedder",
    "EmbeddingUnavailable",
    "IndexCorrupt",
    "IndexLocked",
    "IndexReport",
    "IndexStatus",
    "InvalidQuery",
    "NotIndexed",
    "NoteNotFound",
    "VaultNotFound",
    "VaultctxError",
    "Workspace",
    "__version__",
]
