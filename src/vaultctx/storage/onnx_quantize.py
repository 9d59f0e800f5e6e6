"""Dynamic int8 quantization of an exported sentence graph, the same way for every model
vaultctx packages (the bundled MiniLM, `scripts/build_model.py`; multilingual-e5-small,
`storage/e5.py`). Needs `onnx` besides onnxruntime: the `export` or `multilingual` extra.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .onnx_export import MODEL_FILE

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Iterator

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


def quantize(fp32_dir: Path, out_file: Path, recipe: dict[str, Any] = RECIPE) -> None:
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
    with _root_logger_quiet():
        quantize_dynamic(
            model,
            out_file,
            op_types_to_quantize=list(recipe["op_types_to_quantize"]),
            per_channel=bool(recipe["per_channel"]),
            reduce_range=bool(recipe["reduce_range"]),
            weight_type=getattr(QuantType, recipe["weight_type"]),
            nodes_to_quantize=nodes,
        )


@contextlib.contextmanager
def _root_logger_quiet() -> Iterator[None]:
    """The quantizer warns on the root logger, which would give it a handler printing to
    stderr for the rest of the process (`logging.basicConfig`); a handler of our own that
    drops records keeps both from happening while it runs."""
    root = logging.getLogger()
    if root.handlers:
        yield
        return
    handler = logging.NullHandler()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
