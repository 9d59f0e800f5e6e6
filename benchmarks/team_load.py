"""A team's index on PostgreSQL under load: one `vaultctx serve` against two on one database.

Starts a throwaway PostgreSQL (TCP on 127.0.0.1), copies `examples/vault` (54 notes indexed;
or, with `--notes N`, a vault of N notes from `synthvault.py`) and indexes it with
`database_url` set (`vaultctx index`, which then exits and frees the indexer seat). Then:

1. one `vaultctx serve --no-watch` (its own vault copy, config folder and empty index_dir:
   every read comes from the database) records its `/select` answer to each of ~50 queries
   (the 35 questions of tests/questions/example_vault.json and 15 note titles; with
   `--notes`, 50 queries from `synthvault.generate_queries`), one at a time;
2. C concurrent clients (threads, one kept-alive connection per server each; C = 4 and 8)
   send a fixed number of `/select` requests to it: requests/s, p50/p95 latency, errors;
3. a second server over the same database joins and the same load is split across both
   (request j to server j mod 2): every answer from either must be the first server's
   recorded one (same candidate ids in the same order, same scores);
4. a run with writes: the same selects plus `/touch` requests (alternating servers, existing
   notes) interleaved; afterwards every acknowledged touch must be a row of `accesses`
   (counted per note, with psycopg). Touches change the graph context, and so answers: the
   identity check uses only the runs without them.

During each run the CPU time of the servers, of PostgreSQL (postmaster, its live backends
and the ones that ended) and of this client is read from /proc, beside the whole machine's,
to say which of them fills the cores.

Each server has its own vault folder, as on two hosts, each with its own copy of the notes
(two servers of one folder on one host also serve side by side over a database, but only
the first announces itself in `server.json`, which this script waits for).

    python benchmarks/team_load.py [--requests 400] [--clients 4,8] [--rounds 3]
                                   [--touches 100] [--notes N] [--no-embed] [--keep]

The synthetic vault's notes are long (2,000 notes make ~19,000 blocks): embedding them takes
more than 10 minutes on 2 busy cores, so use `--notes N` with `--no-embed` for a bounded run.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, check, code_env, embedded_postgres, emit_figures, offline_env, percentile

offline_env()

QUESTIONS = REPO / "tests" / "questions" / "example_vault.json"
QUERY_COUNT = 50
# Every note's modification time, so that answers do not depend on the day the benchmark
# runs (notes edited in the last 3 days are graph context; see pipeline/graphwalk.py).
NOTE_MTIME = 1_700_000_000  # 2023-11-14
START_TIMEOUT_S = 300
HTTP_TIMEOUT_S = 120
CLK_TCK = os.sysconf("SC_CLK_TCK")
TARGETS = {"errors": 0, "lost_writes": 0}


# --- the vault and its queries ---------------------------------------------------------------


def copy_vault(source: Path, target: Path) -> Path:
    """A copy of the vault's notes, without any index, all with one old modification time."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".vaultctx"))
    for path in target.rglob("*"):
        if path.is_file():
            os.utime(path, (NOTE_MTIME, NOTE_MTIME))
    return target


def note_paths(vault: Path) -> list[str]:
    return sorted(p.relative_to(vault).as_posix() for p in vault.rglob("*.md"))


def example_queries(vault: Path) -> list[str]:
    """The example vault's questions, then note titles (file names) up to QUERY_COUNT."""
    queries = [q["question"] for q in json.loads(QUESTIONS.read_text(encoding="utf-8"))]
    for path in note_paths(vault):
        if len(queries) >= QUERY_COUNT:
            break
        title = Path(path).stem
        if title not in queries:
            queries.append(title)
    return queries[:QUERY_COUNT]


def build_source(workdir: Path, notes: int | None) -> tuple[Path, list[str], str]:
    """(the vault to copy, its queries, what it is)."""
    if notes is None:
        source = REPO / "examples" / "vault"
        files = len(note_paths(source))
        return source, example_queries(source), f"examples/vault ({files} Markdown files)"
    from synthvault import generate_queries, generate_vault

    source = workdir / "synthetic"
    generate_vault(source, notes, seed=0)
    return source, generate_queries(QUERY_COUNT, seed=1), f"synthvault, {notes} notes, seed 0"


# --- processes and their CPU time ----------------------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def process_cpu_s(pid: int) -> float:
    """A process's CPU seconds (all its threads)."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def machine_busy_s() -> float:
    """CPU seconds all cores spent not idle since boot (/proc/stat), for everyone."""
    with open("/proc/stat", encoding="ascii") as fh:
        values = [int(v) for v in fh.readline().split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return (sum(values[:8]) - idle) / CLK_TCK


class CpuMeter:
    """CPU seconds used between `start()` and `stop()` by the servers, PostgreSQL, this
    client and the whole machine."""

    def __init__(self, postgres: Any) -> None:
        self.servers: dict[str, int] = {}  # name: pid
        self.postgres = postgres  # the EmbeddedPostgres

    def sample(self) -> dict[str, float]:
        postgres = self.postgres.cpu_seconds()
        own = os.times()
        each = {f"server_{name}": process_cpu_s(pid) for name, pid in self.servers.items()}
        return {
            **each,
            "servers": sum(each.values()),
            "postgres": postgres,
            "client": own.user + own.system,
            "machine": machine_busy_s(),
        }

    def start(self) -> None:
        self._before = self.sample()

    def stop(self) -> dict[str, float]:
        """CPU seconds each used since `start()`; `others`: the rest of the machine."""
        after = self.sample()
        used = {k: after[k] - self._before.get(k, 0.0) for k in after}
        used["others"] = used["machine"] - used["servers"] - used["postgres"] - used["client"]
        return used


class Server:
    """`vaultctx serve --no-watch` in its own process, reading only the database."""

    def __init__(self, name: str, vault: Path, env: dict[str, str], log: Path) -> None:
        from vaultctx.server.client import read_server_file

        self.name = name
        self.vault = vault
        self.port = free_port()
        self.log = log
        with open(log, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "vaultctx", "serve", str(vault), "--port", str(self.port),
                 "--no-watch"],
                env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        started = time.perf_counter()
        deadline = time.monotonic() + START_TIMEOUT_S
        info = None
        while info is None or info.pid != self.process.pid:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"server {name} did not start:\n{self.log_tail()}")
            time.sleep(0.02)
            info = read_server_file(vault)
        self.token = Path(info.token_path).read_text(encoding="utf-8").strip()
        self.ready_s = time.perf_counter() - started

    def connection(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=HTTP_TIMEOUT_S)

    def call(
        self, conn: http.client.HTTPConnection, method: str, path: str, body: Any = None
    ) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {self.token}"}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=payload, headers=headers)
        response = conn.getresponse()
        data = response.read()
        try:
            return response.status, json.loads(data)
        except ValueError:
            return response.status, data[:300]

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(empty log)"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


# --- answers and load ----------------------------------------------------------------------


def answer_key(answer: dict) -> tuple[tuple[int, float], ...]:
    """What two answers must share to be identical: candidate ids in order, with scores."""
    return tuple((c["id"], c["score"]) for c in answer["candidates"])


@dataclass
class Item:
    kind: str  # "select" or "touch"
    target: str  # the query or the note
    server: int  # which server gets it
    query: int = -1  # the query's index, for a select


@dataclass
class Record:
    item: Item
    status: int  # 0: no HTTP answer (connection error, timeout)
    ms: float
    answer: Any = None


@dataclass
class LoadRun:
    label: str
    servers: int
    clients: int
    wall_s: float
    records: list[Record]
    cpu: dict[str, float]
    figures: dict[str, Any] = field(default_factory=dict)


def plan(queries: list[str], requests: int, servers: int, notes: list[str], touches: int):
    """`requests` selects over the queries in turn, request j to server j mod `servers`;
    with touches, one after every requests/touches selects, alternating servers too."""
    items = []
    every = requests // touches if touches else 0
    done_touches = 0
    for j in range(requests):
        items.append(Item("select", queries[j % len(queries)], j % servers, j % len(queries)))
        if every and (j + 1) % every == 0 and done_touches < touches:
            note = notes[(done_touches * 7) % len(notes)]
            items.append(Item("touch", note, done_touches % servers))
            done_touches += 1
    return items


def run_load(
    label: str, servers: list[Server], items: list[Item], clients: int, meter: CpuMeter
) -> LoadRun:
    """C client threads take the items in order from one shared list until it is empty."""
    lock = threading.Lock()
    position = iter(range(len(items)))
    records: list[Record] = []

    def client() -> None:
        conns = [s.connection() for s in servers]
        mine = []
        while True:
            with lock:
                j = next(position, None)
            if j is None:
                break
            item = items[j]
            server = servers[item.server]
            if item.kind == "select":
                path, body = "/select", {"query": item.target, "k": 10}
            else:
                path, body = "/touch", {"note": item.target}
            t0 = time.perf_counter()
            try:
                status, answer = server.call(conns[item.server], "POST", path, body)
            except (OSError, http.client.HTTPException) as exc:
                status, answer = 0, repr(exc)
                conns[item.server].close()
                conns[item.server] = server.connection()
            mine.append(Record(item, status, (time.perf_counter() - t0) * 1000, answer))
        for conn in conns:
            conn.close()
        with lock:
            records.extend(mine)

    threads = [threading.Thread(target=client, name=f"client-{i}") for i in range(clients)]
    meter.start()
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    cpu_s = meter.stop()
    run = LoadRun(label, len(servers), clients, wall, records, cpu_s)
    selects = [r for r in records if r.item.kind == "select"]
    latencies = [r.ms for r in selects]
    errors = [r for r in records if r.status != 200]
    run.figures = {
        "requests": len(records),
        "selects": len(selects),
        "wall_s": round(wall, 2),
        "rps": round(len(records) / wall, 1),
        "p50_ms": round(percentile(latencies, 50), 1),
        "p95_ms": round(percentile(latencies, 95), 1),
        "errors": len(errors),
        # cores used on average over the run (1.0: one core all the time)
        "cpu_cores": {k: round(v / wall, 2) for k, v in cpu_s.items()},
        # CPU milliseconds per request
        "cpu_ms_per_request": {
            k: round(cpu_s[k] * 1000 / len(records), 2) for k in ("servers", "postgres", "client")
        },
    }
    for r in errors[:3]:
        print(f"  error on {r.item.kind} {r.item.target!r}: {r.status} {r.answer!r}"[:400])
    return run


def identical(run: LoadRun, baseline: list[tuple]) -> tuple[int, int]:
    """(select answers identical to the baseline, selects answered)."""
    answered = [r for r in run.records if r.item.kind == "select" and r.status == 200]
    same = sum(answer_key(r.answer) == baseline[r.item.query] for r in answered)
    return same, len(answered)


def print_run(run: LoadRun, same: tuple[int, int] | None = None) -> None:
    f = run.figures
    cpu = f["cpu_cores"]
    extra = f"  identical {same[0]}/{same[1]}" if same else ""
    print(
        f"{run.label:40} {f['requests']:>5} req {f['wall_s']:>6.2f}s {f['rps']:>7.1f} req/s"
        f"  p50 {f['p50_ms']:>6.1f} ms  p95 {f['p95_ms']:>6.1f} ms  errors {f['errors']}{extra}"
    )
    each = ", ".join(f"{k[7:]} {v:.2f}" for k, v in cpu.items() if k.startswith("server_"))
    per = f["cpu_ms_per_request"]
    print(
        f"{'':40} cores used: servers {cpu['servers']:.2f} ({each}), postgres"
        f" {cpu['postgres']:.2f}, client {cpu['client']:.2f}, others {cpu['others']:.2f}"
        f" (machine {cpu['machine']:.2f} of {os.cpu_count()}); CPU ms per request: servers"
        f" {per['servers']:.1f}, postgres {per['postgres']:.1f}"
    )


# --- the database ----------------------------------------------------------------------------


def touches_by_note(url: str) -> Counter:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT n.path, count(*) FROM accesses a JOIN notes n ON n.id = a.note_id"
            " GROUP BY n.path"
        ).fetchall()
    return Counter(dict(rows))


def indexed_notes(url: str) -> list[str]:
    """The notes the database holds (a vault's ignored files are not notes)."""
    import psycopg

    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute("SELECT path FROM notes ORDER BY path").fetchall()]


def access_count(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        return int(conn.execute("SELECT count(*) FROM accesses").fetchone()[0])


# --- the benchmark ---------------------------------------------------------------------------


def index_vault(vault: Path, env: dict[str, str], embed: bool) -> dict:
    args = [sys.executable, "-m", "vaultctx", "index", str(vault), "--json"]
    args += [] if embed else ["--no-embed"]
    started = time.perf_counter()
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"vaultctx index failed ({done.returncode}):\n{done.stderr[-3000:]}")
    report = json.loads(done.stdout)
    report["wall_s"] = round(time.perf_counter() - started, 1)
    return report


def server_env(workdir: Path, name: str, url: str, embed: bool) -> dict[str, str]:
    """A host of its own: config folder (token), empty local index, the team's database."""
    return code_env(
        None,
        VAULTCTX_CONFIG_DIR=str(workdir / f"config-{name}"),
        VAULTCTX_INDEX_DIR=str(workdir / f"index-{name}"),
        VAULTCTX_DATABASE_URL=url,
        VAULTCTX_EMBED="true" if embed else "false",
    )


def record_answers(server: Server, queries: list[str]) -> list[tuple]:
    """The server's answer to each query, one at a time."""
    conn = server.connection()
    answers = []
    for query in queries:
        status, answer = server.call(conn, "POST", "/select", {"query": query, "k": 10})
        if status != 200:
            raise RuntimeError(f"select {query!r} on {server.name}: {status} {answer!r}")
        answers.append(answer_key(answer))
    conn.close()
    return answers


def server_status(server: Server) -> dict:
    conn = server.connection()
    status, report = server.call(conn, "GET", "/status")
    conn.close()
    if status != 200:
        raise RuntimeError(f"/status on {server.name}: {status} {report!r}")
    return report


def median_of(runs: list[LoadRun], key: str) -> float:
    return round(percentile([run.figures[key] for run in runs], 50), 1)


def cpu_verdict(runs: list[LoadRun]) -> dict[str, float]:
    """Over the runs given: the cores each part used, CPU ms per request, and the throughput
    the cores of this machine would allow if nothing else ran on them."""
    wall = sum(run.wall_s for run in runs)
    requests = sum(len(run.records) for run in runs)
    parts = ("servers", "postgres", "client", "others", "machine")
    cores = {k: sum(run.cpu[k] for run in runs) / wall for k in parts}
    per = {k: sum(run.cpu[k] for run in runs) * 1000 / requests for k in parts[:3]}
    own_ms = per["servers"] + per["postgres"] + per["client"]
    return {
        **{f"{k}_cores": round(v, 2) for k, v in cores.items()},
        **{f"{k}_cpu_ms_per_request": round(v, 2) for k, v in per.items()},
        "rps_if_cores_were_free": round((os.cpu_count() or 1) * 1000 / own_ms, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=400, help="selects per load run")
    parser.add_argument("--clients", default="4,8", help="concurrent clients, comma separated")
    parser.add_argument("--rounds", type=int, default=3, help="alternating 1/2-server rounds")
    parser.add_argument("--touches", type=int, default=100, help="touches in the write run")
    parser.add_argument("--notes", type=int, help="a synthetic vault of N notes, not the example")
    parser.add_argument("--no-embed", action="store_true", help="index and select without vectors")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (and logs)")
    args = parser.parse_args()
    client_counts = [int(c) for c in args.clients.split(",")]
    embed = not args.no_embed
    # a SIGTERM (a timeout) unwinds like Ctrl-C: the `finally` below stops what was started
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    workdir = Path(tempfile.mkdtemp(prefix="vaultctx-team-load-"))
    pg = embedded_postgres(tcp=True)
    servers: list[Server] = []
    figures: dict[str, Any] = {
        "requests_per_run": args.requests,
        "rounds": args.rounds,
        "embed": embed,
        "cpus": os.cpu_count(),
    }
    ok = True
    try:
        source, queries, described = build_source(workdir, args.notes)
        figures["vault"] = described
        figures["queries"] = len(queries)
        print(f"vault: {described}; {len(queries)} queries; work folder {workdir}")

        pg.start()
        pg.create_database("team")
        url = pg.url_for("team", tcp=True)
        print(f"PostgreSQL on 127.0.0.1:{pg.port} ({url})")

        # 1. index and publish; the indexing process exits, freeing the seat
        indexer_vault = copy_vault(source, workdir / "vault-indexer")
        env = server_env(workdir, "indexer", url, embed)
        report = index_vault(indexer_vault, env, embed)
        figures["index_s"] = report["wall_s"]
        print(
            f"indexed and published in {report['wall_s']} s (process exited):"
            f" {json.dumps(report.get('published'))}"
        )
        notes = indexed_notes(url)
        meter = CpuMeter(pg)

        # 2. one server: its answers, then the load
        def start_server(name: str) -> Server:
            """A server of its own vault copy, config folder and (empty) local index."""
            vault = copy_vault(source, workdir / f"vault-{name}")
            env = server_env(workdir, name, url, embed)
            server = Server(name, vault, env, workdir / f"server-{name}.log")
            servers.append(server)
            meter.servers[name] = server.process.pid
            return server

        start_server("A")
        status_a = server_status(servers[0])
        print(
            f"server A on :{servers[0].port}, ready in {servers[0].ready_s:.1f} s; /status:"
            f" {status_a['notes']} notes, {status_a['blocks']} blocks, {status_a['vectors']}"
            f" vectors (local index {status_a['index_path']})"
        )
        baseline = record_answers(servers[0], queries)
        again = record_answers(servers[0], queries)
        figures["baseline_repeatable"] = baseline == again
        print(f"baseline: {len(baseline)} answers recorded; the same again: {baseline == again}")

        runs: list[tuple[LoadRun, tuple[int, int] | None]] = []

        def load(label: str, on: list[Server], c: int, touches: int = 0) -> LoadRun:
            items = plan(queries, args.requests, len(on), notes, touches)
            run = run_load(label, on, items, c, meter)
            runs.append((run, None if touches else identical(run, baseline)))
            print_run(*runs[-1])
            return run

        print(f"\n{'run':40} (selects only: {args.requests} per run)")
        alone = {c: load(f"1 server alone, {c} clients", servers[:1], c) for c in client_counts}

        # 3. a second server on the same database
        start_server("B")
        status_b = server_status(servers[1])
        answers_b = record_answers(servers[1], queries)
        figures["server_b_matches_a"] = answers_b == baseline
        print(
            f"server B on :{servers[1].port}, ready in {servers[1].ready_s:.1f} s;"
            f" {status_b['notes']} notes; its answers = A's: {answers_b == baseline}"
        )
        one: dict[int, list[LoadRun]] = {c: [] for c in client_counts}
        two: dict[int, list[LoadRun]] = {c: [] for c in client_counts}
        for r in range(1, args.rounds + 1):  # alternating, so the machine's load hits both
            for c in client_counts:
                two[c].append(load(f"2 servers, {c} clients, round {r}", servers, c))
                one[c].append(load(f"1 server (B idle), {c} clients, round {r}", servers[:1], c))

        # 4. writes under load
        before_rows = access_count(url)
        c = max(client_counts)
        touch_run = load(f"2 servers, {c} clients + touches", servers, c, args.touches)
        acknowledged = Counter(
            r.answer["path"]
            for r in touch_run.records
            if r.item.kind == "touch" and r.status == 200
        )
        sent = sum(r.item.kind == "touch" for r in touch_run.records)
        stored = touches_by_note(url)
        rows_added = access_count(url) - before_rows
        lost = sum((acknowledged - stored).values())
        figures["touches"] = {
            "sent": sent,
            "acknowledged": sum(acknowledged.values()),
            "rows_before": before_rows,
            "rows_added": rows_added,
            "lost": lost,
            "per_note_equal": acknowledged == stored,
        }
        print(
            f"touches: {sent} sent, {sum(acknowledged.values())} acknowledged, {rows_added} rows"
            f" added to accesses ({before_rows} before), lost {lost},"
            f" per-note counts equal: {acknowledged == stored}"
        )
        after_a = record_answers(servers[0], queries)
        after_b = record_answers(servers[1], queries)
        agree = sum(
            [i for i, _ in a] == [i for i, _ in b] for a, b in zip(after_a, after_b, strict=True)
        )
        changed = sum(a != b for a, b in zip(after_a, baseline, strict=True))
        figures["after_touches"] = {"ids_agree": agree, "changed_from_baseline": changed}
        print(
            f"after the touches: A and B rank the same ids for {agree}/{len(queries)} queries;"
            f" {changed} of {len(queries)} answers differ from before the touches"
        )

        # 5. the figures
        figures["runs"] = {run.label: run.figures for run, _ in runs}
        same = sum(s[0] for _, s in runs if s)
        answered = sum(s[1] for _, s in runs if s)
        errors = sum(run.figures["errors"] for run, _ in runs)
        figures["identical_answers"] = f"{same}/{answered}"
        figures["errors"] = errors
        figures["lost_writes"] = lost
        print(f"\nteam load on PostgreSQL (medians of {args.rounds} alternating rounds)")
        for c in client_counts:
            row = {
                "rps_1_server_alone": alone[c].figures["rps"],
                "rps_1_server": median_of(one[c], "rps"),
                "rps_2_servers": median_of(two[c], "rps"),
                "p50_ms_1_server": median_of(one[c], "p50_ms"),
                "p95_ms_1_server": median_of(one[c], "p95_ms"),
                "p50_ms_2_servers": median_of(two[c], "p50_ms"),
                "p95_ms_2_servers": median_of(two[c], "p95_ms"),
            }
            row["speedup_2_servers"] = round(row["rps_2_servers"] / row["rps_1_server"], 2)
            figures[f"clients_{c}"] = row
            print(
                f"  {c} clients: 1 server {row['rps_1_server']} req/s (p50"
                f" {row['p50_ms_1_server']} ms, p95 {row['p95_ms_1_server']} ms; alone, before"
                f" B started: {row['rps_1_server_alone']}), 2 servers {row['rps_2_servers']}"
                f" req/s (p50 {row['p50_ms_2_servers']} ms, p95 {row['p95_ms_2_servers']} ms):"
                f" {row['speedup_2_servers']}x"
            )
        c = max(client_counts)
        figures["cpu_1_server"] = cpu_verdict(one[c])
        figures["cpu_2_servers"] = cpu_verdict(two[c])
        peak_one = max(run.cpu["server_A"] / run.wall_s for run in [alone[c], *one[c]])
        figures["cpu_1_server"]["server_peak_cores"] = round(peak_one, 2)
        for name, v in (("1 server", figures["cpu_1_server"]),
                        ("2 servers", figures["cpu_2_servers"])):  # fmt: skip
            print(
                f"  CPU, {name} at {c} clients: machine busy {v['machine_cores']} of"
                f" {os.cpu_count()} cores (servers {v['servers_cores']}, postgres"
                f" {v['postgres_cores']}, client {v['client_cores']}, other work"
                f" {v['others_cores']}); per request: servers"
                f" {v['servers_cpu_ms_per_request']} ms, postgres"
                f" {v['postgres_cpu_ms_per_request']} ms, client"
                f" {v['client_cpu_ms_per_request']} ms -> at most"
                f" {v['rps_if_cores_were_free']} req/s on {os.cpu_count()} free cores"
            )
        print(f"  one server alone used at most {peak_one:.2f} cores in a run")
        ok &= check("errors (non-200 or no answer)", errors, TARGETS["errors"],
                    higher_is_better=False)  # fmt: skip
        ok &= check("identical answers (share)", same / max(answered, 1), 1.0,
                    higher_is_better=True)  # fmt: skip
        ok &= check("server B's sequential answers = A's", float(answers_b == baseline), 1.0,
                    higher_is_better=True)  # fmt: skip
        ok &= check("lost writes (acknowledged touches not in accesses)", lost,
                    TARGETS["lost_writes"], higher_is_better=False)  # fmt: skip
        ok &= check("touches acknowledged", sum(acknowledged.values()), sent,
                    higher_is_better=True)  # fmt: skip
    except Exception:
        for server in servers:
            print(f"\n-- server {server.name} log --\n{server.log_tail()}", file=sys.stderr)
        raise
    finally:
        for server in servers:
            server.stop()
        pg.stop()
        if args.keep:
            print(f"kept {workdir}")
        else:
            with contextlib.suppress(OSError):
                shutil.rmtree(workdir)
    emit_figures("team_load", figures)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
