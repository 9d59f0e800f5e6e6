"""`vaultctx skills list|show|run`: skills are notes in the vault's skills folder."""

from __future__ import annotations

from typing import Any

import click
from rich.markup import escape

from ..errors import SkillError
from . import cli, output
from .agent_cmds import make_asker, report_turn, show_activity
from .common import json_option, open_workspace, vault_option
from .output import emit_json


def parse_inputs(pairs: tuple[str, ...]) -> dict[str, Any]:
    """`k=v` pairs; a key given more than once becomes a list (for `list` inputs). Values
    stay strings: the skill's input model converts them to their declared types."""
    values: dict[str, Any] = {}
    for pair in pairs:
        key, found, value = pair.partition("=")
        if not found or not key.strip():
            raise SkillError("--input", key or pair, f"expected NAME=VALUE, got {pair!r}")
        key = key.strip()
        if key in values:
            previous = values[key]
            values[key] = [*previous, value] if isinstance(previous, list) else [previous, value]
        else:
            values[key] = value
    return values


@cli.group()
def skills() -> None:
    """Skills: prompt templates kept as notes (default folder Skills/), run as agent turns."""


@skills.command("list")
@vault_option
@json_option
def skills_list(vault: str, as_json: bool) -> None:
    """Every skill of the vault, and the skill notes that are invalid."""
    with open_workspace(vault) as ws:
        catalog = ws.skill_catalog()
    problems = [{"path": e.path, "field": e.field, "message": str(e)} for e in catalog.errors]
    if as_json:
        emit_json({"skills": [s.to_dict() for s in catalog.skills], "errors": problems})
        return
    for skill in catalog.skills:
        output.console.print(
            f"[bold]{escape(skill.name)}[/]  [dim]{escape(skill.path)}[/]  "
            f"{escape(skill.description)}"
        )
    for problem in problems:
        output.err_console.print(f"[red]invalid[/] {escape(problem['message'])}")


@skills.command("show")
@click.argument("name")
@vault_option
@json_option
def skills_show(name: str, vault: str, as_json: bool) -> None:
    """A skill's inputs, capabilities, model, links and template."""
    with open_workspace(vault) as ws:
        skill = ws.skill(name)
    if as_json:
        emit_json(skill.to_dict())
        return
    console = output.console
    console.print(f"[bold]{escape(skill.name)}[/]  [dim]{escape(skill.path)}[/]")
    if skill.description:
        console.print(escape(skill.description))
    for key, spec in skill.inputs.items():
        need = "required" if spec.required else f"default {spec.default!r}"
        console.print(
            f"  input [cyan]{key}[/]: {spec.type}, {escape(need)}  {escape(spec.description)}"
        )
    console.print("  capabilities: " + ", ".join(c.value for c in skill.capabilities))
    if skill.model:
        console.print(f"  model: {escape(skill.model)}")
    if skill.links:
        console.print("  links: " + ", ".join(escape(link) for link in skill.links))
    console.print("")
    console.print(escape(skill.template), soft_wrap=True)


@skills.command("run")
@click.argument("name")
@click.option(
    "--input",
    "-i",
    "inputs",
    multiple=True,
    metavar="NAME=VALUE",
    help="A skill input; repeat for more (a repeated name makes a list).",
)
@vault_option
@click.option("--model", help="litellm model; overrides the skill's own model.")
@click.option("--session", "session_id", help="Continue this session.")
@click.option("--yes", is_flag=True, help="Allow every permission the policy would ask for.")
@json_option
def skills_run(
    name: str,
    inputs: tuple[str, ...],
    vault: str,
    model: str | None,
    session_id: str | None,
    yes: bool,
    as_json: bool,
) -> None:
    """Run skill NAME as one agent turn, with only the capabilities it declares."""
    report_turn(
        vault,
        as_json,
        lambda ws: ws.run_skill(
            name,
            parse_inputs(inputs),
            session_id=session_id,
            model=model,
            asker=make_asker(yes),
            on_event=None if as_json else show_activity,
        ),
    )
