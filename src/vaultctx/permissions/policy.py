"""The permission policy: a default effect per capability, then path-glob rules.

`<index dir>/permissions.toml` (beside index.db):

    [defaults]
    "vault.write" = "deny"

    [[rules]]
    capability = "vault.write"
    paths = ["Inbox/**"]
    effect = "allow"

The first rule whose capability matches and whose globs (gitignore syntax, vault-relative)
match the resource decides; a rule without `paths` matches any resource. Otherwise the
capability's default applies.
"""

from __future__ import annotations

import tomllib
from enum import StrEnum
from pathlib import Path

import pathspec
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import ConfigError
from .capability import Capability

POLICY_FILENAME = "permissions.toml"


class Effect(StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


DEFAULT_EFFECTS: dict[Capability, Effect] = {
    Capability.VAULT_READ: Effect.ALLOW,
    Capability.VAULT_WRITE: Effect.ASK,
    Capability.MEMORY_WRITE: Effect.ALLOW,
    Capability.NET: Effect.DENY,
}


class Rule(BaseModel):
    """One line of policy: `effect` for `capability` on resources matching `paths`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    capability: Capability
    effect: Effect
    paths: tuple[str, ...] = ()

    def matches(self, capability: Capability, resource: str) -> bool:
        if capability is not self.capability:
            return False
        if not self.paths:
            return True
        return pathspec.GitIgnoreSpec.from_lines(self.paths).match_file(resource)


class Policy(BaseModel):
    """Defaults per capability plus ordered rules; the first matching rule wins."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    defaults: dict[Capability, Effect] = Field(default_factory=lambda: dict(DEFAULT_EFFECTS))
    rules: tuple[Rule, ...] = ()

    def effect_for(self, capability: Capability, resource: str) -> tuple[Effect, str]:
        """The effect and a short reason naming what decided it."""
        for index, rule in enumerate(self.rules, start=1):
            if rule.matches(capability, resource):
                return rule.effect, f"policy rule {index}"
        return self.defaults.get(capability, Effect.DENY), "policy default"


def load_policy(index_dir: Path) -> Policy:
    """The policy in `index_dir/permissions.toml`, over the defaults; built-in defaults when
    the file is missing. An invalid file is a `ConfigError`, never a silent allow."""
    path = index_dir / POLICY_FILENAME
    if not path.is_file():
        return Policy()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        defaults = {**DEFAULT_EFFECTS, **data.get("defaults", {})}
        return Policy(defaults=defaults, rules=tuple(data.get("rules", ())))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "policy"
        raise ConfigError(f"{path}: {where}: {first['msg']}") from exc
