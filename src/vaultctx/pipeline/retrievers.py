"""The plug-in contract of select: a `Retriever` is asked a `RetrievalRequest` and answers
with ranked hits that fusion places beside the built-in lexical, vector and graph lists.

Memory plugs in through it (`memory.select_retriever.MemoryRetriever`) without knowing select.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from .models import Filters

if TYPE_CHECKING:
    import numpy as np

    from ..search.fusion import Hit


@dataclass
class RetrievalRequest:
    """What a pluggable retriever is asked: the query, how many hits, which notes are
    allowed (None: all), and the query vector when one was computed."""

    query: str
    limit: int
    filters: Filters
    allowed: set[int] | None = None
    query_vector: np.ndarray | None = None


class Retriever(Protocol):
    """A source of candidates that fusion can rank beside the built-in ones (e.g. memories).

    `retrieve` returns hits best first; each hit's payload must carry a ready `candidate`
    (a `Candidate`), since select only knows how to build block candidates itself.
    """

    name: str

    def retrieve(self, request: RetrievalRequest) -> Sequence[Hit]: ...
