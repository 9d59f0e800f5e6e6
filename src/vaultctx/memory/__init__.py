"""Tiered memory: scored memories persisted in the background, decayed, retrieved each turn."""

from .background import BackgroundWriter
from .extract import DeterministicExtractor, Extractor, LLMExtractor, Turn
from .models import Memory, MemoryContext, MemoryKind, MemorySource, Observation, Tier
from .scratchpad import ScratchpadRepository
from .select_retriever import MemoryRetriever
from .service import MemoryService
from .store import MemoryRepository

__all__ = [
    "BackgroundWriter",
    "DeterministicExtractor",
    "Extractor",
    "LLMExtractor",
    "Memory",
    "MemoryContext",
    "MemoryKind",
    "MemoryRepository",
    "MemoryRetriever",
    "MemoryService",
    "MemorySource",
    "Observation",
    "ScratchpadRepository",
    "Tier",
    "Turn",
]
