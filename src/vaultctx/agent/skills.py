"""The Skill Composer: skills are notes in the vault's skills folder, run as agent turns.

A skill note's frontmatter declares its name, description, typed inputs, the capabilities
it needs and optionally a model; its body is a prompt template with named inputs and
`[[links]]` to notes it always wants in context:

    ---
    name: Inspection Summary
    description: Summarize recent inspections of one hive.
    inputs:
      hive: {type: str, required: true, description: the hive's name}
      days: {type: int, default: 14}
    capabilities: [vault.read]
    ---
    Summarize the inspections of {{ hive }} over the last {{ days }} days. See [[Queen Records]].

Templates render in jinja2's sandbox with `StrictUndefined`: no code runs from a note, a
name the skill does not declare is an error, and input values are data — never rendered
again, so a value containing `{{ … }}` appears as typed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import jinja2
from jinja2 import meta
from jinja2.sandbox import SandboxedEnvironment
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from .. import prompts
from ..errors import NoteNotFound, SkillError
from ..llm import count_tokens
from ..permissions import Capability, Destination, PermissionGuard
from ..storage.frontmatter import split_frontmatter
from ..storage.notefile import MARKDOWN, file_kind, read_note_file

if TYPE_CHECKING:
    from .protocols import IndexedVault, TurnWorkspace

INPUT_TYPES: dict[str, Any] = {"str": str, "int": int, "float": float, "bool": bool, "list": list}
LINK = re.compile(r"\[\[([^\[\]|#^\n]+)(?:[#^|][^\[\]\n]*)?\]\]")
_ENV = SandboxedEnvironment(
    autoescape=False, undefined=jinja2.StrictUndefined, keep_trailing_newline=True
)


class SkillInput(BaseModel):
    """One declared input. Without `required`, an input with no default is optional
    (None)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["str", "int", "float", "bool", "list"] = "str"
    required: bool = False
    default: Any = None
    description: str = ""


class SkillFrontmatter(BaseModel):
    """The skill's fields of the note's frontmatter; other keys (tags, aliases) are the
    note's own business."""

    model_config = ConfigDict(extra="ignore")

    name: str | None = Field(None, min_length=1)
    description: str = ""
    inputs: dict[str, SkillInput] = Field(default_factory=dict)
    capabilities: list[Capability] = Field(default_factory=lambda: [Capability.VAULT_READ])
    model: str | None = None


@dataclass(frozen=True)
class Skill:
    """A validated skill: what `skills show` prints and `run_skill` runs."""

    name: str
    description: str
    path: str
    inputs: Mapping[str, SkillInput]
    capabilities: tuple[Capability, ...]
    model: str | None
    template: str
    links: tuple[str, ...]
    input_model: type[BaseModel] = field(repr=False, compare=False)

    def validate_inputs(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Typed input values (defaults filled in), or a `SkillError` naming the input."""
        try:
            return self.input_model.model_validate(dict(values)).model_dump()
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "inputs"
            raise SkillError(self.path, f"inputs.{where}", first["msg"]) from exc

    def render(self, values: Mapping[str, Any]) -> str:
        """The template with validated `values`; the values are data, never templates."""
        data = self.validate_inputs(values)
        try:
            return _ENV.from_string(self.template).render(data)
        except jinja2.TemplateError as exc:  # e.g. the sandbox refused an attribute
            raise SkillError(self.path, "body", str(exc)) from exc

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "path": self.path,
            "inputs": {k: v.model_dump() for k, v in self.inputs.items()},
            "capabilities": [c.value for c in self.capabilities],
            "model": self.model,
            "links": list(self.links),
            "template": self.template,
        }


def parse_skill(path: str, text: str) -> Skill:
    """A `Skill` from a note's text, or a `SkillError` naming the note and the field."""
    data, problem, body, *_ = split_frontmatter(text)
    if problem:
        raise SkillError(path, "frontmatter", problem)
    if not data:
        raise SkillError(path, "frontmatter", "a skill needs frontmatter (name, description)")
    try:
        front = SkillFrontmatter.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "frontmatter"
        raise SkillError(path, where, first["msg"]) from exc
    for name in front.inputs:
        if not name.isidentifier():
            raise SkillError(path, f"inputs.{name}", "not a valid input name")
    try:
        declared = meta.find_undeclared_variables(_ENV.parse(body))
    except jinja2.TemplateSyntaxError as exc:
        raise SkillError(path, "body", f"line {exc.lineno}: {exc.message}") from exc
    unknown = sorted(declared - set(front.inputs))
    if unknown:
        raise SkillError(path, "body", f"uses undeclared input(s): {', '.join(unknown)}")
    fields: dict[str, Any] = {
        name: (
            INPUT_TYPES[spec.type] if spec.required else INPUT_TYPES[spec.type] | None,
            Field(..., description=spec.description or None)
            if spec.required
            else Field(spec.default, validate_default=True, description=spec.description or None),
        )
        for name, spec in front.inputs.items()
    }
    input_model = create_model(
        "SkillInputs", __config__=ConfigDict(extra="forbid", strict=False), **fields
    )
    links = tuple(dict.fromkeys(m.strip() for m in LINK.findall(body)))
    return Skill(
        name=front.name or path.rsplit("/", 1)[-1].removesuffix(".md"),
        description=front.description,
        path=path,
        inputs=front.inputs,
        capabilities=tuple(dict.fromkeys(front.capabilities)),
        model=front.model,
        template=body,
        links=links,
        input_model=input_model,
    )


@dataclass(frozen=True)
class SkillCatalog:
    """Every note in the skills folder: the valid skills, and the errors of the others."""

    skills: tuple[Skill, ...]
    errors: tuple[SkillError, ...]


def discover(ws: TurnWorkspace, destination: Destination = Destination.CLIENT) -> SkillCatalog:
    """The skills of the vault: indexed Markdown notes under `config.skills_folder` in the
    view of `destination` (where the skill's text goes), each parsed from its file (the
    index keeps no frontmatter types); a PDF or canvas there is no skill."""
    folder = ws.config.skills_folder.strip("/") + "/"
    ws.require_index()
    paths = [p for p in ws.view(destination).notes_under(folder) if file_kind(p) == MARKDOWN]
    skills: list[Skill] = []
    errors: list[SkillError] = []
    for path in paths:
        try:
            skills.append(parse_skill(path, read_note_file(ws.root, path).content))
        except SkillError as exc:
            errors.append(exc)
        except NoteNotFound as exc:
            errors.append(SkillError(path, "file", str(exc)))
    return SkillCatalog(tuple(skills), tuple(errors))


def find_skill(ws: TurnWorkspace, name: str) -> Skill:
    """The skill called `name` (its name, or its note's path or file name, any case).
    A broken note of that name raises its own error rather than "not found"."""
    wanted = name.strip().lower().removesuffix(".md")
    catalog = discover(ws)

    def matches(path: str, skill_name: str | None = None) -> bool:
        stem = path.lower().removesuffix(".md")
        return wanted in (stem, stem.rsplit("/", 1)[-1], (skill_name or "").lower())

    for skill in catalog.skills:
        if matches(skill.path, skill.name):
            return skill
    for error in catalog.errors:
        if matches(error.path):
            raise error
    known = ", ".join(s.name for s in catalog.skills) or "none"
    raise SkillError(name, "name", f"no such skill in {ws.config.skills_folder}/ (known: {known})")


@dataclass(frozen=True)
class SkillRun:
    """One skill invocation as the request handler needs it: the rendered user message,
    the skill, and its validated inputs (logged with the turn)."""

    skill: Skill
    message: str
    inputs: dict[str, Any]

    @classmethod
    def prepare(cls, skill: Skill, inputs: Mapping[str, Any]) -> SkillRun:
        values = skill.validate_inputs(inputs)
        return cls(skill, skill.render(values), values)

    def context(self, vault: IndexedVault, guard: PermissionGuard, *, budget_tokens: int) -> str:
        """Step 6 of the turn: the skill and the notes it links, in link order, within
        `budget_tokens`; notes the guard would not let the skill read are left out, and
        links to no note are skipped (the template may name notes yet to be written)."""
        notes: list[dict[str, str]] = []
        used = 0
        for target in self.skill.links:
            try:
                path = vault.resolve(target)
            except NoteNotFound:
                continue
            if not guard.permits(Capability.VAULT_READ, path) or any(
                n["path"] == path for n in notes
            ):
                continue
            text = vault.read(path)
            tokens = count_tokens(text)
            if used + tokens > budget_tokens:
                left = budget_tokens - used
                if left <= 0:
                    break
                text = text[: left * 4].rstrip() + "\n…(truncated)"
                tokens = left
            notes.append({"path": path, "text": text})
            used += tokens
        return prompts.skill_context(self.skill.name, self.skill.description, notes)
