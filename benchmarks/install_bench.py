"""The default install's weight, as a new user gets it: a fresh virtualenv, `pip install .`
with no extras, the resolver's own report, the size of every distribution it brought and of
what each of vaultctx's requirements brings with it, and `index` + `search` offline.

    python benchmarks/install_bench.py [--extras llm] [--python python3.11] [--keep DIR]
                                       [--constraints constraints.txt] [--project CHECKOUT]

Resolved as on a machine with only the public package index: no constraints unless asked
(`constraints.txt` pins the `torch` extra's CPU wheel, which the default install must not
need). Sizes are disk usage (blocks, as `du` counts them) of each distribution's files in
its RECORD, bytecode included; "brings" is the distribution with every dependency that no
other requirement of vaultctx also needs. Targets (issue 44): no torch, no CUDA, no
sentence-transformers (and no litellm: the `llm` extra); the virtualenv ≤ 300 MB.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, check, emit_figures

TARGET_MB = 300
# Never in the default install: torch and what comes with it, and the optional model client.
FORBIDDEN = ("torch", "triton", "sentence-transformers", "transformers", "litellm")
FORBIDDEN_PREFIXES = ("nvidia-",)
QUERY = "when should I treat the hives for varroa mites"

# Run inside the new virtualenv: every distribution's disk usage from its RECORD.
_SIZES = """
import importlib.metadata as md, json, os
sizes = {}
for dist in md.distributions():
    used = 0
    for file in dist.files or []:
        try:
            used += os.lstat(dist.locate_file(file)).st_blocks * 512
        except OSError:
            pass
    sizes[dist.metadata["Name"]] = used
print(json.dumps(sizes))
"""


def disk_mb(root: Path) -> float:
    """Disk usage of a tree as `du -s` counts it (allocated blocks), in MB."""
    used = 0
    for folder, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                used += os.lstat(os.path.join(folder, name)).st_blocks * 512
    return used / 2**20


def brought(report: dict, sizes: dict[str, int]) -> dict[str, dict]:
    """For each requirement of vaultctx: MB of it plus the dependencies only it needs (a
    requirement's extras followed, e.g. mcp's `pyjwt[crypto]` brings cryptography)."""
    environment = report["environment"]
    requires = {
        canonicalize_name(i["metadata"]["name"]): [
            Requirement(line) for line in i["metadata"].get("requires_dist") or []
        ]
        for i in report["install"]
    }
    by_name = {canonicalize_name(k): v for k, v in sizes.items()}

    def needs(name: str, extras: frozenset[str]) -> list[tuple[str, frozenset[str]]]:
        wanted = []
        for req in requires.get(name, []):
            if req.marker is None or any(
                req.marker.evaluate({**environment, "extra": extra}) for extra in {"", *extras}
            ):
                wanted.append((canonicalize_name(req.name), frozenset(req.extras)))
        return wanted

    def closure(roots: list[tuple[str, frozenset[str]]], without: str | None = None) -> set[str]:
        seen: set[tuple[str, frozenset[str]]] = set()
        stack = list(roots)
        while stack:
            node = stack.pop()
            if node in seen or node[0] == without or node[0] not in requires:
                continue
            seen.add(node)
            stack.extend(needs(*node))
        return {name for name, _ in seen}

    top = needs("vaultctx", frozenset())
    everything = closure(top)
    out = {}
    for name, _ in top:
        only = everything - closure(top, without=name)
        out[name] = {
            "mb": round(sum(by_name.get(n, 0) for n in only) / 2**20, 1),
            "with": sorted(only - {name}),
        }
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["mb"]))


def copy_tracked(project: Path, into: Path) -> Path:
    """The checkout's tracked files as they are on disk, copied: pip builds in the source
    folder, so two installs of one checkout at once would share its `build/`."""
    listed = subprocess.run(
        ["git", "-C", str(project), "ls-files", "-z"], check=True, capture_output=True
    ).stdout.decode()
    shutil.rmtree(into, ignore_errors=True)
    for name in filter(None, listed.split("\0")):
        source = project / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    return into


def smoke(venv: Path, work: Path) -> dict[str, bool]:
    """`index` and `search` on a copy of the example vault, offline, from the new install;
    and `context` with a model configured but no `llm` extra: one line naming the extra."""
    vault = work / "vault"
    shutil.copytree(REPO / "examples" / "vault", vault)
    shutil.rmtree(vault / ".vaultctx", ignore_errors=True)
    env = {
        "PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '')}",
        "HOME": str(work),
        "HF_HUB_OFFLINE": "1",
        "VAULTCTX_CONFIG_DIR": str(work / "config"),
    }
    run = {"cwd": vault, "env": env, "capture_output": True, "text": True}
    indexed = subprocess.run(["vaultctx", "index"], **run)
    found = subprocess.run(["vaultctx", "search", QUERY, "-k", "3"], **run)
    model = {**env, "VAULTCTX_LLM_MODEL": "openai/gpt-4o-mini"}
    context = subprocess.run(["vaultctx", "context", QUERY], **{**run, "env": model})
    has_llm = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import litellm"], capture_output=True
    )
    lines = context.stderr.strip().splitlines()
    return {
        "index": indexed.returncode == 0,
        "search": found.returncode == 0 and "Varroa" in found.stdout,
        "context_without_llm_extra": has_llm.returncode == 0
        or (context.returncode != 0 and len(lines) == 1 and "vaultctx[llm]" in lines[0]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extras", default="", help="e.g. llm, or llm,postgres")
    parser.add_argument("--python", default=sys._base_executable, help="the interpreter")
    parser.add_argument("--constraints", help="a pip constraints file (none by default)")
    parser.add_argument("--keep", metavar="DIR", help="build the virtualenv here and keep it")
    parser.add_argument("--project", default=str(REPO), help="the checkout to install")
    args = parser.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="vaultctx-install-"))
    venv = work / "venv"
    try:
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([args.python, "-m", "venv", str(venv)], check=True)
        empty_mb = disk_mb(venv)
        project = str(copy_tracked(Path(args.project).resolve(), work / "source"))
        target = f"{project}[{args.extras}]" if args.extras else project
        command = [str(venv / "bin" / "pip"), "install", "--quiet", "--report"]
        command += [str(work / "report.json"), target]
        command += ["-c", args.constraints] if args.constraints else []
        subprocess.run(command, check=True, stderr=subprocess.DEVNULL)
        report = json.loads((work / "report.json").read_text(encoding="utf-8"))
        probe = [str(venv / "bin" / "python"), "-c", _SIZES]
        sizes = json.loads(subprocess.run(probe, check=True, capture_output=True).stdout)
        total_mb = disk_mb(venv)
        resolved = {i["metadata"]["name"]: i["metadata"]["version"] for i in report["install"]}
        names = {canonicalize_name(n) for n in resolved}
        forbidden = sorted(n for n in names if n in FORBIDDEN or n.startswith(FORBIDDEN_PREFIXES))
        if args.extras:
            forbidden = [n for n in forbidden if n != "litellm"]
        works = smoke(venv, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    largest = sorted(sizes.items(), key=lambda kv: -kv[1])
    print(f"pip {report['pip_version']} resolved {len(resolved)} distributions for {target}")
    print(f"virtualenv {total_mb:.0f} MB (empty, with pip: {empty_mb:.0f} MB)\n")
    print("largest distributions (MB on disk, bytecode included):")
    for name, used in largest[:25]:
        print(f"  {used / 2**20:7.1f}  {name} {resolved.get(name, '')}")
    print("\nwhat each requirement of vaultctx brings (itself + dependencies only it needs):")
    parts = brought(report, sizes)
    for name, part in parts.items():
        print(
            f"  {part['mb']:7.1f}  {name}" + (f"  ({', '.join(part['with'])})" * bool(part["with"]))
        )
    print()
    ok = check("virtualenv MB", total_mb, TARGET_MB, higher_is_better=False)
    ok &= check("forbidden distributions", len(forbidden), 0, higher_is_better=False)
    for step, passed in works.items():
        ok &= check(f"{step} works", float(passed), 1.0, higher_is_better=True)
    emit_figures(
        "install",
        {
            "extras": args.extras,
            "venv_mb": round(total_mb, 1),
            "empty_venv_mb": round(empty_mb, 1),
            "distributions": len(resolved),
            "forbidden": forbidden,
            "resolved": resolved,
            "mb": {name: round(used / 2**20, 1) for name, used in largest},
            "brings_mb": {name: part["mb"] for name, part in parts.items()},
            "works": works,
        },
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
