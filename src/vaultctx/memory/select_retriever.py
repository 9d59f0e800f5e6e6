"""Memories in select: the fourth retriever beside FTS5, vectors and the link graph."""

from __future__ import annotations

from collections.abc import Callable

from ..pipeline.models import Candidate
from ..pipeline.retrievers import RetrievalRequest
from ..search.fusion import Hit
from .models import Memory


class MemoryRetriever:
    """Memories as the fourth retriever of select: hits `memory:<id>` carrying a ready
    candidate, ranked by the same hybrid score as turn retrieval."""

    name = "memory"

    def __init__(
        self,
        search: Callable[..., list[Memory]],
    ) -> None:
        self._search = search

    def retrieve(self, request: RetrievalRequest) -> list[Hit]:
        if request.allowed is not None:
            return []  # note filters (path, tags, dates) select notes; memories are none
        memories = self._search(request.query, k=request.limit, reader=request.view)
        return [Hit(f"memory:{m.id}", m.score, {"candidate": to_candidate(m)}) for m in memories]


def to_candidate(memory: Memory) -> Candidate:
    return Candidate(
        id=f"memory:{memory.id}",
        kind="memory",
        title=f"{memory.tier.value} memory",
        heading=memory.kind.value,
        heading_path=f"memory > {memory.tier.value} > {memory.kind.value}",
        text=memory.text,
        score=memory.score,
        tokens=max(1, len(memory.text) // 4),
        metadata={
            "tier": memory.tier.value,
            "scope": memory.scope,
            "memory_kind": memory.kind.value,
            "importance": memory.importance,
            "created_at": memory.to_dict()["created_at"],
            "source": memory.source.model_dump(mode="json"),
        },
    )
