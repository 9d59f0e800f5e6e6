"""The ONNX export of a model, built once per model and kept in the user's cache folder.

`<cache>/onnx/<model>-<key>/` holds `model.onnx`, its weights file and `manifest.json`. The
key hashes the exporter version and the identity (path, size, mtime) of the files the graph
is made from, so another model, a reinstalled one or a new exporter gets a new folder. A
model vaultctx writes whole from another source (the multilingual model, `storage/e5.py`) is
kept the same way by `load_written`: its folder holds the graph, the tokenizer and configs. An
export is written in a temporary folder and renamed into place only when complete, so a
killed process leaves a temporary folder that nothing trusts, never a half-written export.
Each load checks the files against the manifest and the model's vector for a fixed probe
sentence; a damaged export is discarded and rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import EmbeddingUnavailable
from .encoders import OnnxEncoder
from .onnx_export import EXPORT_VERSION, SentenceModelSpec, export, read_spec

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
PROBE_TEXT = "vaultctx checks its cached ONNX model with this sentence."
PROBE_MIN_COSINE = 0.9999
_STALE_TEMP_S = 3600.0  # a temporary folder this old belongs to a process that died


def cache_root() -> Path:
    """`$VAULTCTX_CACHE_DIR`, else the platform's user cache folder for vaultctx."""
    override = os.environ.get("VAULTCTX_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("vaultctx"))


def export_key(spec: SentenceModelSpec) -> str:
    identity: list[object] = [EXPORT_VERSION, str(spec.folder.resolve())]
    for path in spec.source_files():
        stat = path.stat()
        identity.append([path.name, stat.st_size, stat.st_mtime_ns])
    return hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:20]


def export_dir(spec: SentenceModelSpec, label: str) -> Path:
    return _folder(label, export_key(spec))


def _folder(label: str, key: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", label.rsplit("/", 1)[-1]).strip("-.") or "model"
    return cache_root() / "onnx" / f"{slug}-{key}"


def load_encoder(spec: SentenceModelSpec, label: str) -> OnnxEncoder:
    """An encoder on the cached export of `spec`, exporting it first if it is missing or
    damaged."""
    return _load(
        export_dir(spec, label),
        lambda temp: _export(spec, temp),
        lambda folder: OnnxEncoder(spec, folder),
    )


def load_written(label: str, identity: list[object], write: Callable[[Path], None]) -> OnnxEncoder:
    """An encoder on a model folder that `write(folder)` makes whole (graph, `tokenizer.json`,
    the sentence-transformers configs) and that depends on `identity` only; written once."""
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]
    return _load(_folder(label, key), write, lambda folder: OnnxEncoder(read_spec(folder), folder))


def _load(
    final: Path, write: Callable[[Path], None], open_: Callable[[Path], OnnxEncoder]
) -> OnnxEncoder:
    if (final / MANIFEST).is_file():
        try:
            return _open_checked(final, open_)
        except EmbeddingUnavailable:  # a library missing (tokenizers): the files are sound
            raise
        except Exception as exc:  # whatever is wrong with the files, a new export repairs it
            log.warning("cached ONNX model %s is damaged (%s); exporting it again", final, exc)
            _discard(final)
    elif final.exists():
        _discard(final)  # no manifest: not an export that finished
    return _build(final, write, open_)


def _export(spec: SentenceModelSpec, temp: Path) -> None:
    try:
        export(spec, temp)
    except ImportError as exc:  # the default install runs the bundled model only
        raise EmbeddingUnavailable(
            f"exporting {spec.folder} to ONNX needs onnx and safetensors:"
            f" pip install 'vaultctx[export]' ({exc})"
        ) from exc
    except Exception as exc:  # a bad weights file, a full disk: no vectors, say why
        raise EmbeddingUnavailable(f"cannot export {spec.folder} to ONNX: {exc}") from exc


def _open_checked(folder: Path, open_: Callable[[Path], OnnxEncoder]) -> OnnxEncoder:
    manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    for name, size in manifest["files"].items():
        actual = (folder / name).stat().st_size
        if actual != size:
            raise ValueError(f"{name} has {actual} bytes, the export wrote {size}")
    encoder = open_(folder)
    expected = np.asarray(manifest["probe"], dtype=np.float32)
    cosine = float(encoder.encode([PROBE_TEXT])[0] @ expected)
    if not cosine >= PROBE_MIN_COSINE:  # NaN weights give a NaN cosine
        raise ValueError(f"the probe sentence's vector moved (cosine {cosine:.6f})")
    return encoder


def _build(
    final: Path, write: Callable[[Path], None], open_: Callable[[Path], OnnxEncoder]
) -> OnnxEncoder:
    final.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temps(final)
    temp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    try:
        started = time.perf_counter()
        try:
            write(temp)
        except EmbeddingUnavailable:
            raise
        except Exception as exc:  # a bad weights file, a full disk: no vectors, say why
            raise EmbeddingUnavailable(f"cannot write {final.name} for ONNX: {exc}") from exc
        encoder = open_(temp)  # maps the weights: the rename below keeps them
        probe = encoder.encode([PROBE_TEXT])[0]
        written = sorted(p for p in temp.rglob("*") if p.is_file())
        files = {p.relative_to(temp).as_posix(): p.stat().st_size for p in written}
        manifest = {"files": files, "probe": probe.tolist()}
        (temp / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
        for path in [*written, temp / MANIFEST]:
            _fsync(path)
        try:
            temp.rename(final)  # the commit point
        except OSError:  # another process published the same export first: ours is as good
            shutil.rmtree(temp, ignore_errors=True)
        else:
            _fsync(final.parent)
        log.info("exported %s to ONNX in %.1f s", final.name, time.perf_counter() - started)
        return encoder
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise


def _discard(folder: Path) -> None:
    """Move a damaged export aside first, so no other process opens it half-deleted."""
    trash = folder.with_name(f".{folder.name}.{os.getpid()}.discarded.tmp")
    try:
        folder.rename(trash)
    except OSError:
        return  # gone already, or another process moved it
    shutil.rmtree(trash, ignore_errors=True)


def _remove_stale_temps(final: Path) -> None:
    cutoff = time.time() - _STALE_TEMP_S
    for path in final.parent.glob(f".{final.name}.*.tmp"):
        try:
            if path.stat().st_mtime < cutoff:
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
