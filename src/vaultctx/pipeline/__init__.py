"""The context pipeline: select (retrievers + fusion) and refine (the gate)."""

from .fusion import Hit, rrf_fuse
from .models import Candidate, Filters, NoteHit, Selection, Source
from .select import RetrievalRequest, Retriever, Selector

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
