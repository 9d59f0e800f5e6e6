"""Which model's vectors answer, and which model's are being made.

Vectors are keyed by model (`embeddings(model, hash, vector)`). The index's meta names the
model whose vector set is complete (`embedding_model`: the one select, related, refine and
memory query, with that model's encoder for the query) apart from a model being filled in
after `embedding_model` was changed (`embedding_model_pending`). The indexer switches the
two in one transaction once the pending model covers every block, and drops the old
vectors then; until that moment nothing that answers changes.

`embedding_models` records, for each model id it stored vectors of, the name and backend
its encoder was opened with, so the answering model's encoder can be opened again after the
configuration names another one.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ..config import DEFAULT_EMBEDDING_MODEL
from ..errors import EmbeddingUnavailable
from .embeddings import FULL_PRECISION_MODEL, Embedder, model_id

log = logging.getLogger(__name__)

ANSWERING_KEY = "embedding_model"
PENDING_KEY = "embedding_model_pending"
NAMES_KEY = "embedding_models"

Meta = Callable[[str], str | None]


@dataclass(frozen=True)
class VectorModels:
    """The answering model (None: no vectors yet) and the pending one (None: no switch)."""

    answering: str | None
    pending: str | None

    @classmethod
    def of(cls, meta: Meta) -> VectorModels:
        """From an index's `meta` (`IndexReads.meta`, `IndexDatabase.get_meta`)."""
        answering = meta(ANSWERING_KEY) or None
        pending = meta(PENDING_KEY) or None
        return cls(answering, pending if pending != answering else None)


def recorded_names(value: str | None) -> dict[str, list[str]]:
    """`embedding_models` as {model id: [name, backend]} (empty when unset or unreadable)."""
    try:
        names = json.loads(value or "{}")
    except ValueError:
        return {}
    return names if isinstance(names, dict) else {}


def with_name(value: str | None, embedder: Embedder) -> str:
    """`embedding_models` with `embedder`'s name and backend recorded for its model id."""
    names = recorded_names(value)
    names[embedder.model_id] = [embedder.name, embedder.backend]
    return json.dumps(names, sort_keys=True)


_opened: dict[tuple[str, str], Embedder | None] = {}  # None: it failed to load
_opened_lock = threading.Lock()


def embedder_of(model: str, meta: Meta, backend: str) -> Embedder | None:
    """A loaded encoder giving `model`'s vectors, one per process, or None when nothing
    known opens it: the name recorded with its vectors, else the names of the models
    vaultctx ships (an index made before names were recorded). A model that failed to load
    is not tried again in this process: its vectors are not queried, as a query would
    otherwise wait for the failure each time."""
    recorded = recorded_names(meta(NAMES_KEY)).get(model)
    tries = [tuple(recorded)] if isinstance(recorded, list) and len(recorded) == 2 else []
    tries += [(name, b) for name in (DEFAULT_EMBEDDING_MODEL, FULL_PRECISION_MODEL)
              for b in dict.fromkeys((backend, "auto"))]  # fmt: skip
    for name, tried_backend in tries:
        if model_id(name, tried_backend) != model:
            continue
        key = (name, tried_backend)
        with _opened_lock:
            if key not in _opened:
                candidate = Embedder(name, backend=tried_backend)
                try:
                    candidate.load()
                except EmbeddingUnavailable as exc:
                    log.warning("the vectors of %s cannot be queried: %s", model, exc)
                    _opened[key] = None
                else:
                    _opened[key] = candidate
            return _opened[key]
    return None
