"""The vault layer: discovery, parsing, the SQLite index, embeddings and the link graph."""

from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'vaultctx.workspace' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
