"""The storage layer: a vault folder and its index — discovery, parsing, the SQLite schema and
writer, embeddings, the link graph, watching. It imports nothing above `config` and `errors`."""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .embeddings import Embedder
    from .graph import Link, LinkGraph
    from .indexer import IndexReport
    from .vault import IndexStatus, Vault
    from .watch import VaultWatcher

__all__ = ["Embedder", "IndexReport", "IndexStatus", "Link", "LinkGraph", "Vault", "VaultWatcher"]

# Loaded on first use (PEP 562): an index worker process imports `storage.reader` and
# should not pay for numpy and pydantic.
_LAZY = {
    "Embedder": ".embeddings",
    "IndexReport": ".indexer",
    "Link": ".graph",
    "LinkGraph": ".graph",
    "IndexStatus": ".vault",
    "Vault": ".vault",
    "VaultWatcher": ".watch",
}


__getattr__ = lazy_exports(__name__, _LAZY, globals())
