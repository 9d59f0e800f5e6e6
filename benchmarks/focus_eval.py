"""Focus that helps and does not hurt: every question set with a random unrelated note open,
against nothing open; every context set with its own context, against none.

    python benchmarks/focus_eval.py [--workdir DIR] [--only NAME ...]

- A plain question set (no `touch`): each question asked twice, on an index with nothing
  opened, and right after opening one note drawn at random (seeded by the question) among the
  notes that are neither expected nor linked to or from an expected one. The open note is
  forgotten before the next question. Target: MRR@10 drops at most 0.01.
- A context set (items carry `touch`): the suite's two runs (`suite.run_questions`), as a
  session with each item's notes opened and with none; the gain is the difference.

`$VAULTCTX_BENCH_SRC` runs another checkout's code (a baseline) over the same questions.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import offline_env

offline_env()

import suite  # noqa: E402

MAX_DROP = 0.01


def unrelated_note(ws, graph, expected: list[str], question: str) -> str | None:
    """A note neither expected nor one link from an expected note, drawn by the question."""
    near = set(expected)
    for path in expected:
        if path in graph:
            near |= set(graph.successors(path)) | set(graph.predecessors(path))
    pool = sorted(n for n in graph if n not in near)
    if not pool:
        return None
    return random.Random(zlib.crc32(question.encode())).choice(pool)


def run_plain(qset: suite.QuestionSet, workdir: Path, embedder) -> dict[str, dict[str, float]]:
    """(no focus, unrelated note open) metrics of one plain question set."""
    with suite._open_vault(qset, workdir, embedder, True, None) as ws:
        ws.index()
        suite._clear_context(ws)
        graph = ws.graph()
        kwargs = {"k": 30}
        without, with_open = [], []
        for item in qset.items:
            without.append(suite.select_notes(ws, item["question"], **kwargs)[0])
            note = unrelated_note(ws, graph, item["expected"], item["question"])
            if note is not None:
                ws.touch(note)
            with_open.append(suite.select_notes(ws, item["question"], **kwargs)[0])
            suite._clear_context(ws)
    return {
        "no focus": suite.question_metrics(without, qset.items),
        "unrelated open": suite.question_metrics(with_open, qset.items),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "vaultctx-focus"))
    parser.add_argument("--only", nargs="*", help="question sets whose name has one")
    args = parser.parse_args()

    from vaultctx.storage.embeddings import Embedder

    embedder = Embedder()
    workdir = Path(args.workdir)
    ok = True
    plain_rows, context_rows = [], []
    for qset in suite.question_sets():
        if args.only and not any(o in qset.name for o in args.only):
            continue
        if qset.is_context:
            rows = suite.run_questions(qset, workdir, embedder, baseline=False)
            by = {row.variant: row.metrics for row in rows}
            context_rows.append((qset.name, by["no context"], by["with context"]))
        else:
            by = run_plain(qset, workdir, embedder)
            plain_rows.append((qset.name, by["no focus"], by["unrelated open"]))
        print(f"  {qset.name} done", flush=True)

    print("\nplain sets: a random unrelated note open (MRR@10 / Success@5)")
    print(f"{'set':<30} {'no focus':>16} {'unrelated open':>16} {'drop':>7}")
    for name, none, opened in plain_rows:
        drop = none["mrr@10"] - opened["mrr@10"]
        ok &= drop <= MAX_DROP
        print(
            f"{name:<30} {none['mrr@10']:>7.3f} / {none['success@5']:.3f}"
            f" {opened['mrr@10']:>7.3f} / {opened['success@5']:.3f} {drop:>+7.3f}"
        )
    if plain_rows:
        mean_none = sum(r[1]["mrr@10"] for r in plain_rows) / len(plain_rows)
        mean_open = sum(r[2]["mrr@10"] for r in plain_rows) / len(plain_rows)
        print(f"{'mean':<30} {mean_none:>16.3f} {mean_open:>16.3f} {mean_none - mean_open:>+7.3f}")

    print("\ncontext sets: the item's notes open (MRR@10; controls / ambiguous)")
    print(f"{'set':<30} {'no context':>12} {'with context':>13} {'gain':>7}  controls  ambiguous")
    for name, none, opened in context_rows:
        print(
            f"{name:<30} {none['mrr@10']:>12.3f} {opened['mrr@10']:>13.3f}"
            f" {opened['mrr@10'] - none['mrr@10']:>+7.3f}"
            f"  {none.get('controls_mrr@10', 0):.3f}→{opened.get('controls_mrr@10', 0):.3f}"
            f"  {none.get('ambiguous_mrr@10', 0):.3f}→{opened.get('ambiguous_mrr@10', 0):.3f}"
        )
    print(f"\nevery plain set drops at most {MAX_DROP}: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
