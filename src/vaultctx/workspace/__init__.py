"""The vault layer: discovery, parsing, the SQLite index, embeddings and the link graph."""

from .core import IndexStatus, Workspace
from .embeddings import Embedder
from .indexer import IndexReport

__all__ = ["Embedder", "IndexReport", "IndexStatus", "Workspace"]
