"""The warm server against a synthetic vault: HTTP latency, throughput, live re-index, CLI starts.

Builds (once, cached) a synthetic vault of ~10k blocks, indexes it (with embeddings unless
`--no-vectors`), starts `vaultctx serve` as a separate process and measures:

* warm end-to-end latency of `POST /select` over HTTP (p50/p95, one kept-alive client);
* throughput with 8 concurrent clients;
* save-to-searchable: a note gets a new unique word, select is polled until it finds it;
* `vaultctx select --json` through the running server (a fresh CLI process each time);
* cold CLI starts (no server): `--no-vectors`, and full hybrid unless `--no-vectors`.

Before that, on the example vault (54 notes): cold `vaultctx select --json` with and without
vectors (p50 and each process's peak RSS), and how long `vaultctx serve` and `vaultctx mcp`
take to be ready (server.json written; the MCP initialize answered) and to answer their
first select after that. With `--baseline OTHER_CHECKOUT/src` each of these runs on that
code too, alternating with this checkout's, so old and new are compared under one load.

    python benchmarks/serve_bench.py [--blocks 10000] [--no-vectors] [--queries 200]
                                     [--baseline SRC] [--start-runs 5]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    HYBRID_PATHS,
    REPO,
    check,
    code_env,
    emit_figures,
    offline_env,
    percentile,
    run_module_timed,
)
from synthvault import blocks_to_notes, generate_queries, generate_vault

offline_env()

from vaultctx import Workspace  # noqa: E402
from vaultctx.server.client import read_server_file  # noqa: E402

WORKDIR = Path(os.environ.get("VAULTCTX_BENCH_WORKDIR", "/tmp/vaultctx-bench/serve"))
CLIENTS = 8
TARGETS = {"warm_p95_ms": 100.0, "cli_via_server_p50_ms": 100.0, "cold_lexical_p50_ms": 400.0}
SEARCHABLE_TARGET_S = 1.0
# Cold-start issue, on the example vault: (figure, target, higher is better)
START_TARGETS = [
    ("cold_hybrid_p50_ms", 1000.0),
    ("cold_hybrid_peak_rss_mb", 250.0),
    ("cold_no_vectors_p50_ms", 400.0),
    ("serve_ready_p50_s", 2.0),
    ("serve_first_select_p50_ms", 200.0),
    ("mcp_ready_p50_s", 2.0),
    ("mcp_first_select_p50_ms", 200.0),
]
EXAMPLE_QUERY = "how do I keep the colony from swarming"


def build_vault(blocks: int, embed: bool) -> Path:
    vault = WORKDIR / f"vault-{blocks}"
    if not (vault / ".generated").exists():
        generate_vault(vault, blocks_to_notes(blocks), seed=0)
        (vault / ".generated").write_text("ok\n")
    with Workspace.open(vault) as ws:
        started = time.perf_counter()
        report = ws.index(embed=embed)
        status = ws.status()
    print(
        f"vault {vault}: {status.notes} notes, {status.blocks} blocks, {status.vectors} vectors"
        f" (index run {report.elapsed_ms / 1000:.1f}s, {time.perf_counter() - started:.1f}s)"
    )
    return vault


class Server:
    """`vaultctx serve` in its own process, as a desktop app would run it; `ready_s` is how
    long it took to announce itself in server.json."""

    def __init__(self, vault: Path, env: dict[str, str], *flags: str) -> None:
        self.vault = vault
        started = time.perf_counter()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "vaultctx", "serve", str(vault), "--port", "0", *flags],
            env=env,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 300
        info = None
        while info is None or info.pid != self.process.pid:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("vaultctx serve did not start")
            time.sleep(0.005)
            info = read_server_file(vault)
        self.ready_s = time.perf_counter() - started
        self.port = info.port
        self.token = Path(info.token_path).read_text().strip()

    def connection(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def select(self, conn: http.client.HTTPConnection, body: dict) -> dict:
        conn.request(
            "POST",
            "/select",
            body=json.dumps(body),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        response = conn.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"select failed: {response.status} {data[:200]!r}")
        return json.loads(data)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def example_vault() -> Path:
    """examples/vault, copied and indexed with vectors by this checkout's code."""
    vault = WORKDIR / "example"
    if not vault.exists():
        shutil.copytree(REPO / "examples" / "vault", vault)
    with Workspace.open(vault) as ws:
        ws.index()
    return vault


def cold_select(vault: Path, env: dict[str, str], *flags: str) -> tuple[float, float]:
    """One cold `vaultctx select --json` (no server): wall ms and the process's peak RSS."""
    args = ["select", EXAMPLE_QUERY, "-V", str(vault), "--json", *flags]
    return run_module_timed("vaultctx", args, env, stdout=subprocess.DEVNULL)


def serve_start(vault: Path, env: dict[str, str]) -> tuple[float, float]:
    """(seconds until `vaultctx serve` is ready, ms of its first select right after)."""
    server = Server(vault, env)
    try:
        started = time.perf_counter()
        while True:  # code that announces itself before it listens refuses at first
            conn = server.connection()
            try:
                answer = server.select(conn, {"query": EXAMPLE_QUERY, "k": 10})
                break
            except ConnectionRefusedError:
                time.sleep(0.005)
        first_ms = (time.perf_counter() - started) * 1000
        conn.close()
        assert answer["diagnostics"]["retrieval_path"] in HYBRID_PATHS, answer["diagnostics"]
    finally:
        server.stop()
    return server.ready_s, first_ms


def mcp_start(vault: Path, env: dict[str, str]) -> tuple[float, float]:
    """(seconds until `vaultctx mcp` answered initialize, ms of its first select tool call),
    driven by the MCP SDK's own stdio client, as a desktop client would."""
    import anyio
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "vaultctx", "mcp", str(vault)], env=env
    )

    async def session() -> tuple[float, float]:
        started = time.perf_counter()
        async with Client(params, read_timeout_seconds=120) as client:
            ready = time.perf_counter() - started
            started = time.perf_counter()
            result = await client.call_tool("select", {"query": EXAMPLE_QUERY, "k": 10})
            first_ms = (time.perf_counter() - started) * 1000
        diagnostics = result.structured_content["diagnostics"]
        assert diagnostics["retrieval_path"] in HYBRID_PATHS, diagnostics
        return ready, first_ms

    return anyio.run(session)


def start_figures(baseline: str | None, runs: int) -> dict[str, dict[str, float]]:
    """Cold CLI, serve and mcp starts on the example vault, each variant in turn."""
    vault = example_vault()
    config = {"VAULTCTX_CONFIG_DIR": str(WORKDIR / "config")}
    variants = {"current": code_env(None, **config)}
    if baseline:
        variants = {"baseline": code_env(baseline, **config), **variants}
    samples: dict[str, dict[str, list[float]]] = {name: {} for name in variants}
    for round_ in range(runs):
        order = list(variants) if round_ % 2 == 0 else list(variants)[::-1]
        for name in order:
            env = variants[name]
            measured = {}
            measured["cold_hybrid_p50_ms"], measured["cold_hybrid_peak_rss_mb"] = cold_select(
                vault, env
            )
            measured["cold_no_vectors_p50_ms"], measured["cold_no_vectors_peak_rss_mb"] = (
                cold_select(vault, env, "--no-vectors")
            )
            measured["serve_ready_p50_s"], measured["serve_first_select_p50_ms"] = serve_start(
                vault, env
            )
            measured["mcp_ready_p50_s"], measured["mcp_first_select_p50_ms"] = mcp_start(vault, env)
            for key, value in measured.items():
                samples[name].setdefault(key, []).append(value)
    figures = {
        name: {
            key: round(max(values) if key.endswith("rss_mb") else percentile(values, 50), 3)
            for key, values in got.items()
        }
        for name, got in samples.items()
    }
    print(f"\nexample vault, {runs} alternating runs each (peak RSS: the largest run)")
    print(f"{'':32}" + "".join(f"{name:>12}" for name in figures))
    for key in figures["current"]:
        print(f"{key:32}" + "".join(f"{f[key]:>12.3f}" for f in figures.values()))
    return figures


def cli_ms(vault: Path, env: dict[str, str], query: str, *flags: str, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "vaultctx", "select", query, "-V", str(vault), "--json", *flags],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        times.append((time.perf_counter() - started) * 1000)
    return times


def save_to_searchable(server: Server, vault: Path, flags: dict, runs: int) -> list[float]:
    notes = sorted(vault.glob("area-*/*.md"))
    conn = server.connection()
    delays = []
    for i in range(runs):
        note = notes[(i * 997) % len(notes)]
        word = "zq" + secrets.token_hex(4)
        with open(note, "a", encoding="utf-8") as fh:
            fh.write(f"\nA new thought about {word}.\n")
        saved = time.perf_counter()
        rel = note.relative_to(vault).as_posix()
        while time.perf_counter() - saved < 30:
            found = server.select(conn, {"query": word, "k": 3, **flags})["candidates"]
            if found and found[0]["path"] == rel:
                break
            time.sleep(0.01)
        delays.append(time.perf_counter() - saved)
        time.sleep(0.3)
    conn.close()
    return delays


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--blocks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--no-vectors", action="store_true", help="lexical + graph only")
    parser.add_argument("--cli-runs", type=int, default=10)
    parser.add_argument("--baseline", metavar="SRC", help="another checkout's src, run too")
    parser.add_argument("--start-runs", type=int, default=5, help="0: skip the start figures")
    args = parser.parse_args()
    WORKDIR.mkdir(parents=True, exist_ok=True)
    hybrid = not args.no_vectors
    starts = start_figures(args.baseline, args.start_runs) if hybrid and args.start_runs else {}
    vault = build_vault(args.blocks, embed=hybrid)
    env = code_env(None, VAULTCTX_CONFIG_DIR=str(WORKDIR / "config"))
    queries = generate_queries(args.queries, seed=1)
    flags = {} if hybrid else {"no_vectors": True}
    cli_flags = () if hybrid else ("--no-vectors",)
    figures: dict = {"blocks": args.blocks, "hybrid": hybrid, "queries": len(queries)}

    cold_lexical = cli_ms(vault, env, queries[0], "--no-vectors", runs=args.cli_runs)
    figures["cold_lexical_p50_ms"] = round(percentile(cold_lexical, 50), 1)
    if hybrid:
        cold_hybrid = cli_ms(vault, env, queries[0], runs=max(2, args.cli_runs // 5))
        figures["cold_hybrid_p50_ms"] = round(percentile(cold_hybrid, 50), 1)

    started = time.perf_counter()
    server = Server(vault, env, *(() if hybrid else ("--no-embed",)))
    figures["serve_start_s"] = round(time.perf_counter() - started, 2)
    try:
        conn = server.connection()
        for query in queries[:10]:  # warm caches, as a user's first queries would
            server.select(conn, {"query": query, **flags})
        latencies, select_ms = [], []
        for query in queries:
            t0 = time.perf_counter()
            answer = server.select(conn, {"query": query, **flags})
            latencies.append((time.perf_counter() - t0) * 1000)
            select_ms.append(answer["diagnostics"]["select_ms"])
        conn.close()
        figures["warm_p50_ms"] = round(percentile(latencies, 50), 2)
        figures["warm_p95_ms"] = round(percentile(latencies, 95), 2)
        figures["select_p50_ms"] = round(percentile(select_ms, 50), 2)
        figures["retrieval_path"] = answer["diagnostics"]["retrieval_path"]

        def client(part: list[str]) -> int:
            own = server.connection()
            for query in part:
                server.select(own, {"query": query, **flags})
            own.close()
            return len(part)

        parts = [queries[i::CLIENTS] for i in range(CLIENTS)]
        t0 = time.perf_counter()
        with ThreadPoolExecutor(CLIENTS) as pool:
            done = sum(pool.map(client, parts))
        figures["throughput_qps_8_clients"] = round(done / (time.perf_counter() - t0), 1)

        via_server = cli_ms(vault, env, queries[1], *cli_flags, runs=args.cli_runs)
        figures["cli_via_server_p50_ms"] = round(percentile(via_server, 50), 1)
        figures["cli_via_server_p95_ms"] = round(percentile(via_server, 95), 1)

        delays = save_to_searchable(server, vault, flags, runs=5)
        figures["save_to_searchable_p50_s"] = round(percentile(delays, 50), 3)
        figures["save_to_searchable_max_s"] = round(max(delays), 3)
    finally:
        server.stop()

    print(f"serve benchmark: {args.blocks} blocks, {'hybrid' if hybrid else 'lexical+graph'}")
    ok = True
    for key, target in TARGETS.items():
        ok &= check(key, figures[key], target, higher_is_better=False)
    ok &= check(
        "save_to_searchable_max_s",
        figures["save_to_searchable_max_s"],
        SEARCHABLE_TARGET_S,
        higher_is_better=False,
    )
    for key, target in START_TARGETS if starts else []:
        ok &= check(f"example vault {key}", starts["current"][key], target, higher_is_better=False)
    emit_figures("serve", {**figures, "example_vault": starts})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
