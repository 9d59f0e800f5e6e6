"""`vaultctx obsidian install`: the Obsidian plugin, copied into a vault."""

from __future__ import annotations

import shlex

from . import cli
from .common import json_option, vault_argument
from .output import console, emit_json


@cli.group()
def obsidian() -> None:
    """The Obsidian plugin: related notes beside the open note, search, context in one key."""


@obsidian.command("install")
@vault_argument
@json_option
def install(vault: str, as_json: bool) -> None:
    """Copy the plugin into VAULT/.obsidian/plugins/vaultctx/ and say how to enable it."""
    from ..obsidian import install_plugin

    done = install_plugin(vault)
    if as_json:
        emit_json(done.to_dict())
        return
    if done.previous_version is None:
        what = f"Installed the vaultctx plugin {done.version}"
    else:
        what = f"Updated the vaultctx plugin from {done.previous_version} to {done.version}"
    console.print(
        f"{what} in {done.plugin_dir} ({', '.join(done.files)}).", markup=False, soft_wrap=True
    )
    if done.enabled:
        console.print(
            "It is enabled: reload Obsidian (or turn the plugin off and on) to use it.",
            soft_wrap=True,
        )
    else:
        console.print(
            "To enable it: in Obsidian, Settings → Community plugins → turn community plugins on"
            ' → enable "vaultctx" (if it is not listed, reload the list).',
            markup=False,
            soft_wrap=True,
        )
    console.print(
        f"Then run `vaultctx serve {shlex.quote(done.vault)}` (or the command"
        " “vaultctx: Start the server”) and open the panel with"
        " “vaultctx: Open the related notes panel”.",
        markup=False,
        soft_wrap=True,
    )
