"""The layers hold at run time too: the storage layer works alone, and `vaultctx.Workspace`
is the facade built on it. (`lint-imports` checks the static import graph.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO_ROOT
from vaultctx import Workspace
from vaultctx.storage import Vault

ABOVE_STORAGE = ("pipeline", "memory", "agent", "llm", "workspace", "server", "cli", "mcp_server")

STORAGE_ONLY = """
import json, sys
from vaultctx.storage import Vault
with Vault.open(sys.argv[1]) as vault:
    report = vault.index(embed=False)
    path = vault.touch("Varroa Mites")
    edges = vault.graph().number_of_edges()
    status = vault.status()
loaded = sorted({m.split(".")[1] for m in sys.modules if m.startswith("vaultctx.")})
print(json.dumps({"notes": status.notes, "path": path, "edges": edges, "loaded": loaded}))
"""


def test_the_vault_indexes_and_answers_without_loading_any_layer_above_it(
    example_vault: Path,
) -> None:
    out = subprocess.run(
        [sys.executable, "-c", STORAGE_ONLY, str(example_vault)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
    )
    result = json.loads(out.stdout)
    assert result["notes"] > 0 and result["edges"] > 0
    assert result["path"].endswith("Varroa Mites.md")
    assert not set(result["loaded"]) & set(ABOVE_STORAGE), result["loaded"]


def test_the_public_workspace_is_the_facade_over_a_vault(example_vault: Path) -> None:
    """It holds a vault rather than being one: nothing of `Vault` is public on it but what
    it declares itself."""
    assert not issubclass(Workspace, Vault) and Workspace.__module__ == "vaultctx.workspace"
    with Workspace.open(example_vault) as ws:
        assert isinstance(ws._vault, Vault)
        ws.index(embed=False)
        assert repr(ws) == f"Workspace({str(example_vault.resolve())!r})"
        assert ws.select("varroa", k=3, use_vectors=False).candidates
        assert ws.sessions() == []
        assert [s.name for s in ws.skill_catalog().skills] == [s.name for s in ws.skills()]
        assert ws.skills() and ws.skill(ws.skills()[0].name) == ws.skills()[0]


def test_every_silenced_type_error_says_why() -> None:
    """The type checker runs in CI (`make lint`); where it is told to look away, the line
    says why, so nobody has to guess whether the ignore still holds."""
    bare = [
        f"{path.relative_to(REPO_ROOT)}:{number}"
        for path in sorted((REPO_ROOT / "src").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if "# type: ignore" in line and "#" not in line.split("# type: ignore", 1)[1]
    ]
    assert bare == []


def test_the_package_says_it_is_typed() -> None:
    assert (REPO_ROOT / "src" / "vaultctx" / "py.typed").is_file()
