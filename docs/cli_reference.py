"""Write the command-line reference (docs/cli.md) from the click commands themselves.

    python docs/cli_reference.py > docs/cli.md

tests/system/test_docs.py fails when docs/cli.md differs from what this prints, so the
reference is always the help the commands give.
"""

from __future__ import annotations

import sys

import click

WIDTH = 100
HEADER = """# Command line

Every command's `--help`, as it prints it. This page is generated from the commands
(`python docs/cli_reference.py > docs/cli.md`), and a test fails when it is not current.
"""


def commands(group: click.Group, ctx: click.Context) -> list[tuple[click.Context, click.Command]]:
    """Every command under `group`, depth first, each with the context it runs in."""
    found = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        sub = click.Context(
            command, info_name=name, parent=ctx, terminal_width=WIDTH, max_content_width=WIDTH
        )
        found.append((sub, command))
        if isinstance(command, click.Group):
            found += commands(command, sub)
    return found


def reference() -> str:
    from vaultctx.cli import cli

    root = click.Context(cli, info_name="vaultctx", terminal_width=WIDTH, max_content_width=WIDTH)
    parts = [HEADER, "```text", cli.get_help(root), "```", ""]
    for ctx, command in commands(cli, root):
        depth = ctx.command_path.count(" ")
        parts += [f"{'#' * (depth + 1)} `{ctx.command_path}`", ""]
        parts += ["```text", command.get_help(ctx), "```", ""]
    return "\n".join(parts)


if __name__ == "__main__":
    sys.stdout.write(reference())
