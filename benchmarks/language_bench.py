"""What reading notes in their language costs at index time, against another checkout.

    python benchmarks/language_bench.py --baseline OTHER_CHECKOUT/src [--notes 4000] [--rounds 3]

Indexes text (no embeddings) from scratch, alternating the two checkouts in fresh processes
so a busy neighbour cannot favour either, and keeps each one's median:
- an English vault (synthetic, `synthvault`): detection is the only new work there; target
  ≤ +30 % time (issue 27);
- the four translated Obsidian Help vaults of `../shared/data/vaults/` copied side by side
  until they hold as many notes: detection plus Snowball analysis of every block.
Select latency on English at 10k blocks is `select_bench.py --baseline`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, check, code_env, emit_figures, offline_env
from synthvault import generate_vault

TRANSLATED = ("obsidian-help-es", "obsidian-help-fr", "obsidian-help-it", "obsidian-help-nl")
MAX_TEXT_SLOWDOWN = 1.30


def english_vault(root: Path, notes: int) -> Path:
    generate_vault(root, notes, seed=0, sections_per_note=(1, 3))
    return root


def translated_vault(root: Path, notes: int) -> Path:
    """Copies of the translated vaults, one folder per copy, until `notes` notes."""
    sources = [p for name in TRANSLATED for p in sorted((DATA / "vaults" / name).rglob("*.md"))]
    for i in range(notes):
        source = sources[i % len(sources)]
        target = root / f"copy{i // len(sources)}" / source.relative_to(DATA / "vaults")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())
    return root


def index_seconds(vault: Path) -> float:
    """(In the child) index `vault` from scratch, text only."""
    offline_env()
    from vaultctx import Workspace

    shutil.rmtree(vault / ".vaultctx", ignore_errors=True)
    with Workspace.open(vault) as ws:
        started = time.perf_counter()
        ws.index(embed=False)
        return time.perf_counter() - started


def timed(vault: Path, baseline: str | None) -> float:
    command = [sys.executable, __file__, "--child", str(vault)]
    env = code_env(baseline, VAULTCTX_EMBED="false")
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    return float(json.loads(out.strip().splitlines()[-1])["seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", metavar="SRC", required=False)
    parser.add_argument("--notes", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", metavar="VAULT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps({"seconds": index_seconds(Path(args.child))}))
        return
    if not (DATA / "vaults" / TRANSLATED[0]).is_dir():
        sys.exit("language_bench: ../shared/data/vaults is not here")
    figures: dict[str, float] = {}
    ok = True
    with tempfile.TemporaryDirectory(prefix="vaultctx-lang-") as tmp:
        vaults = {
            "english": english_vault(Path(tmp) / "english", args.notes),
            "translated": translated_vault(Path(tmp) / "translated", args.notes),
        }
        codes = {"current": None, **({"baseline": args.baseline} if args.baseline else {})}
        for kind, vault in vaults.items():
            times: dict[str, list[float]] = {name: [] for name in codes}
            for _ in range(args.rounds):
                for name, src in codes.items():
                    times[name].append(timed(vault, src))
            medians = {name: statistics.median(runs) for name, runs in times.items()}
            for name, median in medians.items():
                rate = args.notes / median
                print(
                    f"{kind:10} {name:8}: {median:.2f} s, {rate:,.0f} notes/s"
                    f" (runs {', '.join(f'{t:.2f}' for t in times[name])})"
                )
                figures[f"{kind}_{name}_s"] = round(median, 3)
            if "baseline" in medians:
                ratio = medians["current"] / medians["baseline"]
                figures[f"{kind}_ratio"] = round(ratio, 3)
                if kind == "english":
                    ok &= check(
                        "English text indexing time vs baseline",
                        ratio,
                        MAX_TEXT_SLOWDOWN,
                        higher_is_better=False,
                    )
                else:
                    print(f"translated text indexing time vs baseline: {ratio:.2f}x")
    emit_figures("language_bench", figures)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
