"""The evaluation suite: every dataset select is judged on, in one table and one macro average.

- every BEIR-format set under `shared/data/` (found by layout: `corpus.jsonl`, `queries.jsonl`,
  `qrels/test.tsv`), each in two vault layouts — the title in the frontmatter, and the title
  as an `# H1` heading (file names are document ids) — scored by fused nDCG@10 beside the
  plain RRF baseline computed in the same run;
- every question set in `tests/questions/` at note level (Success@5, MRR@10), beside a plain
  note-level RRF and plain note-level FTS5 (English stemming); a set whose items carry
  `touch` is a context set, run twice: as a session in which the user opens each item's
  notes before asking (touches accumulate, the most recent last), and with no context at all.

The primary figure of a row is nDCG@10 (BEIR) or MRR@10 (questions; with context for context
sets); the macro average is their mean. Each row also has the language most of its vault's
notes are in (as the index read them, not by name): the suite prints each language's macro
average and their mean, the macro across languages, in which every language weighs the
same. `--small` runs only what CI runs: the question sets
and Cranfield through the lexical retriever.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from baselines import PlainBEIR, PlainNotes
from common import DATA, REPO, load_beir, percentile, vault_of

# Settings for every vault of a run, or a function of the vault's name giving its own.
Settings = dict[str, Any] | Callable[[str], dict[str, Any]] | None

QUESTIONS = REPO / "tests" / "questions"
VAULTS = DATA / "vaults"
EXAMPLE_VAULT = REPO / "examples" / "vault"
LAYOUTS = ("frontmatter", "h1")


@dataclass
class Row:
    """One line of the suite's table."""

    dataset: str
    variant: str  # BEIR: layout and mode; questions: "notes", "with context", "no context"
    primary: str  # the metric the macro average takes
    metrics: dict[str, float]
    baseline: dict[str, float] = field(default_factory=dict)
    counts: bool = True  # part of the macro average
    language: str = "en"  # of the vault's notes, as the index read it

    @property
    def value(self) -> float:
        return self.metrics[self.primary]


# --- datasets ------------------------------------------------------------------------------


def beir_sets(data: Path = DATA) -> list[Path]:
    """Folders in BEIR layout under `data`, whatever their names."""
    return sorted(
        p.parent
        for p in data.glob("*/corpus.jsonl")
        if (p.parent / "queries.jsonl").is_file() and (p.parent / "qrels" / "test.tsv").is_file()
    )


def write_beir_vault(corpus: dict, vault: Path, layout: str) -> None:
    """One note per document named by its id; the title in the frontmatter or as an H1.
    Unchanged files are left alone so re-runs index nothing."""
    docs = vault / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    for doc_id, doc in corpus.items():
        title = " ".join(doc["title"].split())
        text = doc["text"].strip()
        if layout == "frontmatter":
            body = f"---\ntitle: {json.dumps(title or doc_id, ensure_ascii=False)}\n---\n{text}\n"
        else:
            body = f"# {title}\n\n{text}\n" if title else f"{text}\n"
        path = docs / f"{doc_id}.md"
        if not path.exists() or path.read_text(encoding="utf-8") != body:
            path.write_text(body, encoding="utf-8")


@dataclass(frozen=True)
class QuestionSet:
    name: str
    vault: Path
    items: list[dict]

    @property
    def is_context(self) -> bool:
        return any("touch" in item for item in self.items)


def vault_for(name: str) -> Path | None:
    """The vault a question file is about: `example_vault*` is the bundled example vault;
    otherwise the longest vault folder name (`-` written `_`) that starts the file name."""
    if name.startswith("example_vault"):
        return EXAMPLE_VAULT
    folders = sorted((p for p in VAULTS.iterdir() if p.is_dir()), key=lambda p: -len(p.name))
    for folder in folders:
        if name.startswith(folder.name.replace("-", "_")):
            return folder
    return None


def question_sets(folder: Path = QUESTIONS) -> list[QuestionSet]:
    sets = []
    for path in sorted(folder.glob("*.json")):
        vault = vault_for(path.stem)
        if vault is not None and vault.is_dir():
            items = json.loads(path.read_text(encoding="utf-8"))
            sets.append(QuestionSet(path.stem, vault, items))
    return sets


# --- metrics -------------------------------------------------------------------------------


def ndcg_at(ranked: list[str], grades: dict[str, int], k: int) -> float:
    dcg = sum(grades.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(grades.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def reciprocal_rank(ranked: list[str], relevant: Iterable[str], k: int = 10) -> float:
    wanted = set(relevant)
    return next((1 / (i + 1) for i, d in enumerate(ranked[:k]) if d in wanted), 0.0)


def beir_metrics(runs: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict:
    ndcg, r10, r100, mrr = [], [], [], []
    for qid, ranked in runs.items():
        grades = qrels[qid]
        relevant = set(grades)
        ndcg.append(ndcg_at(ranked, grades, 10))
        r10.append(len(relevant & set(ranked[:10])) / len(relevant))
        r100.append(len(relevant & set(ranked[:100])) / len(relevant))
        mrr.append(reciprocal_rank(ranked, relevant))
    n = len(ndcg) or 1
    return {
        "ndcg@10": sum(ndcg) / n,
        "recall@10": sum(r10) / n,
        "recall@100": sum(r100) / n,
        "mrr@10": sum(mrr) / n,
    }


def question_metrics(ranked: list[list[str]], items: list[dict]) -> dict:
    success = sum(bool(set(i["expected"]) & set(r[:5])) for r, i in zip(ranked, items, strict=True))
    mrr = sum(reciprocal_rank(r, i["expected"]) for r, i in zip(ranked, items, strict=True))
    n = len(items) or 1
    return {"success@5": success / n, "mrr@10": mrr / n}


# --- runs ----------------------------------------------------------------------------------


def select_notes(ws: Any, query: str, **kwargs: Any) -> tuple[list[str], float]:
    selection = ws.select(query, **kwargs)
    return [n.path for n in selection.notes()], selection.diagnostics["select_ms"]


def run_beir(
    dataset: Path,
    layout: str,
    workdir: Path,
    embedder: Any,
    modes: dict[str, list[str] | None],
    *,
    baseline: bool = True,
    limit: int | None = None,
    settings: Settings = None,
) -> list[Row]:
    from vaultctx import Workspace

    corpus, queries, qrels = load_beir(dataset)
    qrels = {q: g for q, g in qrels.items() if q in queries}
    if limit:
        qrels = dict(list(qrels.items())[:limit])
    vault = workdir / dataset.name / layout / "vault"
    write_beir_vault(corpus, vault, layout)
    rows = []
    embed_vectors = any(r is None or "vector" in r for r in modes.values())
    config = {"embed": embed_vectors, **settings_for(settings, f"{dataset.name}_{layout}")}
    with Workspace.open(vault, config, embedder=embedder) as ws:
        cache = workdir / dataset.name / "vectors.db"
        vault_of(ws).db.connect()  # creates the index, so vectors can be copied in
        share_vectors(vault_of(ws).db.path, cache, into_index=True)
        ws.index()
        share_vectors(vault_of(ws).db.path, cache, into_index=False)
        language = vault_language(ws)
        for mode, retrievers in modes.items():
            runs, latency = {}, []
            for qid in qrels:
                ranked, ms = select_notes(
                    ws, queries[qid], k=100, max_per_note=1, retrievers=retrievers
                )
                runs[qid] = [Path(p).stem for p in ranked]
                latency.append(ms)
            metrics = beir_metrics(runs, qrels)
            metrics["p50_ms"] = percentile(latency, 50)
            metrics["p95_ms"] = percentile(latency, 95)
            rows.append(
                Row(dataset.name, f"{layout} {mode}", "ndcg@10", metrics, language=language)
            )
    if baseline and rows:
        plain = PlainBEIR(corpus, embedder.encode, workdir / dataset.name / "plain_minilm.npy")
        rows[-1].baseline = beir_metrics({q: plain.fused(queries[q]) for q in qrels}, qrels)
    return rows


def share_vectors(index_db: Path, cache_db: Path, *, into_index: bool) -> None:
    """Copy block vectors between an index and a cache kept beside it, so the same texts in
    another layout or a rebuilt index are not embedded again (vectors are keyed by model
    and text hash, so a copied vector is exactly the one indexing would compute)."""
    import sqlite3

    conn = sqlite3.connect(index_db)
    try:
        conn.execute("ATTACH DATABASE ? AS cache", (str(cache_db),))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS cache.embeddings"
            " (model TEXT, hash TEXT, vector BLOB, PRIMARY KEY (model, hash)) WITHOUT ROWID"
        )
        source, target = ("cache", "main") if into_index else ("main", "cache")
        conn.execute(
            f"INSERT OR IGNORE INTO {target}.embeddings(model, hash, vector)"
            f" SELECT model, hash, vector FROM {source}.embeddings"
        )
        conn.commit()
    finally:
        conn.close()


def settings_for(settings: Settings, vault: str) -> dict[str, Any]:
    """The settings a run uses for one vault (a callable gives each its own, e.g. its own
    PostgreSQL database)."""
    if callable(settings):
        return settings(vault)
    return settings or {}


def _open_vault(
    qset: QuestionSet, workdir: Path, embedder: Any, embed: bool, settings: Settings
) -> Any:
    from vaultctx import Workspace

    index = workdir / "vaults" / qset.vault.name / "index"
    config = {"index_dir": str(index), "embed": embed, **settings_for(settings, qset.vault.name)}
    return Workspace.open(qset.vault, config, embedder=embedder)


def vault_language(ws: Any) -> str:
    """The language most of a vault's notes are in, as its index read them."""
    languages = (
        vault_of(ws)
        .db.connect()
        .execute(
            "SELECT language FROM notes WHERE language != '' GROUP BY language"
            " ORDER BY count(*) DESC LIMIT 1"
        )
    )
    return next((lang for (lang,) in languages), "en")


def _clear_context(ws: Any) -> None:
    """Forget every open/touch, so a run starts from no context (a benchmark's own index,
    or its own database)."""
    with vault_of(ws).db.transaction() as conn:
        conn.execute("DELETE FROM accesses")
    if ws.config.database_url is not None:
        import psycopg

        with psycopg.connect(ws.config.database_url, autocommit=True) as pg:
            pg.execute("DELETE FROM accesses")


def run_questions(
    qset: QuestionSet,
    workdir: Path,
    embedder: Any,
    *,
    use_vectors: bool = True,
    baseline: bool = True,
    settings: Settings = None,
) -> list[Row]:
    with _open_vault(qset, workdir, embedder, use_vectors, settings) as ws:
        ws.index()
        _clear_context(ws)
        questions = [item["question"] for item in qset.items]
        kwargs = {"k": 30, "use_vectors": use_vectors}
        if not qset.is_context:
            ranked = [select_notes(ws, q, **kwargs)[0] for q in questions]
            row = Row(qset.name, "notes", "mrr@10", question_metrics(ranked, qset.items))
            row.language = vault_language(ws)
            if baseline:
                plain = PlainNotes(vault_of(ws).db.path, ws.embedder.model_id, embedder.encode)
                row.baseline = question_metrics([plain.fused(q) for q in questions], qset.items)
                fts = question_metrics([plain.lexical(q) for q in questions], qset.items)
                row.baseline.update({f"fts_{k}": v for k, v in fts.items()})
            return [row]
        language = vault_language(ws)
        without = [select_notes(ws, q, **kwargs)[0] for q in questions]
        with_context = []
        for item in qset.items:
            for note in item.get("touch", []):
                ws.touch(note)
            with_context.append(select_notes(ws, item["question"], **kwargs)[0])
        _clear_context(ws)
    scored = [
        Row(
            qset.name,
            "with context",
            "mrr@10",
            question_metrics(with_context, qset.items),
            language=language,
        ),
        Row(
            qset.name,
            "no context",
            "mrr@10",
            question_metrics(without, qset.items),
            counts=False,
            language=language,
        ),
    ]
    controls = [i for i, item in enumerate(qset.items) if item.get("control")]
    if controls:
        for row, ranked in zip(scored, (with_context, without), strict=True):
            row.metrics["controls_mrr@10"] = question_metrics(
                [ranked[i] for i in controls], [qset.items[i] for i in controls]
            )["mrr@10"]
            ambiguous = [i for i in range(len(qset.items)) if i not in controls]
            row.metrics["ambiguous_mrr@10"] = question_metrics(
                [ranked[i] for i in ambiguous], [qset.items[i] for i in ambiguous]
            )["mrr@10"]
    return scored


def run_suite(
    workdir: Path,
    embedder: Any,
    *,
    small: bool = False,
    only: Callable[[str], bool] = lambda name: True,
    log: Callable[[str], None] = print,
    baseline: bool = True,
    settings: Settings = None,
) -> list[Row]:
    rows: list[Row] = []
    for qset in question_sets():
        if only(qset.name):
            started = time.perf_counter()
            rows += run_questions(qset, workdir, embedder, baseline=baseline, settings=settings)
            log(f"{qset.name}: {time.perf_counter() - started:.1f}s")
    for dataset in beir_sets():
        if small and dataset.name != "cranfield":
            continue
        if not only(dataset.name):
            continue
        modes: dict[str, list[str] | None] = (
            {"lexical": ["lexical"]} if small else {"lexical": ["lexical"], "fused": None}
        )
        for layout in LAYOUTS:
            started = time.perf_counter()
            rows += run_beir(
                dataset,
                layout,
                workdir,
                embedder,
                modes,
                baseline=baseline and not small,
                settings=settings,
            )
            log(f"{dataset.name} {layout}: {time.perf_counter() - started:.1f}s")
    for row in rows:
        if row.variant.endswith(" lexical") and not small:
            row.counts = False  # the fused row is the one judged
    return rows


def macro(rows: list[Row]) -> float:
    counted = [row.value for row in rows if row.counts]
    return sum(counted) / len(counted) if counted else 0.0


def by_language(rows: list[Row]) -> dict[str, float]:
    """The macro average of each language's rows (English: the BEIR sets and English
    question sets; another language: its question sets)."""
    languages = sorted({row.language for row in rows if row.counts})
    return {lang: macro([row for row in rows if row.language == lang]) for lang in languages}


def macro_languages(rows: list[Row]) -> float:
    """The mean of the languages' macro averages: every language weighs the same."""
    means = by_language(rows)
    return sum(means.values()) / len(means) if means else 0.0


def table(rows: list[Row]) -> str:
    keys = ["ndcg@10", "recall@100", "success@5", "mrr@10"]
    lines = [
        f"{'dataset':<30}{'variant':<20}"
        + "".join(f"{k:>11}" for k in keys)
        + f"{'plain':>9}{'p50 ms':>8}"
    ]
    for row in rows:
        cells = "".join(
            f"{row.metrics[k]:>11.3f}" if k in row.metrics else f"{'':>11}" for k in keys
        )
        plain = row.baseline.get(row.primary)
        lines.append(
            f"{row.dataset:<30}{row.variant:<20}{cells}"
            + (f"{plain:>9.3f}" if plain is not None else f"{'':>9}")
            + (f"{row.metrics['p50_ms']:>8.1f}" if "p50_ms" in row.metrics else "")
            + ("" if row.counts else "  (not in macro)")
        )
        extra = {k: v for k, v in row.metrics.items() if k.startswith(("controls", "ambiguous"))}
        if extra:
            lines.append(" " * 50 + "  ".join(f"{k} {v:.3f}" for k, v in extra.items()))
        if "fts_mrr@10" in row.baseline:
            lines.append(
                " " * 50 + f"plain FTS5: success@5 {row.baseline['fts_success@5']:.3f}"
                f"  MRR@10 {row.baseline['fts_mrr@10']:.3f}"
            )
        if "recall@100" in row.baseline:
            lines.append(
                " " * 50 + f"plain RRF: nDCG@10 {row.baseline['ndcg@10']:.3f}"
                f"  R@100 {row.baseline['recall@100']:.3f}"
            )
    lines.append(f"\nmacro average of {sum(r.counts for r in rows)} rows: {macro(rows):.4f}")
    languages = by_language(rows)
    if len(languages) > 1:
        lines.append(
            "by language: "
            + "  ".join(f"{lang} {value:.4f}" for lang, value in languages.items())
            + f"  → macro across languages {macro_languages(rows):.4f}"
        )
    return "\n".join(lines)


def figures(rows: list[Row]) -> dict[str, float]:
    """Flat {dataset/variant/metric: value} for the benchmark's one JSON line."""
    out: dict[str, float] = {
        "macro": round(macro(rows), 4),
        "macro_languages": round(macro_languages(rows), 4),
    }
    out.update({f"macro_{lang}": round(value, 4) for lang, value in by_language(rows).items()})
    for row in rows:
        key = re.sub(r"\s+", "_", f"{row.dataset}/{row.variant}")
        for metric, value in row.metrics.items():
            out[f"{key}/{metric}"] = round(value, 4)
        for metric, value in row.baseline.items():
            out[f"{key}/plain_{metric}"] = round(value, 4)
    return out
