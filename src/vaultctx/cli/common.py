"""Options shared by every command, and how a command finds its vault."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from ..workspace import Workspace

VAULT_ENV = "VAULTCTX_VAULT"
# What marks a vault's folder: vaultctx's own (config.CONFIG_DIRNAME) or Obsidian's. Spelled
# out so that finding the vault imports nothing heavy; a test checks the two agree.
VAULT_MARKERS = (".vaultctx", ".obsidian")
VAULT_HELP = (
    "The vault folder (default: $VAULTCTX_VAULT, else the nearest folder from here up that"
    " holds .vaultctx/ or .obsidian/, else the current folder)."
)


def find_vault(vault: str | None = None, *, start: Path | None = None) -> Path:
    """The vault a command works on, first found of: `vault` (-V/--vault, or a command's
    VAULT argument), $VAULTCTX_VAULT, the nearest folder from `start` (default: the current
    folder) up that holds `.vaultctx/` or `.obsidian/`, and `start` itself — where
    `vaultctx index` makes a new vault, and where the other commands say it is not indexed.
    A command run in a vault's subfolder so answers from the vault's index."""
    if vault:
        return Path(vault).expanduser()
    if named := os.environ.get(VAULT_ENV):
        return Path(named).expanduser()
    here = (start or Path.cwd()).absolute()
    for folder in (here, *here.parents):
        if any((folder / marker).is_dir() for marker in VAULT_MARKERS):
            return folder
    return here


def vault_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """-V/--vault: the command's `vault` parameter, found by `find_vault`."""
    option = click.option("--vault", "-V", "vault", metavar="PATH", help=VAULT_HELP)
    return option(_finds_vault(fn, positional=False))


def vault_argument(fn: Callable[..., Any]) -> Callable[..., Any]:
    """An optional VAULT argument (`vaultctx index PATH`), or -V/--vault as every command
    takes it: the command's `vault` parameter, found by `find_vault`."""
    argument = click.argument(
        "vault_path", metavar="[VAULT]", required=False, type=click.Path(path_type=str)
    )
    option = click.option("--vault", "-V", "vault", metavar="PATH", help=VAULT_HELP)
    return option(argument(_finds_vault(fn, positional=True)))


def _finds_vault(fn: Callable[..., Any], *, positional: bool) -> Callable[..., Any]:
    @functools.wraps(fn)
    def command(*args: Any, vault: str | None = None, **kwargs: Any) -> Any:
        if positional:
            given = kwargs.pop("vault_path", None)
            if given and vault and Path(given).absolute() != Path(vault).absolute():
                raise click.UsageError(f"two vaults given: {given} and --vault {vault}")
            vault = vault or given
        return fn(*args, vault=str(find_vault(vault)), **kwargs)

    return command


def json_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for programs.")(fn)


def open_workspace(vault: str, *, create: bool = False, **overrides: Any) -> Workspace:
    """The workspace of `vault`. Only commands that index pass `create`: any other says the
    vault is not indexed yet rather than leave an empty index behind."""
    from ..workspace import Workspace  # numpy and pydantic: only commands that open a vault

    return Workspace.open(vault, overrides or None, create=create)
