"""Tiered memory: scored memories persisted in the background, decayed, retrieved each turn."""

from .extract import DeterministicExtractor, Extractor, LLMExtractor, Turn
from .facade import AgentMemoryFacade
from .models import Memory, MemoryContext, MemoryKind, MemorySource, Observation, Tier
from .retrieval import MemoryRetriever
from .scratchpad import ScratchpadRepository
from .store import MemoryRepository
from .writer import BackgroundWriter

__all__ = [
    "AgentMemoryFacade",
    "BackgroundWriter",
    "DeterministicExtractor",
    "Extractor",
    "LLMExtractor",
    "Memory",
    "MemoryContext",
    "MemoryKind",
    "MemoryRepository",
    "MemoryRetriever",
    "MemorySource",
    "Observation",
    "ScratchpadRepository",
    "Tier",
    "Turn",
]
