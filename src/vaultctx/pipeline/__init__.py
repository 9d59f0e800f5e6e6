"""The context pipeline: select (retrievers + fusion) and refine (the gate)."""

from ..search.fusion import Hit, rrf_fuse
from .models import Candidate, Filters, NoteHit, Selection, Source
from .retrievers import RetrievalRequest, Retriever
from .select import Selector

__all__ = [
    "Candidate",
    "Filters",
    "Hit",
    "NoteHit",
    "RetrievalRequest",
    "Retriever",
    "Selection",
    "Selector",
    "Source",
    "rrf_fuse",
]
