"""Time-aware questions: Success@5 and MRR@10 with the question's time understood (a soft
preference and a hard filter) against words only, over a real dated vault; and how many
questions of every question set in tests/questions get a window (each one a false alarm
unless it names a time).

    python benchmarks/time_eval.py [--workdir DIR] [--limit N]

The dated vault is built from LoCoMo (shared/data/locomo, CC BY-NC 4.0, evaluation only):
each session of each conversation becomes a daily note, `conv-26/2023-05-08 Session 1.md`,
holding its turns. The questions are LoCoMo's own single-hop and multi-hop questions whose
evidence lies in one session, each followed by that session's date written one of three
ways in turn ("on 8 May 2023", "on 2023-05-08", "in May 2023"); the expected note is that
session. Words only (`TIME_MODE = "off"`) searches the date's words as words.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, offline_env

offline_env()

import suite  # noqa: E402

LOCOMO = DATA / "locomo" / "locomo-dev7.json"
MODES = ("off", "boost", "filter")


def session_date(text: str) -> _dt.date:
    """LoCoMo's '1:56 pm on 8 May, 2023' as a date."""
    day = text.split(" on ", 1)[1].replace(",", "")
    return _dt.datetime.strptime(day, "%d %B %Y").date()


def build(vault: Path) -> list[dict]:
    """The dated vault (written once) and its questions."""
    conversations = json.loads(LOCOMO.read_text(encoding="utf-8"))
    questions: list[dict] = []
    for conv in conversations:
        c = conv["conversation"]
        sessions: dict[int, str] = {}
        for key, value in c.items():
            m = re.fullmatch(r"session_(\d+)", key)
            if not m or not value:
                continue
            n = int(m[1])
            day = session_date(c[f"session_{n}_date_time"])
            path = f"{conv['sample_id']}/{day.isoformat()} Session {n}.md"
            turns = "\n\n".join(f"**{t['speaker']}:** {t['text']}" for t in value)
            body = f"# {c['speaker_a']} and {c['speaker_b']}, session {n}\n\n{turns}\n"
            file = vault / path
            file.parent.mkdir(parents=True, exist_ok=True)
            if not file.exists() or file.read_text(encoding="utf-8") != body:
                file.write_text(body, encoding="utf-8")
            sessions[n] = path
        for qa in conv["qa"]:
            if qa.get("category") not in (1, 4) or not qa.get("evidence"):
                continue
            found = {int(e.split(":")[0][1:]) for e in qa["evidence"] if re.match(r"D\d+:", e)}
            if len(found) != 1 or next(iter(found)) not in sessions:
                continue
            path = sessions[next(iter(found))]
            day = _dt.date.fromisoformat(path.rsplit("/", 1)[1][:10])
            form = len(questions) % 3
            when = (
                f"on {day.day} {day:%B %Y}",
                f"on {day.isoformat()}",
                f"in {day:%B %Y}",
            )[form]
            asked = qa["question"].rstrip(" ?")
            questions.append({"question": f"{asked} {when}?", "expected": [path], "form": form})
    return questions


def windows_in_question_sets() -> list[tuple[str, int, int, list[str]]]:
    """(set, questions, with a window, the questions that got one) for every set."""
    from vaultctx.pipeline.timewindow import find_window

    out = []
    for qset in suite.question_sets():
        language = qset.name.rsplit("_", 1)[-1] if qset.name.startswith("obsidian_help") else "en"
        hits = [
            item["question"]
            for item in qset.items
            if find_window(item["question"], [language]) is not None
        ]
        out.append((qset.name, len(qset.items), len(hits), hits))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "vaultctx-time"))
    parser.add_argument("--limit", type=int, help="only the first N questions")
    args = parser.parse_args()

    from vaultctx import Workspace
    from vaultctx.pipeline import timewindow
    from vaultctx.storage.embeddings import Embedder

    print("question sets: questions that get a time window")
    total = flagged = 0
    for name, n, hits, which in windows_in_question_sets():
        total, flagged = total + n, flagged + hits
        print(f"  {name:<30} {hits:>3} / {n:<3} {which}")
    print(f"  all sets: {flagged} / {total}")

    workdir = Path(args.workdir)
    vault = workdir / "locomo-dated"
    questions = build(vault)[: args.limit]
    embedder = Embedder()
    rows = {}
    with Workspace.open(vault, {"index_dir": str(workdir / "index")}, embedder=embedder) as ws:
        ws.index()
        for mode in MODES:
            timewindow.TIME_MODE = mode
            ranked = [suite.select_notes(ws, q["question"], k=30)[0] for q in questions]
            rows[mode] = {"all": suite.question_metrics(ranked, questions)}
            for form in range(3):
                picked = [i for i, q in enumerate(questions) if q["form"] == form]
                rows[mode][form] = suite.question_metrics(
                    [ranked[i] for i in picked], [questions[i] for i in picked]
                )
    forms = ("all", 0, 1, 2)
    labels = {"all": "all", 0: "'on 8 May 2023'", 1: "'on 2023-05-08'", 2: "'in May 2023'"}
    print(f"\nLoCoMo dated vault: {len(questions)} questions (Success@5 / MRR@10)")
    print(f"{'dates written':<18}" + "".join(f"{m:>16}" for m in MODES))
    for form in forms:
        print(
            f"{labels[form]:<18}"
            + "".join(
                f"   {rows[m][form]['success@5']:.3f} / {rows[m][form]['mrr@10']:.3f}"
                for m in MODES
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
