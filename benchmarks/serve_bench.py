"""The warm server against a synthetic vault: HTTP latency, throughput, live re-index, CLI starts.

Builds (once, cached) a synthetic vault of ~10k blocks, indexes it (with embeddings unless
`--no-vectors`), starts `vaultctx serve` as a separate process and measures:

* warm end-to-end latency of `POST /select` over HTTP (p50/p95, one kept-alive client);
* throughput with 8 concurrent clients;
* save-to-searchable: a note gets a new unique word, select is polled until it finds it;
* `vaultctx select --json` through the running server (a fresh CLI process each time);
* cold CLI starts (no server): `--no-vectors`, and full hybrid unless `--no-vectors`.

    python benchmarks/serve_bench.py [--blocks 10000] [--no-vectors] [--queries 200]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import check, emit_figures, offline_env, percentile
from synthvault import blocks_to_notes, generate_queries, generate_vault

offline_env()

from vaultctx import Workspace  # noqa: E402
from vaultctx.server.client import read_server_file  # noqa: E402

WORKDIR = Path("/tmp/vaultctx-bench/serve")
CLIENTS = 8
TARGETS = {"warm_p95_ms": 100.0, "cli_via_server_p50_ms": 100.0, "cold_lexical_p50_ms": 400.0}
SEARCHABLE_TARGET_S = 1.0


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
    """`vaultctx serve` in its own process, as a desktop app would run it."""

    def __init__(self, vault: Path, env: dict[str, str], *flags: str) -> None:
        self.vault = vault
        self.process = subprocess.Popen(
            [sys.executable, "-m", "vaultctx", "serve", str(vault), "--port", "0", *flags],
            env=env,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 300
        info = None
        while info is None or info.pid != self.process.pid:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("vaultctx serve did not start")
            time.sleep(0.1)
            info = read_server_file(vault)
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
    args = parser.parse_args()
    WORKDIR.mkdir(parents=True, exist_ok=True)
    hybrid = not args.no_vectors
    vault = build_vault(args.blocks, embed=hybrid)
    env = {**os.environ, "VAULTCTX_CONFIG_DIR": str(WORKDIR / "config")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # CLI starts as installed: bytecode cached
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
    emit_figures("serve", figures)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
