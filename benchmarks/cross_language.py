"""Questions in one language asked of the vault in another: each translated Obsidian Help
question set (tests/questions/obsidian_help_{es,fr,it,nl}.json) asked of the English vault,
with each embedding model in one run.

    python benchmarks/cross_language.py [--models all-MiniLM-L6-v2,multilingual-e5-small]

A question's relevant notes are mapped to the English vault through the `permalink:`
frontmatter every translation shares with its English original (shared/data/README.md); a
question whose notes have no English counterpart is left out. Note level, as the suite's
question rows: Success@5 and MRR@10 of select's notes. Target (issue 48): Success@5 ≥ 0.80
on each set with the multilingual model.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import check, emit_figures, offline_env
from suite import QUESTIONS, VAULTS, question_metrics, select_notes

offline_env()

from vaultctx import Embedder, Workspace  # noqa: E402

TRANSLATED = ("es", "fr", "it", "nl")
ENGLISH = VAULTS / "obsidian-help-en"
SUCCESS_TARGET = 0.80
_PERMALINK = re.compile(r"^permalink:\s*(\S+)\s*$", re.MULTILINE)


def permalinks(vault: Path) -> dict[str, str]:
    """Each note's path (relative, as select names it) by its permalink, and back."""
    found = {}
    for path in sorted(vault.rglob("*.md")):
        head = path.read_text(encoding="utf-8")[:600]
        match = _PERMALINK.search(head) if head.startswith("---") else None
        if match:
            found[path.relative_to(vault).as_posix()] = match.group(1)
    return found


def mapped_questions(language: str) -> list[dict]:
    """The language's questions with their relevant notes as the English vault's paths."""
    english = {link: path for path, link in permalinks(ENGLISH).items()}
    own = permalinks(VAULTS / f"obsidian-help-{language}")
    items = json.loads((QUESTIONS / f"obsidian_help_{language}.json").read_text("utf-8"))
    mapped = []
    for item in items:
        expected = [english[own[p]] for p in item["expected"] if own.get(p) in english]
        if expected:
            mapped.append({"question": item["question"], "expected": expected})
    return mapped


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="all-MiniLM-L6-v2,multilingual-e5-small")
    parser.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "vaultctx-xl"))
    args = parser.parse_args()
    sets = {language: mapped_questions(language) for language in TRANSLATED}
    figures: dict[str, float] = {}
    ok = True
    print(f"{'questions':<12}{'n':>4}  " + "".join(f"{m:>34}" for m in args.models.split(",")))
    rows: dict[str, list[str]] = {language: [] for language in sets}
    for model in args.models.split(","):
        index = Path(args.workdir) / model / "index"
        config = {"index_dir": str(index), "embedding_model": model}
        with Workspace.open(ENGLISH, config, embedder=Embedder(model)) as ws:
            ws.index()
            for language, items in sets.items():
                ranked = [select_notes(ws, i["question"], k=30)[0] for i in items]
                metrics = question_metrics(ranked, items)
                key = f"{language}_on_en_{model}"
                figures[f"{key}_success@5"] = round(metrics["success@5"], 4)
                figures[f"{key}_mrr@10"] = round(metrics["mrr@10"], 4)
                rows[language].append(
                    f"S@5 {metrics['success@5']:.3f}  MRR@10 {metrics['mrr@10']:.3f}"
                )
                if model == "multilingual-e5-small":
                    ok &= check(
                        f"{language} questions on the English vault, Success@5",
                        metrics["success@5"],
                        SUCCESS_TARGET,
                        higher_is_better=True,
                    )
    for language, cells in rows.items():
        label = f"{language} → en"
        print(f"{label:<12}{len(sets[language]):>4}  " + "".join(f"{c:>34}" for c in cells))
    emit_figures("cross_language", figures)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
