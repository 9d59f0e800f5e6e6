"""The permission policy: a default effect per capability, then path-glob rules.

`<vault>/.vaultctx/permissions.toml` (with the vault's config, wherever the index lives):

    [defaults]
    "vault.write" = "deny"

    [[rules]]
    capability = "vault.write"
    paths = ["Inbox/**"]
    effect = "allow"

    [[rules]]
    capability = "vault.read"
    paths = ["Health/**"]
    destinations = ["remote_model"]     # or "local_model", "client", "model" (both models)
    effect = "deny"

The first rule whose capability matches, whose globs (gitignore syntax, vault-relative)
match the resource and whose destinations include where the text goes decides; a rule
without `paths` matches any resource, one without `destinations` every destination.
Otherwise the capability's default applies. Two things come before the rules: what the vault hides
(dot-folders, `.vaultctxignore`) is never readable, and a hidden folder is writable only
through a rule that names it by path.
"""

from __future__ import annotations

import threading
import tomllib
from enum import StrEnum
from functools import cached_property
from pathlib import Path

import pathspec
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from ..config import CONFIG_DIRNAME
from ..errors import ConfigError
from ..storage.scanner import IGNORE_FILENAME, excluded, ignore_lines
from .capability import Capability
from .destination import MODEL_DESTINATIONS, Destination

POLICY_FILENAME = "permissions.toml"


class Effect(StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


DEFAULT_EFFECTS: dict[Capability, Effect] = {
    Capability.VAULT_READ: Effect.ALLOW,
    Capability.VAULT_WRITE: Effect.ASK,
    Capability.MEMORY_WRITE: Effect.ALLOW,
    Capability.MEMORY_ACCOUNT: Effect.ALLOW,
    Capability.NET: Effect.DENY,
}
HIDDEN_OR_IGNORED = "hidden or ignored (.vaultctxignore)"
HIDDEN_FOLDER = "a hidden folder: only a rule that names it by path allows writing there"


class Rule(BaseModel):
    """One line of policy: `effect` for `capability` on resources matching `paths`, when
    what they hold goes to one of `destinations` (none: to any)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    capability: Capability
    effect: Effect
    paths: tuple[str, ...] = ()
    destinations: tuple[Destination, ...] = ()

    @field_validator("destinations", mode="before")
    @classmethod
    def _model_shorthand(cls, value: object) -> object:
        """`"model"` stands for both model destinations; a single name for a list of one."""
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, list | tuple):
            return value
        expanded: list[object] = []
        for name in names:
            for one in MODEL_DESTINATIONS if name == "model" else (name,):
                if one not in expanded:
                    expanded.append(one)
        return tuple(expanded)

    @cached_property
    def spec(self) -> pathspec.PathSpec:
        return pathspec.GitIgnoreSpec.from_lines(self.paths)

    def applies_to(self, destination: Destination) -> bool:
        return not self.destinations or destination in self.destinations

    def matches(
        self, capability: Capability, resource: str, destination: Destination = Destination.CLIENT
    ) -> bool:
        if capability is not self.capability or not self.applies_to(destination):
            return False
        return not self.paths or self.spec.match_file(resource)


class Policy(BaseModel):
    """Defaults per capability plus ordered rules; the first matching rule wins. `ignore`
    holds the vault's `.vaultctxignore` patterns: what they match is never readable."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    defaults: dict[Capability, Effect] = Field(default_factory=lambda: dict(DEFAULT_EFFECTS))
    rules: tuple[Rule, ...] = ()
    ignore: tuple[str, ...] = ()
    _readable: dict[tuple[str, Destination], bool] = PrivateAttr(default_factory=dict)
    _restricts: dict[Destination, bool] = PrivateAttr(default_factory=dict)

    @cached_property
    def ignore_spec(self) -> pathspec.PathSpec | None:
        return pathspec.GitIgnoreSpec.from_lines(self.ignore) if self.ignore else None

    def effect_for(
        self,
        capability: Capability,
        resource: str,
        destination: Destination = Destination.CLIENT,
    ) -> tuple[Effect, str]:
        """The effect and a short reason naming what decided it ("policy rule 2", "policy
        default", …): what the audit log keeps of why a note reached a model."""
        if capability is Capability.VAULT_READ and excluded(self.ignore_spec, resource):
            return Effect.DENY, HIDDEN_OR_IGNORED
        hidden = capability is Capability.VAULT_WRITE and excluded(None, resource)
        for index, rule in enumerate(self.rules, start=1):
            if rule.matches(capability, resource, destination) and not (hidden and not rule.paths):
                return rule.effect, f"policy rule {index}"
        if hidden:
            return Effect.DENY, HIDDEN_FOLDER
        return self.defaults.get(capability, Effect.DENY), "policy default"

    def readable(self, path: str, destination: Destination = Destination.CLIENT) -> bool:
        """Whether the note at `path` may go to `destination` without asking anyone: the
        one read decision of every door. Remembered per path and destination: a policy
        never changes."""
        key = (path, destination)
        allowed = self._readable.get(key)
        if allowed is None:
            effect = self.effect_for(Capability.VAULT_READ, path, destination)[0]
            allowed = self._readable[key] = effect is Effect.ALLOW
        return allowed

    def restricts_reading_for(self, destination: Destination) -> bool:
        """Whether any indexed note can be unreadable at `destination`. The index holds no
        hidden paths (the scan skips them), so without ignore patterns and read rules for
        that destination that allow less than everything, every note is readable there and
        nothing needs checking."""
        restricts = self._restricts.get(destination)
        if restricts is None:
            read = Capability.VAULT_READ
            restricts = bool(self.ignore) or any(
                effect is not Effect.ALLOW
                for effect in (
                    self.defaults.get(read, Effect.DENY),
                    *(
                        r.effect
                        for r in self.rules
                        if r.capability is read and r.applies_to(destination)
                    ),
                )
            )
            self._restricts[destination] = restricts
        return restricts

    @property
    def restricts_reading(self) -> bool:
        """`restricts_reading_for` a client."""
        return self.restricts_reading_for(Destination.CLIENT)


def policy_paths(vault_root: Path, index_dir: Path | None = None) -> list[Path]:
    """Where a policy file may be: beside the vault's config, and in a separate index dir
    (where earlier versions read it)."""
    paths = [vault_root / CONFIG_DIRNAME / POLICY_FILENAME]
    if index_dir is not None and index_dir.resolve() != paths[0].parent.resolve():
        paths.append(index_dir / POLICY_FILENAME)
    return paths


def load_policy(vault_root: Path, index_dir: Path | None = None) -> Policy:
    """The vault's policy over the defaults, with its `.vaultctxignore`; built-in defaults
    when there is no policy file. An invalid file, or one in each place, is a `ConfigError`,
    never a silent allow."""
    found = [p for p in policy_paths(vault_root, index_dir) if p.is_file()]
    if len(found) > 1:
        raise ConfigError(
            f"two permission files, {found[0]} and {found[1]}: keep one, in {found[0].parent}"
        )
    ignore = ignore_lines(vault_root)
    if not found:
        return Policy(ignore=ignore)
    path = found[0]
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        defaults = {**DEFAULT_EFFECTS, **data.get("defaults", {})}
        return Policy(defaults=defaults, rules=tuple(data.get("rules", ())), ignore=ignore)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "policy"
        raise ConfigError(f"{path}: {where}: {first['msg']}") from exc


class VaultPolicy:
    """A vault's policy as its files say now: `current()` reads them again when
    `permissions.toml` or `.vaultctxignore` changed, so an edited rule holds from the next
    query on, also in a server that runs for days. A stat of each file per call."""

    def __init__(self, vault_root: Path, index_dir: Path | None = None) -> None:
        self.vault_root = vault_root
        self.index_dir = index_dir
        self._files = [*policy_paths(vault_root, index_dir), vault_root / IGNORE_FILENAME]
        self._loaded: tuple[tuple[tuple[int, int, int] | None, ...], Policy] | None = None
        self._lock = threading.Lock()

    def current(self) -> Policy:
        signature = tuple(_signature(path) for path in self._files)
        loaded = self._loaded
        if loaded is None or loaded[0] != signature:
            with self._lock:
                policy = load_policy(self.vault_root, self.index_dir)
                self._loaded = loaded = (signature, policy)
        return loaded[1]


class PersonPolicy(VaultPolicy):
    """The vault's policy for one person of a team: the notes their `deny` globs match are
    unreadable to them, before any rule of the vault's (which still holds for the rest).
    The same `Policy` object comes back while the vault's files stay the same, so what a
    select caches per policy stays valid."""

    def __init__(
        self, vault_root: Path, index_dir: Path | None = None, deny: tuple[str, ...] = ()
    ) -> None:
        super().__init__(vault_root, index_dir)
        self.deny = Rule(capability=Capability.VAULT_READ, effect=Effect.DENY, paths=deny)
        self._derived: tuple[Policy, Policy] | None = None

    def current(self) -> Policy:
        base = super().current()
        derived = self._derived
        if not self.deny.paths:
            return base
        if derived is None or derived[0] is not base:
            # A new Policy, not a copy: a copy would share the base's remembered answers.
            policy = Policy(
                defaults=base.defaults, rules=(self.deny, *base.rules), ignore=base.ignore
            )
            self._derived = derived = (base, policy)
        return derived[1]


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino
