"""Helpers shared by the benchmark scripts: environment, percentiles, figures, BEIR data."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"


def offline_env() -> None:
    """Benchmarks never touch the network: models load from site-packages. The code measured
    is this checkout's, or `$VAULTCTX_BENCH_SRC` (another checkout's `src`: a baseline)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.path.insert(0, source_dir(os.environ.get("VAULTCTX_BENCH_SRC")))


def source_dir(baseline: str | None = None) -> str:
    """The `src` folder whose vaultctx a benchmark measures: a baseline's, or this one."""
    return str(Path(baseline).resolve()) if baseline else str(REPO / "src")


def code_env(baseline: str | None = None, **extra: str) -> dict[str, str]:
    """Environment for a child process (a CLI, a server) that runs the given code."""
    env = {**os.environ, **extra, "PYTHONPATH": source_dir(baseline)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # CLI starts as installed: bytecode cached
    if baseline:
        env["VAULTCTX_BENCH_SRC"] = source_dir(baseline)
    else:
        env.pop("VAULTCTX_BENCH_SRC", None)
    return env


def embedded_postgres(*, tcp: bool = False):
    """A throwaway PostgreSQL with pgvector (tests/pg_server.py; `with` it, or start/stop):
    needs the dev extras (embedded-postgres, psycopg)."""
    if str(REPO / "tests") not in sys.path:
        sys.path.insert(0, str(REPO / "tests"))
    from pg_server import EmbeddedPostgres

    return EmbeddedPostgres(tcp=tcp)


# The path label of a select that used both lists: `hybrid` (before issue 26, `hybrid_rrf`, which
# a baseline checkout still says).
HYBRID_PATHS = ("hybrid", "hybrid_rrf")


def vault_of(ws):
    """The `Vault` (folder, index file, model) a `Workspace` holds, for benchmarks that read
    or write the index file directly; a `--baseline` checkout's Workspace may be one itself."""
    return getattr(ws, "_vault", ws)


def selector_of(ws):
    """A workspace's warm select state, in this checkout or a `--baseline` one."""
    return ws._selector if hasattr(ws, "_selector_made") else ws.selector


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100]) of a non-empty list."""
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def _status_mb(field: str) -> float | None:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def peak_rss_mb() -> float:
    """This process's peak resident memory. Linux's VmHWM, not getrusage: the latter also
    counts the parent's memory at fork time, which a child inherits in its high-water mark."""
    peak = _status_mb("VmHWM")
    return peak if peak is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mb() -> float:
    """Resident memory now (Linux), to split the peak into what each stage added."""
    return _status_mb("VmRSS") or 0.0


def resident_by_kind() -> dict[str, float]:
    """Resident MB per kind of mapping (Linux smaps): the index file SQLite maps, the model's
    weights file, shared libraries, and anonymous memory (heap: matrices, caches, objects)."""
    kinds: dict[str, float] = {}
    kind = "anonymous"
    try:
        with open("/proc/self/smaps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                fields = line.split()
                if "-" in fields[0] and len(fields) >= 5 and ":" not in fields[0]:
                    path = fields[5] if len(fields) > 5 else ""
                    if path.endswith(("index.db", "memory.db")):
                        kind = "sqlite_mmap"
                    elif path.endswith((".onnx.data", ".safetensors")):
                        kind = "model_weights_mmap"
                    elif ".so" in path:
                        kind = "libraries"
                    elif path.startswith("/"):
                        kind = "other_files"
                    else:
                        kind = "anonymous"
                elif fields[0] == "Rss:":
                    kinds[kind] = kinds.get(kind, 0.0) + int(fields[1]) / 1024
    except OSError:
        pass
    return {k: round(v, 1) for k, v in sorted(kinds.items())}


# Runs a module as `python -m` would, then writes its peak RSS (VmHWM, in kB) to a file.
_PEAK_PROBE = """
import atexit, os, runpy, sys
def _write_peak():
    with open("/proc/self/status") as status:
        peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    with open(os.environ["VAULTCTX_BENCH_PEAK_FILE"], "w") as out:
        out.write(peak)
atexit.register(_write_peak)
sys.argv = sys.argv[1:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


def run_module_timed(
    module: str, args: list[str], env: dict[str, str], **popen: object
) -> tuple[float, float]:
    """Run `python -m module args` to its end: (wall ms, the process's own peak RSS in MB)."""
    fd, peak_file = tempfile.mkstemp(prefix="vaultctx-peak-")
    os.close(fd)
    try:
        command = [sys.executable, "-c", _PEAK_PROBE, module, *args]
        started = time.perf_counter()
        subprocess.run(
            command, env={**env, "VAULTCTX_BENCH_PEAK_FILE": peak_file}, check=True, **popen
        )
        elapsed = (time.perf_counter() - started) * 1000
        with open(peak_file, encoding="ascii") as fh:
            return elapsed, int(fh.read()) / 1024
    finally:
        os.unlink(peak_file)


def check(label: str, value: float, target: float, *, higher_is_better: bool) -> bool:
    ok = value >= target if higher_is_better else value <= target
    sign = ">=" if higher_is_better else "<="
    print(f"  [{'PASS' if ok else 'MISS'}] {label}: {value:.3f} (target {sign} {target})")
    return ok


def emit_figures(name: str, figures: dict) -> None:
    """The one JSON line at the end of every benchmark, for run-to-run comparison."""
    print(json.dumps({"benchmark": name, **figures}, sort_keys=True))


def load_beir(folder: Path, split: str = "test") -> tuple[dict, dict, dict]:
    """(corpus {id: {title, text}}, queries {id: text}, qrels {qid: {doc id: grade}})."""
    corpus = {}
    with open(folder / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            corpus[str(doc["_id"])] = {"title": doc.get("title", ""), "text": doc.get("text", "")}
    queries = {}
    with open(folder / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            queries[str(q["_id"])] = q["text"]
    qrels: dict[str, dict[str, int]] = {}
    with open(folder / "qrels" / f"{split}.tsv", encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            qid, did, grade = line.rstrip("\n").split("\t")[:3]
            if int(grade) > 0:
                qrels.setdefault(qid, {})[did] = int(grade)
    return corpus, queries, qrels
