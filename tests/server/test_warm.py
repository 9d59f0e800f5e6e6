"""Warm by default: servers load the model in the background and answer at once; a query that
arrives first waits only for what is still loading."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from select_helpers import NOTES, HashEmbedder
from server_helpers import call
from vaultctx import Workspace
from vaultctx.server.run import LocalServer
from vaultctx.storage.embeddings import Embedder


class HashEncoder:
    name = "test"
    dim = 64

    def encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        return HashEmbedder().encode(texts)


class GatedEmbedder(Embedder):
    """HashEmbedder's vectors behind a model load that finishes only when `gate` is set;
    `loading` tells that the load has begun."""

    def __init__(self) -> None:
        super().__init__("hash-test-model")
        self.loading = threading.Event()
        self.gate = threading.Event()

    def _create(self) -> HashEncoder:
        self.loading.set()
        assert self.gate.wait(30), "the test never opened the gate"
        return HashEncoder()


@pytest.fixture
def vault(make_vault: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VAULTCTX_CONFIG_DIR", str(tmp_path / "config"))
    root = make_vault(NOTES)
    with Workspace.open(root, embedder=HashEmbedder()) as ws:
        ws.index()  # vectors under the same model id as GatedEmbedder's
    return root


@pytest.fixture
def gated(vault: Path) -> Iterator[tuple[Workspace, GatedEmbedder]]:
    embedder = GatedEmbedder()
    ws = Workspace.open(vault, embedder=embedder)
    yield ws, embedder
    embedder.gate.set()
    ws.close()


def test_the_server_answers_while_the_model_loads_and_its_first_select_waits_for_it(
    gated: tuple[Workspace, GatedEmbedder],
) -> None:
    ws, embedder = gated
    with LocalServer(ws, watch=False) as server:  # warm: starts loading in the background
        assert embedder.loading.wait(30) and not embedder.loaded
        assert call(server, "GET", "/health", token=None)[0] == 200
        answers: list = []
        first = threading.Thread(
            target=lambda: answers.append(call(server, "POST", "/select", {"query": "smoker"}))
        )
        first.start()
        embedder.gate.set()
        first.join(30)
    status, _, body = answers[0]
    assert status == 200
    assert body["diagnostics"]["retrieval_path"] == "hybrid"  # it waited, no fallback
    assert body["candidates"][0]["path"] == "Equipment/Smoker.md"


def test_warm_up_loads_the_model_only_when_vectors_are_wanted(
    gated: tuple[Workspace, GatedEmbedder],
) -> None:
    ws, embedder = gated
    embedder.gate.set()
    ws.warm_up(use_vectors=False).join(30)
    assert not embedder.loaded
    assert ws.warm_up() is ws.warm_up(use_vectors=False)  # once per workspace


def test_warm_up_loads_the_model_even_before_anything_is_indexed(
    make_vault: Callable[..., Path],
) -> None:
    embedder = GatedEmbedder()
    embedder.gate.set()
    with Workspace.open(make_vault({"A.md": "# A\n"}), embedder=embedder) as ws:
        ws.warm_up().join(30)  # no index yet: the watcher's first run will want the model
        assert embedder.loaded


def test_a_watcher_starts_loading_the_model(gated: tuple[Workspace, GatedEmbedder]) -> None:
    ws, embedder = gated
    with ws.watch():
        assert embedder.loading.wait(30)
