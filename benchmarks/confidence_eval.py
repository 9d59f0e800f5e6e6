"""Calibration of select's confidence: answerable against unanswerable questions, per set.

    python benchmarks/confidence_eval.py [--workdir DIR] [--cached] [--model NAME]

Answerable: every question set of tests/questions over its vault (context sets asked with
nothing open), and the judged Cranfield and SciFact queries over their corpora. Unanswerable:
generated nonsense (seeded pseudo-words) asked of several corpora, and questions written for
one corpus asked of another that does not cover it (SciFact claims of the Obsidian Help and
Foam vaults, LoCoMo questions of the example and Tasks vaults, vault questions of Cranfield and
SciFact, Cranfield queries of Foam). A question in a language other than its vault's is in
neither set.

Every select's answer evidence (`diagnostics["evidence"]`: cosine, coverage, agreement; see
`pipeline/confidence.py`) is recorded, then:

1. the logistic is fitted on the *fit* sets only and reported on the *held-out* sets;
2. the logistic is fitted on all sets (the constants `confidence.py` ships), each set
   weighing the same within its class and both classes the same; the threshold is the one
   that does best by the set it does worst for (answerable sets kept, unanswerable sets
   flagged);
3. the table: per set, its class, split, size, mean confidence and the share flagged
   "no good match" by the shipped constants, AUROC of every answerable set against every
   unanswerable one (shipped constants), and the targets: AUROC >= 0.90, <= 5% of
   answerable and >= 80% of unanswerable flagged.

`--cached` refits from the evidence the last run saved (`evidence.json` in the workdir).
`--model NAME` runs another embedding model, in a folder of the workdir of its own; a model
that reads its cosines from the vault's median note (`Embedder.cosine_from_median`) is judged
by, and fits, `FROM_MEDIAN_MODEL` (those cosines are shares of the way from the median to 1,
on another scale than raw cosines), every other by `HYBRID_MODEL`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, check, emit_figures, load_beir, offline_env, vault_of

offline_env()

import suite  # noqa: E402
from memory_data import load as load_memory  # noqa: E402

HYBRID = ("cosine", "coverage", "agreement")
LEXICAL = ("coverage",)
TARGET_AUROC = 0.90
TARGET_ANSWERABLE_FLAGGED = 0.05
TARGET_UNANSWERABLE_FLAGGED = 0.80
RIDGE = 1e-3  # L2 on the weights (not the intercept): keeps the fit stable, barely moves it
NONSENSE_PER_CORPUS = 60
FOREIGN_PER_SET = 100


@dataclass(frozen=True)
class QuestionsOf:
    """One set of questions asked of one corpus."""

    name: str
    corpus: str
    answerable: bool
    fit: bool  # in the fit split (else held out)
    questions: list[str]


# --- data ------------------------------------------------------------------------------------


def nonsense(seed: int, n: int) -> list[str]:
    """Queries of 1 to 5 pronounceable made-up words (seeded: the same every run)."""
    rng = random.Random(seed)
    onsets = "b c d f g h j k l m n p qu r s t v w x z br cl dr fl gr pl sk st tr".split()
    vowels = "a e i o u ai ea ou y".split()
    codas = ["", "", "n", "r", "s", "x", "k", "m", "th", "nd"]

    def word() -> str:
        return "".join(
            rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas)
            for _ in range(rng.randint(2, 4))
        )

    return [" ".join(word() for _ in range(rng.randint(1, 5))) for _ in range(n)]


def beir_queries(name: str) -> list[str]:
    _, queries, qrels = load_beir(DATA / name)
    return [queries[q] for q in sorted(qrels) if q in queries]


def locomo_questions(n: int) -> list[str]:
    dataset = load_memory(DATA / "locomo" / "locomo-dev7.json")
    assert dataset is not None
    every = [q.text for c in dataset.conversations for q in c.questions]
    step = max(1, len(every) // n)
    return every[::step][:n]


def spread(questions: list[str], n: int) -> list[str]:
    step = max(1, len(questions) // n)
    return questions[::step][:n]


def question_sets() -> list[QuestionsOf]:
    """Every set of the calibration, with its split (chosen so that each split holds both
    classes, English and other vaults, BEIR corpora and vaults)."""
    fit_answerable = {"foam_docs", "foam_docs_new_user", "foam_docs_context", "example_vault",
                      "obsidian_help_es", "obsidian_help_fr"}  # fmt: skip
    sets: list[QuestionsOf] = []
    for qset in suite.question_sets():
        questions = [item["question"] for item in qset.items]
        corpus = "example" if qset.vault == suite.EXAMPLE_VAULT else qset.vault.name
        sets.append(QuestionsOf(qset.name, corpus, True, qset.name in fit_answerable, questions))
    cranfield, scifact = beir_queries("cranfield"), beir_queries("scifact")
    by_name = {s.name: s.questions for s in sets}
    locomo = locomo_questions(2 * FOREIGN_PER_SET)
    sets += [
        QuestionsOf("cranfield", "cranfield", True, True, cranfield),
        QuestionsOf("scifact", "scifact", True, False, scifact),
    ]
    nonsense_of = {
        **dict.fromkeys(("foam-docs", "cranfield", "example", "obsidian-help-fr"), True),
        **dict.fromkeys(
            ("obsidian-tasks-docs", "obsidian-help-en", "scifact", "obsidian-help-nl"), False
        ),
    }
    for seed, (corpus, fit) in enumerate(nonsense_of.items()):
        sets.append(
            QuestionsOf(
                f"nonsense@{corpus}", corpus, False, fit, nonsense(seed, NONSENSE_PER_CORPUS)
            )
        )
    foreign = [
        ("scifact", "obsidian-help-en", True, spread(scifact, FOREIGN_PER_SET)),
        ("locomo", "example", True, locomo[0::2]),
        ("cranfield", "foam-docs", True, spread(cranfield, FOREIGN_PER_SET)),
        ("scifact", "foam-docs", False, spread(scifact[1:], FOREIGN_PER_SET)),
        ("locomo", "obsidian-tasks-docs", False, locomo[1::2]),
        ("obsidian_tasks_docs", "cranfield", False, by_name["obsidian_tasks_docs"]),
        ("foam_docs_new_user", "scifact", False, by_name["foam_docs_new_user"]),
    ]
    for source, corpus, fit, questions in foreign:
        sets.append(QuestionsOf(f"{source}@{corpus}", corpus, False, fit, questions))
    return sets


# --- running select --------------------------------------------------------------------------


def corpora(workdir: Path, embedder) -> Iterator[tuple[str, Callable[[], object]]]:
    """(name, opener) of every corpus: BEIR sets as vaults, real vaults with their index in
    the workdir."""
    from vaultctx import Workspace

    def beir(name: str) -> object:
        corpus, _, _ = load_beir(DATA / name)
        vault = workdir / name / "vault"
        suite.write_beir_vault(corpus, vault, "frontmatter")
        ws = Workspace.open(vault, {"embed": True}, embedder=embedder)
        cache = workdir / name / "vectors.db"
        vault_of(ws).db.connect()
        suite.share_vectors(vault_of(ws).db.path, cache, into_index=True)
        ws.index()
        suite.share_vectors(vault_of(ws).db.path, cache, into_index=False)
        return ws

    def real(folder: Path) -> object:
        index = workdir / "vaults" / folder.name / "index"
        ws = Workspace.open(folder, {"index_dir": str(index), "embed": True}, embedder=embedder)
        ws.index()
        return ws

    for name in ("cranfield", "scifact"):
        yield name, lambda name=name: beir(name)
    yield "example", lambda: real(suite.EXAMPLE_VAULT)
    for folder in sorted(p for p in suite.VAULTS.iterdir() if p.is_dir()):
        yield folder.name, lambda folder=folder: real(folder)


def collect(workdir: Path, model: str | None) -> list[dict]:
    """Each question's answer evidence and confidence, by set."""
    from vaultctx.storage.embeddings import Embedder

    sets = question_sets()
    wanted = {s.corpus for s in sets}
    embedder = Embedder(model) if model else Embedder()
    rows: list[dict] = []
    for corpus, opener in corpora(workdir, embedder):
        if corpus not in wanted:
            continue
        ws = opener()
        try:
            suite._clear_context(ws)
            for qset in (s for s in sets if s.corpus == corpus):
                print(f"  {qset.name}: {len(qset.questions)} questions", flush=True)
                for question in qset.questions:
                    selection = ws.select(question, k=10)
                    rows.append(
                        {
                            "set": qset.name,
                            "answerable": qset.answerable,
                            "fit": qset.fit,
                            "confidence": selection.confidence,
                            "no_good_match": selection.no_good_match,
                            "from_median": embedder.cosine_from_median,
                            **selection.diagnostics["evidence"],
                        }
                    )
        finally:
            ws.close()
    return rows


# --- the fit ---------------------------------------------------------------------------------


def set_weights(rows: list[dict]) -> np.ndarray:
    """Each set weighs the same within its class, and the two classes the same."""
    sizes: dict[str, int] = {}
    for r in rows:
        sizes[r["set"]] = sizes.get(r["set"], 0) + 1
    sets_of = {c: len({r["set"] for r in rows if r["answerable"] is c}) for c in (True, False)}
    return np.array([1.0 / (sizes[r["set"]] * sets_of[r["answerable"]]) for r in rows])


def features(rows: list[dict], names: tuple[str, ...]) -> np.ndarray:
    return np.array([[float(r[n] or 0.0) for n in names] for r in rows])


def fit_logistic(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted, lightly ridged logistic regression by Newton's method: (intercept, weights)."""
    design = np.hstack([np.ones((x.shape[0], 1)), x])
    beta = np.zeros(design.shape[1])
    ridge = np.diag([0.0] + [RIDGE] * x.shape[1])
    w = w / w.sum()
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-np.clip(design @ beta, -60, 60)))
        grad = design.T @ (w * (p - y)) + ridge @ beta
        hess = design.T @ (design * (w * p * (1 - p))[:, None]) + ridge
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-9:
            break
    return beta


def predict(beta: np.ndarray, x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(beta[0] + x @ beta[1:], -60, 60)))


def auroc(positive: np.ndarray, negative: np.ndarray) -> float:
    """P(a random answerable question scores above a random unanswerable one), ties half."""
    if positive.size == 0 or negative.size == 0:
        return float("nan")
    scores = np.concatenate([positive, negative])
    ranks = np.empty(scores.size)
    order = np.argsort(scores, kind="stable")
    ranks[order] = np.arange(1, scores.size + 1)
    for value in np.unique(scores):  # average ranks of ties
        tied = scores == value
        ranks[tied] = ranks[tied].mean()
    return float((ranks[: positive.size].sum() - positive.size * (positive.size + 1) / 2)
                 / (positive.size * negative.size))  # fmt: skip


def threshold(rows: list[dict], p: np.ndarray) -> float:
    """The threshold that does best by the set it does worst for: the one maximizing the
    smaller of the worst answerable set's share kept and the worst unanswerable set's share
    flagged (every set counts; none is tuned for)."""
    sets = {s: np.array([i for i, r in enumerate(rows) if r["set"] == s]) for s in
            dict.fromkeys(r["set"] for r in rows)}  # fmt: skip
    answerable = {s: rows[idx[0]]["answerable"] for s, idx in sets.items()}
    best, best_score = 0.5, -1.0
    for t in np.round(np.arange(0.05, 0.951, 0.005), 3):
        kept = min(float((p[idx] >= t).mean()) for s, idx in sets.items() if answerable[s])
        flagged = min(float((p[idx] < t).mean()) for s, idx in sets.items() if not answerable[s])
        score = min(kept, flagged)
        if score > best_score + 1e-9:
            best, best_score = float(t), score
    return best


def report(rows: list[dict], p: np.ndarray, cut: float, title: str) -> dict[str, float]:
    """Per set: class, split, size, mean confidence, flagged share, AUROC against the other
    class; then the pooled figures (macro over sets)."""
    y = np.array([r["answerable"] for r in rows])
    print(f"\n{title} (no good match below {cut:.3f})")
    print(
        f"{'set':<34}{'class':<13}{'split':<9}{'n':>5}{'mean conf':>11}{'flagged':>9}{'AUROC':>8}"
    )
    flagged: dict[bool, list[float]] = {True: [], False: []}
    for name in dict.fromkeys(r["set"] for r in rows):
        idx = np.array([i for i, r in enumerate(rows) if r["set"] == name])
        first = rows[idx[0]]
        mine, others = p[idx], p[y != first["answerable"]]
        area = auroc(mine, others) if first["answerable"] else auroc(others, mine)
        share = float((mine < cut).mean())
        flagged[first["answerable"]].append(share)
        print(
            f"{name:<34}{'answerable' if first['answerable'] else 'unanswerable':<13}"
            f"{'fit' if first['fit'] else 'held-out':<9}{idx.size:>5}{mine.mean():>11.3f}"
            f"{share:>9.1%}{area:>8.3f}"
        )
    pooled = auroc(p[y], p[~y])
    figures = {
        "auroc": round(pooled, 4),
        "answerable_flagged": round(float(np.mean(flagged[True])), 4),
        "unanswerable_flagged": round(float(np.mean(flagged[False])), 4),
        "worst_answerable_flagged": round(max(flagged[True]), 4),
        "worst_unanswerable_flagged": round(min(flagged[False]), 4),
    }
    print(
        f"AUROC {figures['auroc']:.3f}; flagged: answerable {figures['answerable_flagged']:.1%}"
        f" (worst set {figures['worst_answerable_flagged']:.1%}), unanswerable"
        f" {figures['unanswerable_flagged']:.1%}"
        f" (worst set {figures['worst_unanswerable_flagged']:.1%})"
    )
    return figures


def constants(beta: np.ndarray, names: tuple[str, ...]) -> str:
    return ", ".join(f"{n} {b:+.3f}" for n, b in zip(("intercept", *names), beta, strict=True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "vaultctx-bench"))
    parser.add_argument("--cached", action="store_true", help="refit the last run's evidence")
    parser.add_argument(
        "--model",
        default=None,
        help="embedding model (default: the bundled int8; multilingual-e5-small: the"
        " multilingual extra), its indexes and evidence in a folder of their own",
    )
    args = parser.parse_args()
    workdir = Path(args.workdir) / "confidence"
    if args.model:
        workdir = workdir / args.model
    workdir.mkdir(parents=True, exist_ok=True)
    saved = workdir / "evidence.json"
    if args.cached and saved.is_file():
        rows = json.loads(saved.read_text())
    else:
        rows = collect(workdir, args.model)
        saved.write_text(json.dumps(rows))

    from vaultctx.pipeline import confidence as shipped

    y = np.array([r["answerable"] for r in rows], dtype=float)
    weights = set_weights(rows)
    fit_rows = [r for r in rows if r["fit"]]
    held = [r for r in rows if not r["fit"]]
    hybrid_fit = fit_logistic(
        features(fit_rows, HYBRID), np.array([r["answerable"] for r in fit_rows], float),
        set_weights(fit_rows),
    )  # fmt: skip
    split_cut = threshold(fit_rows, predict(hybrid_fit, features(fit_rows, HYBRID)))
    print(f"\nfit split: {constants(hybrid_fit, HYBRID)}; threshold {split_cut:.3f}")
    held_figures = report(
        held,
        predict(hybrid_fit, features(held, HYBRID)),
        split_cut,
        "held-out sets, fit-split model",
    )
    hybrid_all = fit_logistic(features(rows, HYBRID), y, weights)
    lexical_all = fit_logistic(features(rows, LEXICAL), y, weights)
    hybrid_cut = threshold(rows, predict(hybrid_all, features(rows, HYBRID)))
    lexical_cut = threshold(rows, predict(lexical_all, features(rows, LEXICAL)))
    print(f"\nall sets, hybrid:  {constants(hybrid_all, HYBRID)}; threshold {hybrid_cut:.3f}")
    print(f"all sets, lexical: {constants(lexical_all, LEXICAL)}; threshold {lexical_cut:.3f}")
    from vaultctx.storage.embeddings import Embedder

    from_median = (Embedder(args.model) if args.model else Embedder()).cosine_from_median
    hybrid, lexical = shipped.hybrid_model(from_median), shipped.LEXICAL_MODEL
    name = "FROM_MEDIAN_MODEL" if from_median else "HYBRID_MODEL"
    print(f"shipped: {name} {hybrid}\n         LEXICAL_MODEL {lexical}")
    shipped_p = predict(np.array(hybrid.weights), features(rows, HYBRID))
    figures = report(rows, shipped_p, hybrid.no_good_match_below, "every set, shipped constants")
    lexical_p = predict(np.array(lexical.weights), features(rows, LEXICAL))
    lexical_figures = report(
        rows,
        lexical_p,
        lexical.no_good_match_below,
        "every set, shipped lexical model (as without vectors)",
    )
    ok = check("AUROC (every set)", figures["auroc"], TARGET_AUROC, higher_is_better=True)
    ok &= check("AUROC (held-out sets)", held_figures["auroc"], TARGET_AUROC, higher_is_better=True)
    ok &= check("answerable flagged", figures["answerable_flagged"], TARGET_ANSWERABLE_FLAGGED,
                higher_is_better=False)  # fmt: skip
    ok &= check("unanswerable flagged", figures["unanswerable_flagged"],
                TARGET_UNANSWERABLE_FLAGGED, higher_is_better=True)  # fmt: skip
    emit_figures(
        "confidence_eval",
        {
            **figures,
            **{f"held_out_{k}": v for k, v in held_figures.items()},
            **{f"lexical_{k}": v for k, v in lexical_figures.items()},
        },
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
