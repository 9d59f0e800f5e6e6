"""The documentation cannot drift from the code: the command-line reference is the commands'
own help, every command and option says what it does and has a page that describes it, and
the README's commands and Python example run on the example vault and print what it shows."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from conftest import REPO_ROOT
from vaultctx.cli import cli
from vaultctx.config import Config

DOCS = REPO_ROOT / "docs"
README = REPO_ROOT / "README.md"
# Figures that differ from run to run: durations and sizes.
VARYING = re.compile(r"\d+(?:[.,]\d+)?\s?(?:ms|s|MB|KB|B)\b")


def load_reference_writer():
    spec = importlib.util.spec_from_file_location("cli_reference", DOCS / "cli_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def every_command() -> list[tuple[str, click.Command]]:
    writer = load_reference_writer()
    root = click.Context(cli, info_name="vaultctx")
    return [(ctx.command_path, command) for ctx, command in writer.commands(cli, root)]


def test_the_command_line_reference_is_the_commands_own_help() -> None:
    written = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert written == load_reference_writer().reference(), (
        "docs/cli.md is not current: python docs/cli_reference.py > docs/cli.md"
    )


def test_every_command_and_option_says_what_it_does() -> None:
    undocumented = []
    for path, command in every_command():
        if not (command.help or "").strip():
            undocumented.append(path)
        for param in command.params:
            if isinstance(param, click.Option) and not (param.help or "").strip():
                undocumented.append(f"{path} {param.opts[0]}")
    assert undocumented == []


def test_every_command_is_described_beyond_the_reference() -> None:
    guides = [README.read_text(encoding="utf-8")] + [
        page.read_text(encoding="utf-8") for page in DOCS.glob("*.md") if page.name != "cli.md"
    ]
    text = "\n".join(guides)
    missing = [
        path  # named as code: `vaultctx x`, or a line of a shell example
        for path, _ in every_command()
        if not re.search(rf"(?:^|`|\$ ){re.escape(path)}\b", text, flags=re.M)
    ]
    assert missing == [], "commands no page describes (only docs/cli.md names them)"


def readme_blocks(language: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.S | re.M)


def console_steps(block: str) -> list[tuple[str, str]]:
    """(command, the output the README shows for it) for each `$ ` line of a console block."""
    steps: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
    return [(command, "\n".join(shown)) for command, shown in steps]


def comparable(text: str) -> str:
    """Output as a reader compares it: durations and sizes masked, wrapping ignored."""
    return VARYING.sub("<n>", " ".join(text.split()))


def absolute_env(**extra: str) -> dict[str, str]:
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    pythonpath = os.pathsep.join(os.path.abspath(p) for p in paths if p)
    return os.environ | {"PYTHONPATH": pythonpath, "COLUMNS": "96"} | extra


def test_every_setting_is_named_on_the_configuration_page() -> None:
    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    named = {re.sub(r"<\w+>", r"\\w+", n) for n in re.findall(r"`([a-z_<>]+)`", page)}
    unnamed = [key for key in Config.model_fields if not any(re.fullmatch(n, key) for n in named)]
    assert unnamed == [], "settings docs/configuration.md does not name"


def test_the_readme_shows_console_commands_and_one_python_example() -> None:
    steps = [step for block in readme_blocks("console") for step in console_steps(block)]
    assert len(steps) >= 6 and any(command.startswith("vaultctx index") for command, _ in steps)
    assert len(readme_blocks("python")) == 1


@pytest.mark.slow
def test_the_readme_commands_run_on_the_example_vault(example_vault: Path, tmp_path: Path):
    """Every `$ ` line of the README's console blocks, in a copy of examples/vault standing in
    for `~/notes` (the block that indexes first); where the README shows output, it is what
    the command prints, durations and sizes aside."""
    blocks = sorted(readme_blocks("console"), key=lambda b: "$ vaultctx index" not in b)
    home = tmp_path / "home"
    home.mkdir()
    env = absolute_env(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    ran = []
    for block in blocks:
        for command, shown in console_steps(block):
            if command.startswith("cd "):
                continue  # ~/notes is the copy, where every command runs
            words = command.replace("~/notes", str(example_vault)).split(" ", 1)
            assert words[0] == "vaultctx", command
            done = subprocess.run(
                f"{sys.executable} -m vaultctx {words[1]}",
                shell=True, cwd=example_vault, env=env, capture_output=True, text=True,
            )  # fmt: skip
            assert done.returncode == 0, f"{command}: {done.stderr}"
            assert done.stdout.strip(), command
            if shown.strip():
                assert comparable(done.stdout) == comparable(shown), command
            ran.append(command)
    assert any("search" in c for c in ran) and any("mcp --install" in c for c in ran)
    assert (home / ".config" / "Claude" / "claude_desktop_config.json").is_file()


@pytest.mark.slow
def test_the_readme_python_example_runs(example_vault: Path) -> None:
    (example,) = readme_blocks("python")
    assert '"~/notes"' in example
    code = example.replace('"~/notes"', repr(str(example_vault)))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), {})
    lines = printed.getvalue().splitlines()
    assert len(lines) == 6  # five candidates, then the context's tokens and paths
    for line in lines[:5]:
        path = re.match(r"(.+?\.md) ", line)
        assert path and (example_vault / path.group(1)).is_file(), line
    assert lines[-1].split(" ", 1)[0].isdigit() and ".md" in lines[-1]
