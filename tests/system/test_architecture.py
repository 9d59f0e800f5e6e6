"""The layers hold at run time too: the storage layer works alone, and `vaultctx.Workspace`
is the facade built on it. (`lint-imports` checks the static import graph.)"""

from __future__ import annotations

import ast
import json
import re
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
    edges = sum(1 for _ in vault.graph().links())
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


# A question of which backend a vault has: a None standing for "not a team's database".
BACKEND_BRANCH = re.compile(r"\w*(database_url|book|shelf|team|people)\s+is\s+(not\s+)?None")


def backend_questions(source: str) -> list[str]:
    """What in `source` asks which backend a vault has: a `database_url` read, a branch on a
    backend part being None, or an import of the database's own classes."""
    found = [m.group(0) for m in BACKEND_BRANCH.finditer(source)]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "database_url":
            found.append(f"line {node.lineno}: .database_url")
        elif isinstance(node, ast.ImportFrom) and "postgres" in (node.module or ""):
            found.append(f"line {node.lineno}: from {node.module} import")
        elif isinstance(node, ast.Constant) and "storage.postgres" in str(node.value):
            found.append(f"line {node.lineno}: {node.value!r}")
    return found


def test_backend_questions_are_found_wherever_they_are_asked() -> None:
    asked = (
        "if config.database_url is None:\n    pass\n"
        "url = self.config.database_url\n"
        "x = 1 if self.book is not None else 2\n"
        "from ..storage.postgres.team import Team\n"
        "LAZY = {'Team': 'vaultctx.storage.postgres.team'}\n"
    )
    assert len(backend_questions(asked)) == 6  # the first line is a read and a branch
    assert backend_questions("book = vault.memory_book()\nbook.refresh(copy)\n") == []


def test_nothing_above_storage_asks_which_backend_a_vault_has() -> None:
    """The backend (the SQLite index, or a team's database) is chosen once, in
    `storage.backend`; every layer above reads, publishes and keeps memories, people and
    sessions through its protocols, never branching on which one it is."""
    package = REPO_ROOT / "src" / "vaultctx"
    asked = {
        str(path.relative_to(package)): questions
        for path in sorted(package.rglob("*.py"))
        if path.relative_to(package).parts[0] not in ("storage", "config.py")
        if (questions := backend_questions(path.read_text()))
    }
    assert asked == {}


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
