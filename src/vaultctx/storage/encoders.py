"""The two ways to run an embedding model: ONNX Runtime (default) and sentence-transformers.

Both return L2-normalized float32 sentence vectors that agree to a cosine of 0.9999, so an
index embedded by one is searched by the other. ONNX Runtime needs neither torch nor its
import time (0.3 s against 4 s) nor its memory; torch remains for models the exporter does
not cover, with the `torch` extra installed.
"""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..errors import EmbeddingUnavailable
from .onnx_export import MODEL_FILE, SentenceModelSpec
from .wordpiece import WordPieceTokenizer

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Sequence
    from pathlib import Path

# Padded tokens per ONNX Runtime call. Small calls keep activations in cache: per CPU-second,
# 57 real vault blocks (116 wordpieces) with 512 against 40 with 4096, 27 SciFact abstracts
# (238) against 19; 256 and 1024 do as well or worse on both.
TOKEN_BUDGET = 512


class Encoder(Protocol):
    name: str  # the backend: "onnx" or "torch"
    dim: int

    def encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray: ...


def worker_count() -> int:
    """Parallel ONNX Runtime calls for a large encode: one per usable CPU, at most 8."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(8, cpus))


class OnnxEncoder:
    """The exported graph in ONNX Runtime, fed by the model's own `tokenizer.json`.

    Each call runs on one thread (no intra-op pool: a query never waits for a second, busy
    core); a large encode spreads its calls over `workers` threads instead, since
    `InferenceSession.run` is thread-safe and releases the GIL. So no lock is needed.
    """

    name = "onnx"

    def __init__(self, spec: SentenceModelSpec, onnx_dir: Path, *, workers: int = 0) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only: a CLI prints nothing but its answer
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(
            str(onnx_dir / MODEL_FILE), options, providers=["CPUExecutionProvider"]
        )
        tokenizer = open_tokenizer(spec.folder / "tokenizer.json", spec.max_seq_length)
        self.tokenizer = tokenizer
        pad = tokenizer.token_to_id("[PAD]")
        self.pad_id = int(spec.config.get("pad_token_id", pad if pad is not None else 0))
        self.lowercase = spec.lowercase
        self.dim = spec.dim
        self.workers = workers or worker_count()
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        if self.lowercase:
            texts = [t.lower() for t in texts]
        ids = self.tokenizer.encode_batch(list(texts))
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        calls = plan_calls([len(i) for i in ids], TOKEN_BUDGET, batch_size)

        def run(rows: list[int]) -> None:
            width = max(len(ids[r]) for r in rows)
            input_ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for i, row in enumerate(rows):
                input_ids[i, : len(ids[row])] = ids[row]
                mask[i, : len(ids[row])] = 1
            feed = {"input_ids": input_ids, "attention_mask": mask}
            out[rows] = self.session.run(None, feed)[0]

        if len(calls) == 1 or self.workers == 1:
            for rows in calls:
                run(rows)
        else:
            for _ in self._executor().map(run, calls):
                pass
        return out

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="vaultctx-embed")
            return self._pool


class TextTokenizer(Protocol):
    def token_to_id(self, token: str) -> int | None: ...

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]: ...


class LibraryTokenizer:
    """`tokenizers` itself, for a tokenizer.json of a shape `WordPieceTokenizer` does not cover."""

    def __init__(self, path: Path, max_length: int) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbeddingUnavailable(
                f"{path.parent.name}'s tokenizer needs the tokenizers library: "
                "pip install 'vaultctx[export]'"
            ) from exc
        self.tokenizer = Tokenizer.from_file(str(path))
        # tokenizer.json may carry its own fixed padding and a shorter truncation (128 for
        # all-MiniLM-L6-v2); sentence-transformers truncates at max_seq_length, pads per batch.
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length)

    def token_to_id(self, token: str) -> int | None:
        return self.tokenizer.token_to_id(token)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(list(texts))]


def open_tokenizer(path: Path, max_length: int) -> TextTokenizer:
    """The model's tokenizer truncated to `max_length` ids, unpadded: vaultctx's own WordPiece
    when the file is a BERT WordPiece tokenizer (the bundled model's), `tokenizers` otherwise."""
    return WordPieceTokenizer.from_file(path, max_length) or LibraryTokenizer(path, max_length)


def plan_calls(lengths: Sequence[int], budget: int, max_batch: int) -> list[list[int]]:
    """Group text indices into model calls of similar length: at most `max_batch` texts and
    `budget` padded tokens each (a longer text goes alone)."""
    calls: list[list[int]] = []
    current: list[int] = []
    for index in sorted(range(len(lengths)), key=lengths.__getitem__):
        width = lengths[index]  # sorted: the newest text is the longest of its call
        if current and ((len(current) + 1) * width > budget or len(current) >= max_batch):
            calls.append(current)
            current = []
        current.append(index)
    if current:
        calls.append(current)
    return calls


class TorchEncoder:
    """sentence-transformers on torch: any model it can load, at the cost of torch's import
    time and memory. Serialized by a lock, since a torch model is not re-entrant."""

    name = "torch"

    def __init__(self, location: str) -> None:
        try:
            import transformers
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbeddingUnavailable(
                "this model needs sentence-transformers and torch: pip install 'vaultctx[torch]'"
            ) from exc
        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()
        self.model: Any = SentenceTransformer(location, device="cpu")
        getter: Any = (  # renamed in sentence-transformers 5; either answers
            getattr(self.model, "get_embedding_dimension", None)
            or self.model.get_sentence_embedding_dimension
        )
        self.dim = int(getter())
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        with self._lock:
            torch = sys.modules["torch"]
            previous = torch.get_num_threads()
            if len(texts) == 1:
                # One query on one thread: barely slower on an idle machine, but a
                # two-thread torch waits for a busy second core for hundreds of ms.
                torch.set_num_threads(1)
            try:
                return self.model.encode(
                    list(texts),
                    batch_size=batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
            finally:
                torch.set_num_threads(previous)
