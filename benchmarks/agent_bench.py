"""Agent delegations in child processes: what they add over the thread path, in one run.

Every figure runs both paths alternately, round after round, after one untimed round, on a
copy of examples/vault (indexed without embeddings) with a local OpenAI-compatible server
that answers at once, so the model's think time hides nothing.

1. Whole `ask` turns whose Orchestrator hands one `read_note` to a Worker, processes
   against threads: the latency a delegation adds to a turn, its child's start included.
   Target: p50 <= 150 ms. Also turns that delegate nothing (they start no child).
2. Cold start: a child started for an empty Worker job, and stopped (a turn's first
   delegation, alone).
3. Warm delegation: a Worker job of three tool calls (select, read_note, list_by_tag; each
   call admitted by the parent, handled in the child, reported back) on a child that
   already served one. Target: p50 <= 150 ms.
4. A Researcher job with two model calls and one tool call, on a child that served one.

    python benchmarks/agent_bench.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, check, emit_figures, offline_env, percentile

offline_env()
sys.path.insert(0, str(REPO / "tests"))

from conftest import copy_vault  # noqa: E402
from llm_server import LLMServer, Reply, Request, ToolCallReply  # noqa: E402
from vaultctx import Workspace  # noqa: E402
from vaultctx.agent.delegates import Delegates  # noqa: E402
from vaultctx.agent.host import DelegationHost  # noqa: E402
from vaultctx.agent.jobs import Job, WorkerJob  # noqa: E402
from vaultctx.agent.researcher import research_job  # noqa: E402
from vaultctx.agent.workspace_vault import WorkspaceVault  # noqa: E402
from vaultctx.llm import LLMSettings, ToolCall  # noqa: E402
from vaultctx.permissions import PermissionGuard  # noqa: E402
from vaultctx.prompts import ORCHESTRATOR_SYSTEM  # noqa: E402

TARGET_MS = 150.0
QUESTION = "When should I treat the hives for varroa mites?"
NOTE = "Varroa Mites"


class Quiet:
    """A TurnObserver that keeps nothing: the log's cost is the same on both paths."""

    def request_sent(self, agent: str, invocation: int, messages: list) -> None: ...
    def trace_recorded(self, trace: object) -> None: ...
    def tool_started(self, agent: str, call_id: str, name: str, arguments: dict) -> None: ...
    def tool_finished(self, record: object) -> None: ...


def model(delegate: bool) -> Callable[[Request], Reply]:
    """The Orchestrator calls `read_note` once (if `delegate`) then answers; the Researcher
    searches once then reports; the refine gate gets nonsense (the deterministic gate)."""

    def answer(request: Request) -> Reply:
        if "tools" not in request.body:
            return Reply(content="not json")
        if request.messages[-1]["role"] == "tool":
            return Reply(content='{"summary": "Treat in winter.", "findings": []}')
        if request.messages[0]["content"] == ORCHESTRATOR_SYSTEM and not delegate:
            return Reply(content="Treat in winter.")
        name, arguments = (
            ("read_note", {"path": NOTE})
            if request.messages[0]["content"] == ORCHESTRATOR_SYSTEM
            else ("select", {"query": "varroa"})
        )
        return Reply(tool_calls=(ToolCallReply(name, arguments),))

    return answer


def paired(rounds: int, process: Callable[[], float], thread: Callable[[], float]) -> dict:
    """Both paths alternately (which goes first alternates too), after one untimed round
    (the first model call imports litellm); ms figures."""
    process(), thread()
    times: dict[str, list[float]] = {"process": [], "thread": []}
    for r in range(rounds):
        order = [("process", process), ("thread", thread)]
        for label, run in order if r % 2 == 0 else order[::-1]:
            times[label].append(run())
    added = [p - t for p, t in zip(times["process"], times["thread"], strict=True)]
    return {
        "process_p50_ms": round(percentile(times["process"], 50), 1),
        "thread_p50_ms": round(percentile(times["thread"], 50), 1),
        "added_p50_ms": round(statistics.median(added), 1),
        "added_p95_ms": round(percentile(added, 95), 1),
    }


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def turns(vault: Path, server: LLMServer, rounds: int, delegate: bool) -> dict:
    server.script(model(delegate))
    config = {"llm_model": "openai/bench-agent", "llm_api_base": server.api_base, "embed": False}
    with (
        Workspace.open(vault, {**config, "agent_processes": True}) as by_process,
        Workspace.open(vault, {**config, "agent_processes": False}) as by_thread,
    ):
        return paired(
            rounds, lambda: timed(lambda: by_process.ask(QUESTION)),
            lambda: timed(lambda: by_thread.ask(QUESTION)),
        )  # fmt: skip


def host_for(ws: Workspace, server: LLMServer) -> DelegationHost:
    settings = LLMSettings(model="openai/bench-agent", api_base=server.api_base, timeout=10)
    return DelegationHost(
        WorkspaceVault(ws._agent_port()),
        PermissionGuard(),
        settings=settings,
        observer=Quiet(),
        timeout=30,
    )


def job_overhead(ws: Workspace, server: LLMServer, rounds: int) -> dict[str, dict]:
    root = str(ws.root)
    empty = WorkerJob(agent="worker", root=root, session_id="bench", timeout=30)
    calls = (
        ToolCall("1", "select", {"query": "varroa mites", "k": 5}),
        ToolCall("2", "read_note", {"path": NOTE}),
        ToolCall("3", "list_by_tag", {"tag": "pests/varroa"}),
    )
    worker = WorkerJob(agent="worker", root=root, session_id="bench", timeout=30, calls=calls)
    research = research_job(
        "When to treat varroa?", root=root, session_id="bench", model="openai/x", timeout=30
    )
    server.script(model(delegate=True))
    threads = Delegates(processes=False)

    def cold() -> float:
        t0 = time.perf_counter()
        with Delegates(processes=True) as fresh:
            result = fresh.run(empty, host_for(ws, server))
        assert result == {"executed": 0}, result
        return (time.perf_counter() - t0) * 1000

    def on(delegates: Delegates, job: Job) -> Callable[[], float]:
        def run() -> float:
            host = host_for(ws, server)
            t0 = time.perf_counter()
            result = delegates.run(job, host)
            elapsed = (time.perf_counter() - t0) * 1000
            assert "error" not in result, result
            return elapsed

        return run

    figures = {"cold_start": paired(rounds, cold, on(threads, empty))}
    with Delegates(processes=True) as warm:
        warm.run(empty, host_for(ws, server))  # started and imported
        for label, job in (("warm_worker_3_calls", worker), ("warm_researcher", research)):
            figures[label] = paired(rounds, on(warm, job), on(threads, job))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    server = LLMServer()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            vault = copy_vault(REPO / "examples" / "vault", Path(tmp) / "vault")
            with Workspace.open(vault, {"embed": False}) as ws:
                ws.index(embed=False)
                jobs = job_overhead(ws, server, args.rounds)
            figures = {
                "turn_one_delegation": turns(vault, server, args.rounds, delegate=True),
                "turn_no_delegation": turns(vault, server, args.rounds, delegate=False),
                **jobs,
            }
    finally:
        server.close()
    print(f"load average after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for label, row in figures.items():
        print(
            f"  {label:<22} process p50 {row['process_p50_ms']:7.1f} ms, thread p50"
            f" {row['thread_p50_ms']:7.1f} ms, added p50 {row['added_p50_ms']:6.1f} ms"
            f" (p95 {row['added_p95_ms']:.1f})"
        )
    ok = check(
        "added latency per delegation in a turn, p50 ms",
        figures["turn_one_delegation"]["added_p50_ms"],
        TARGET_MS,
        higher_is_better=False,
    )
    ok &= check(
        "added latency of a warm Worker delegation, p50 ms",
        figures["warm_worker_3_calls"]["added_p50_ms"],
        TARGET_MS,
        higher_is_better=False,
    )
    flat = {f"{label}_{key}": value for label, row in figures.items() for key, value in row.items()}
    emit_figures("agent", {**flat, "rounds": args.rounds, "targets_met": ok})


if __name__ == "__main__":
    main()
