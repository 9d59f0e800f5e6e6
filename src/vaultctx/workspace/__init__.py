"""The vault layer: discovery, parsing, the SQLite index, embeddings and the link graph."""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .core import IndexStatus, Workspace
    from .embeddings import Embedder
    from .indexer import IndexReport

__all__ = ["Embedder", "IndexReport", "IndexStatus", "Workspace"]

# Loaded on first use (PEP 562): an index worker process imports `workspace.reader` and
# should not pay for numpy and pydantic.
_LAZY = {
    "Embedder": ".embeddings",
    "IndexReport": ".indexer",
    "IndexStatus": ".core",
    "Workspace": ".core",
}


__getattr__ = lazy_exports(__name__, _LAZY, globals())
