"""Write a BERT sentence-transformers model as an ONNX graph, straight from its weights.

No torch and no download: the graph is spelled out with standard ONNX operators (opset 18) and
the weights are copied tensor by tensor from `model.safetensors`, so building takes about a
second and little memory. The graph ends in the model's pooling and L2 normalization, so ONNX
Runtime returns the sentence vectors sentence-transformers would (cosine ≥ 0.9999; a test
checks it). Weights go to a separate data file at page-aligned offsets: ONNX Runtime then maps
them instead of copying, and the 47 MB word-embedding table stays mostly on disk.

A folder that already holds its graph (`model.onnx` and no weights: the int8 model bundled
with vaultctx, `storage/model/`) is read the same way and run as it is, never exported.

Only what vaultctx can vouch for is exported — a BERT or XLM-RoBERTa encoder with absolute
positions, mean or CLS pooling, optional Normalize; `read_spec` says why anything else is not
(the torch backend still runs it). XLM-RoBERTa differs from BERT, for this graph, only in its
position ids: they count from `pad_token_id + 1` over the real tokens, so with padding on the
right the graph reads the position table from that row on. Weights may also come from another
source than safetensors (`export(..., weights=)`: the multilingual model's 4-bit file,
`storage/e5.py`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Iterable

EXPORT_VERSION = 1  # bump when the graph changes: cached exports are rebuilt
OPSET = 18
DATA_ALIGNMENT = 4096  # ONNX Runtime maps external data whose offset is page-aligned
MODEL_FILE = "model.onnx"
DATA_FILE = "model.onnx.data"


MODEL_TYPES = ("bert", "xlm-roberta")


class WeightSource(Protocol):
    """Named weight arrays by their Hugging Face names: a safetensors handle, or a reader."""

    def keys(self) -> Iterable[str]: ...

    def get_tensor(self, name: str) -> np.ndarray: ...


class UnsupportedModel(Exception):
    """The model folder is not one this exporter reproduces exactly."""


@dataclass(frozen=True)
class SentenceModelSpec:
    """What the ONNX path needs to know about a sentence-transformers folder."""

    folder: Path
    config: dict[str, Any]
    pooling: str  # "mean" or "cls"
    max_seq_length: int
    lowercase: bool

    @property
    def dim(self) -> int:
        return int(self.config["hidden_size"])

    @property
    def prebuilt(self) -> bool:
        """The folder carries its own ONNX graph instead of weights to export."""
        return not (self.folder / "model.safetensors").is_file()

    def source_files(self) -> list[Path]:
        """The files the exported graph is made from: a change to any means a new export."""
        return [self.folder / "model.safetensors", self.folder / "config.json"]


def read_spec(folder: Path) -> SentenceModelSpec:
    """Read and check a sentence-transformers folder; raises `UnsupportedModel` with the reason."""
    modules = _read_json(folder / "modules.json")
    if not isinstance(modules, list):
        raise UnsupportedModel("modules.json is missing or not a list")
    kinds = [_module_kind(str(m.get("type", ""))) for m in modules]
    if kinds[:2] != ["Transformer", "Pooling"] or any(k != "Normalize" for k in kinds[2:]):
        raise UnsupportedModel(f"modules {kinds} are not Transformer, Pooling[, Normalize]")
    if modules[0].get("path"):
        raise UnsupportedModel("the transformer is not at the folder's root")
    config = _read_json(folder / "config.json")
    if not isinstance(config, dict) or config.get("model_type") not in MODEL_TYPES:
        raise UnsupportedModel("not a BERT or XLM-RoBERTa model")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise UnsupportedModel("relative position embeddings")
    if config.get("hidden_act") != "gelu":
        raise UnsupportedModel(f"activation {config.get('hidden_act')!r}")
    if not (folder / "tokenizer.json").is_file():
        raise UnsupportedModel("no tokenizer.json")
    if not (folder / "model.safetensors").is_file() and not (folder / MODEL_FILE).is_file():
        raise UnsupportedModel("no model.safetensors")
    pooling_cfg = _read_json(folder / str(modules[1].get("path", "")) / "config.json") or {}
    modes = [k for k, v in pooling_cfg.items() if k.startswith("pooling_mode_") and v is True]
    if modes == ["pooling_mode_mean_tokens"]:
        pooling = "mean"
    elif modes == ["pooling_mode_cls_token"]:
        pooling = "cls"
    else:
        raise UnsupportedModel(f"pooling {modes}")
    st_cfg = _read_json(folder / "sentence_bert_config.json") or {}
    max_len = int(st_cfg.get("max_seq_length") or config["max_position_embeddings"])
    return SentenceModelSpec(
        folder,
        config,
        pooling,
        min(max_len, int(config["max_position_embeddings"])),
        bool(st_cfg.get("do_lower_case", False)),
    )


def export(spec: SentenceModelSpec, out_dir: Path, weights: WeightSource | None = None) -> None:
    """Write `model.onnx` and its weights file `model.onnx.data` into `out_dir`, from
    `weights`, else from the folder's `model.safetensors`."""
    import onnx

    if weights is None:
        from safetensors import safe_open

        with safe_open(str(spec.folder / "model.safetensors"), framework="np") as handle:
            graph = _graph(spec, handle, out_dir)
    else:
        graph = _graph(spec, weights, out_dir)
    model = onnx.helper.make_model(
        graph,
        opset_imports=[onnx.helper.make_opsetid("", OPSET)],
        producer_name="vaultctx",
        producer_version=str(EXPORT_VERSION),
    )
    onnx.save_model(model, str(out_dir / MODEL_FILE))
    onnx.checker.check_model(str(out_dir / MODEL_FILE))  # by path: it finds the data file


def _graph(spec: SentenceModelSpec, weights: WeightSource, out_dir: Path) -> Any:
    with open(out_dir / DATA_FILE, "wb") as data:
        graph = _GraphBuilder(weights, data).bert(spec)
        data.flush()
    return graph


class _GraphBuilder:
    """Emits nodes and initializers; large weights are appended to the data file."""

    def __init__(self, weights: WeightSource, data: BinaryIO) -> None:
        self.weights = weights
        names = weights.keys()  # a safetensors file handle, not a dict
        self.prefix = next(
            (p for p in ("bert.", "roberta.") if any(k.startswith(p) for k in names)), ""
        )
        self.data = data
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._names: set[str] = set()

    def weight(self, key: str) -> np.ndarray:
        return self.weights.get_tensor(self.prefix + key).astype(np.float32, copy=False)

    def const(self, name: str, value: np.ndarray) -> str:
        """An initializer, once per name; arrays above a page go to the data file."""
        from onnx import TensorProto, helper, numpy_helper

        if name in self._names:
            return name
        self._names.add(name)
        value = np.ascontiguousarray(value)
        if value.nbytes <= DATA_ALIGNMENT:
            self.initializers.append(numpy_helper.from_array(value, name))
            return name
        self.data.write(b"\0" * (-self.data.tell() % DATA_ALIGNMENT))
        offset = self.data.tell()
        self.data.write(value.tobytes())
        tensor = TensorProto(
            name=name,
            data_type=helper.np_dtype_to_tensor_dtype(value.dtype),
            dims=value.shape,
            data_location=TensorProto.EXTERNAL,
        )
        for key, entry in (("location", DATA_FILE), ("offset", offset), ("length", value.nbytes)):
            tensor.external_data.add(key=key, value=str(entry))
        self.initializers.append(tensor)
        return name

    def scalar(self, value: float) -> str:
        return self.const(f"scalar_{value!r}", np.array(value, np.float32))

    def axes(self, *values: int) -> str:
        return self.const("axes_" + "_".join(map(str, values)), np.array(values, np.int64))

    def node(self, op: str, inputs: list[str], **attrs: Any) -> str:
        from onnx import helper

        out = f"{op.lower()}_{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def layer_norm(self, x: str, key: str, eps: float) -> str:
        gamma = self.const(f"{key}.weight", self.weight(f"{key}.weight"))
        beta = self.const(f"{key}.bias", self.weight(f"{key}.bias"))
        return self.node("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=eps)

    def linear(self, x: str, name: str, weight: np.ndarray, bias: np.ndarray) -> str:
        """x @ weight.T + bias, with the PyTorch (out, in) weight stored transposed."""
        product = self.node("MatMul", [x, self.const(f"{name}.weight_t", weight.T)])
        return self.node("Add", [product, self.const(f"{name}.bias", bias)])

    def dense(self, x: str, key: str) -> str:
        return self.linear(x, key, self.weight(f"{key}.weight"), self.weight(f"{key}.bias"))

    def bert(self, spec: SentenceModelSpec) -> Any:
        from onnx import TensorProto, helper

        cfg = spec.config
        hidden, heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
        head_size, eps = hidden // heads, float(cfg["layer_norm_eps"])
        w = self.weight

        # Embeddings: word + position + token type 0 (one segment), then LayerNorm.
        words = self.node(
            "Gather",
            [self.const("word_embeddings", w("embeddings.word_embeddings.weight")), "input_ids"],
        )
        positions = w("embeddings.position_embeddings.weight")
        if cfg["model_type"] == "xlm-roberta":  # position ids from pad_token_id + 1 on
            positions = positions[int(cfg["pad_token_id"]) + 1 :]
        positions = positions + w("embeddings.token_type_embeddings.weight")[0]
        seq_len = self.node("Shape", ["input_ids"], start=1, end=2)
        position_rows = self.node(
            "Slice",
            [self.const("position_embeddings", positions), self.axes(0), seq_len, self.axes(0)],
        )
        x = self.layer_norm(self.node("Add", [words, position_rows]), "embeddings.LayerNorm", eps)

        # Padding: a large negative bias on masked keys, shaped (batch, 1, 1, seq).
        mask = self.node("Cast", ["attention_mask"], to=TensorProto.FLOAT)
        masked = self.node("Sub", [self.scalar(1.0), mask])
        bias = self.node("Mul", [masked, self.scalar(float(np.finfo(np.float32).min))])
        bias = self.node("Unsqueeze", [bias, self.axes(1, 2)])
        split_heads = self.const("split_heads", np.array([0, 0, heads, head_size], np.int64))
        merge_heads = self.const("merge_heads", np.array([0, 0, hidden], np.int64))
        scale = np.float32(1 / math.sqrt(head_size))

        for layer in range(int(cfg["num_hidden_layers"])):
            p = f"encoder.layer.{layer}."
            a = p + "attention.self."
            # One matmul for query, key and value; the 1/sqrt(d) scale folded into the query.
            qkv_weight = np.concatenate(
                [w(a + "query.weight") * scale, w(a + "key.weight"), w(a + "value.weight")]
            )
            qkv_bias = np.concatenate(
                [w(a + "query.bias") * scale, w(a + "key.bias"), w(a + "value.bias")]
            )
            qkv = self.linear(x, a + "qkv", qkv_weight, qkv_bias)
            q, k, v = (f"{a}{part}" for part in ("q", "k", "v"))
            sizes = self.const("qkv_sizes", np.array([hidden] * 3, np.int64))
            self.nodes.append(helper.make_node("Split", [qkv, sizes], [q, k, v], axis=-1))
            q = self.node("Transpose", [self.node("Reshape", [q, split_heads])], perm=[0, 2, 1, 3])
            k = self.node("Transpose", [self.node("Reshape", [k, split_heads])], perm=[0, 2, 3, 1])
            v = self.node("Transpose", [self.node("Reshape", [v, split_heads])], perm=[0, 2, 1, 3])
            scores = self.node("Add", [self.node("MatMul", [q, k]), bias])
            context = self.node("MatMul", [self.node("Softmax", [scores], axis=-1), v])
            context = self.node("Transpose", [context], perm=[0, 2, 1, 3])
            context = self.node("Reshape", [context, merge_heads])
            attended = self.node("Add", [self.dense(context, p + "attention.output.dense"), x])
            x = self.layer_norm(attended, p + "attention.output.LayerNorm", eps)
            inner = self.dense(x, p + "intermediate.dense")
            inner = self._gelu(inner)
            out = self.node("Add", [self.dense(inner, p + "output.dense"), x])
            x = self.layer_norm(out, p + "output.LayerNorm", eps)

        pooled = self._pool(x, mask, spec.pooling)
        norm = self.node("ReduceL2", [pooled, self.axes(-1)], keepdims=1)
        norm = self.node("Max", [norm, self.scalar(1e-12)])
        self.nodes.append(helper.make_node("Div", [pooled, norm], ["sentence_embedding"]))
        tokens = ["batch", "sequence"]
        return helper.make_graph(
            self.nodes,
            "sentence_embedding",
            [
                helper.make_tensor_value_info("input_ids", TensorProto.INT64, tokens),
                helper.make_tensor_value_info("attention_mask", TensorProto.INT64, tokens),
            ],
            [
                helper.make_tensor_value_info(
                    "sentence_embedding", TensorProto.FLOAT, ["batch", hidden]
                )
            ],
            self.initializers,
        )

    def _gelu(self, x: str) -> str:
        """The exact (erf) GELU of BERT; ONNX Runtime fuses this pattern into one kernel."""
        erf = self.node("Erf", [self.node("Div", [x, self.scalar(math.sqrt(2.0))])])
        half = self.node("Mul", [x, self.scalar(0.5)])
        return self.node("Mul", [half, self.node("Add", [erf, self.scalar(1.0)])])

    def _pool(self, x: str, mask: str, pooling: str) -> str:
        if pooling == "cls":
            first = self.const("first_token", np.array(0, np.int64))
            return self.node("Gather", [x, first], axis=1)
        weights = self.node("Unsqueeze", [mask, self.axes(2)])
        summed = self.node("ReduceSum", [self.node("Mul", [x, weights]), self.axes(1)], keepdims=0)
        counts = self.node("ReduceSum", [weights, self.axes(1)], keepdims=0)
        return self.node("Div", [summed, self.node("Max", [counts, self.scalar(1e-9)])])


def _module_kind(type_path: str) -> str:
    """ "Pooling" for sentence-transformers' own module classes, wherever a version keeps them
    (`sentence_transformers.models.Pooling`, `...sentence_transformer.modules.Pooling`)."""
    if type_path.startswith("sentence_transformers."):
        return type_path.rsplit(".", 1)[-1]
    return type_path


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
