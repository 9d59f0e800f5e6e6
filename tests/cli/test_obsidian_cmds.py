"""`vaultctx obsidian install`: the packaged plugin, copied into a vault as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import REPO_ROOT
from vaultctx.cli import cli
from vaultctx.obsidian import PLUGIN_FILES, packaged_plugin

PLUGIN_SOURCE = REPO_ROOT / "plugins" / "obsidian"


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def obsidian_vault(tmp_path: Path) -> Path:
    root = tmp_path / "my vault"
    (root / ".obsidian").mkdir(parents=True)
    (root / "Note.md").write_text("# Note\n")
    return root


def test_the_package_ships_the_built_plugin() -> None:
    shipped = packaged_plugin()
    assert sorted(p.name for p in shipped.iterdir()) == sorted(PLUGIN_FILES)
    manifest = json.loads((shipped / "manifest.json").read_text())
    assert manifest["id"] == "vaultctx" and manifest["isDesktopOnly"] is True
    # manifest.json and styles.css are the plugin's own; main.js is checked against a fresh
    # build by the plugin's test suite (plugins/obsidian/test/build.test.ts).
    for name in ("manifest.json", "styles.css"):
        assert (shipped / name).read_bytes() == (PLUGIN_SOURCE / name).read_bytes(), name
    assert (shipped / "main.js").stat().st_size <= 150 * 1024


def test_install_copies_the_plugin_and_says_how_to_enable_it(tmp_path: Path) -> None:
    vault = obsidian_vault(tmp_path)
    result = run("obsidian", "install", str(vault))
    assert result.exit_code == 0, result.output
    target = vault / ".obsidian" / "plugins" / "vaultctx"
    for name in PLUGIN_FILES:
        assert (target / name).read_bytes() == (packaged_plugin() / name).read_bytes()
    text = " ".join(result.output.split())
    assert (
        f"Installed the vaultctx plugin 0.1.0 in {target} (main.js, manifest.json, styles.css)."
        in text
    )
    assert 'Community plugins → turn community plugins on → enable "vaultctx"' in text
    assert f"vaultctx serve '{vault}'" in text  # quoted for a shell
    assert sorted(p.name for p in target.iterdir()) == sorted(PLUGIN_FILES)  # no temp files left


def test_install_again_updates_in_place_and_reports_json(tmp_path: Path) -> None:
    vault = obsidian_vault(tmp_path)
    target = vault / ".obsidian" / "plugins" / "vaultctx"
    target.mkdir(parents=True)
    (target / "manifest.json").write_text('{"id": "vaultctx", "version": "0.0.1"}')
    (target / "main.js").write_text("old")
    (target / "data.json").write_text('{"k": 5}')  # the user's settings stay
    (vault / ".obsidian" / "community-plugins.json").write_text('["vaultctx"]')
    result = run("obsidian", "install", str(vault), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "vault": str(vault.resolve()),
        "plugin_dir": str(target.resolve()),
        "version": "0.1.0",
        "previous_version": "0.0.1",
        "files": list(PLUGIN_FILES),
        "enabled": True,
    }
    assert (target / "main.js").read_bytes() == (packaged_plugin() / "main.js").read_bytes()
    assert (target / "data.json").read_text() == '{"k": 5}'
    human = run("obsidian", "install", str(vault))
    assert "Updated the vaultctx plugin from 0.1.0 to 0.1.0" in human.output
    assert "It is enabled: reload Obsidian" in human.output


def test_a_folder_obsidian_never_opened_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    result = run("obsidian", "install", str(tmp_path / "notes"))
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert "has no .obsidian folder: open it as a vault in Obsidian once" in result.output
    missing = run("obsidian", "install", str(tmp_path / "nowhere"))
    assert missing.exit_code == 2 and "no vault at" in missing.output
    assert not (tmp_path / "notes" / ".obsidian").exists()


def test_a_folder_that_cannot_be_written_is_one_line_too(tmp_path: Path) -> None:
    vault = obsidian_vault(tmp_path)
    (vault / ".obsidian" / "plugins").write_text("a file where the folder should be")
    result = run("obsidian", "install", str(vault))
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and "cannot write" in result.output


USERS_OWN = "// the user's own main.js, of another plugin\n"


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    "link",
    [
        ".obsidian",
        ".obsidian/plugins",
        ".obsidian/plugins/vaultctx",
        ".obsidian/plugins/vaultctx/main.js",
    ],
)
def test_a_symlink_on_the_way_out_of_the_vault_is_refused_and_nothing_is_written(
    tmp_path: Path, link: str
) -> None:
    vault = obsidian_vault(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    # What the link points at holds the user's own main.js where the plugin's would go.
    below = Path(*Path(".obsidian/plugins/vaultctx/main.js").parts[len(Path(link).parts) :])
    users_file = elsewhere / below if below.parts else elsewhere / "main.js"
    users_file.parent.mkdir(parents=True)
    users_file.write_text(USERS_OWN)
    target = elsewhere if below.parts else users_file
    (vault / link).parent.mkdir(parents=True, exist_ok=True)
    if (vault / link).is_dir() and not (vault / link).is_symlink():
        (vault / link).rmdir()
    (vault / link).symlink_to(target)
    inside, outside = _snapshot(vault), _snapshot(elsewhere)

    result = run("obsidian", "install", str(vault))
    assert result.exit_code == 16  # PathOutsideVault
    assert result.output.count("\n") == 1
    assert f"path refused: '{link}' (a symlink out of the vault, to" in result.output
    assert "nothing was installed" in result.output
    assert users_file.read_text() == USERS_OWN
    assert (_snapshot(vault), _snapshot(elsewhere)) == (inside, outside)


def test_a_symlink_that_stays_inside_the_vault_is_followed(tmp_path: Path) -> None:
    vault = obsidian_vault(tmp_path)
    (vault / "shared plugins").mkdir()
    (vault / ".obsidian" / "plugins").symlink_to(vault / "shared plugins")
    result = run("obsidian", "install", str(vault))
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (vault / "shared plugins" / "vaultctx").iterdir()) == sorted(
        PLUGIN_FILES
    )


def test_the_command_is_listed_and_imports_nothing_heavy() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "import sys; from vaultctx.cli import main; sys.argv = "
         "['vaultctx', 'obsidian', '--help']; "
         "import atexit; atexit.register(lambda: print(sorted(m for m in ('numpy', 'rich.table',"
         " 'vaultctx.workspace') if m in sys.modules)))\ntry:\n main()\nexcept SystemExit: pass"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "install  Copy the plugin into VAULT/.obsidian/plugins/vaultctx/" in out.stdout
    assert out.stdout.strip().endswith("[]")
