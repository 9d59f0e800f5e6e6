"""The permission policy, the guard and path confinement, without any model."""

from __future__ import annotations

from pathlib import Path

import pytest

from vaultctx.errors import ConfigError, PathOutsideVault, PermissionDenied
from vaultctx.permissions import (
    Capability,
    Effect,
    PermissionGuard,
    Policy,
    confine,
    load_policy,
    vault_relative,
)

INBOX_ONLY = """
[defaults]
"vault.write" = "deny"

[[rules]]
capability = "vault.write"
paths = ["Inbox/**"]
effect = "allow"

[[rules]]
capability = "vault.read"
paths = ["Private/"]
effect = "deny"
"""


def test_defaults_read_allowed_writes_ask_memory_allowed_net_denied(tmp_path: Path) -> None:
    policy = load_policy(tmp_path)  # no file
    assert policy.effect_for(Capability.VAULT_READ, "a.md")[0] is Effect.ALLOW
    assert policy.effect_for(Capability.VAULT_WRITE, "a.md")[0] is Effect.ASK
    assert policy.effect_for(Capability.MEMORY_WRITE, "memory:workspace")[0] is Effect.ALLOW
    assert policy.effect_for(Capability.NET, "https://x")[0] is Effect.DENY


def test_path_globs_scope_rules_and_the_first_match_wins(tmp_path: Path) -> None:
    (tmp_path / "permissions.toml").write_text(INBOX_ONLY)
    guard = PermissionGuard(load_policy(tmp_path))
    assert guard.require("vault.write", "Inbox/deep/new.md").effect is Effect.ALLOW
    with pytest.raises(PermissionDenied) as denied:
        guard.require("vault.write", "Projects/a.md")
    assert denied.value.to_dict() == {
        "error": "permission_denied",
        "capability": "vault.write",
        "resource": "Projects/a.md",
        "reason": "policy default",
    }
    with pytest.raises(PermissionDenied):
        guard.require("vault.read", "Private/diary.md")
    assert guard.require("vault.read", "Public/a.md").effect is Effect.ALLOW


def test_ask_goes_to_the_asker_and_is_denied_when_non_interactive() -> None:
    asked: list[tuple[str, str]] = []

    def asker(capability: str, resource: str) -> bool:
        asked.append((capability, resource))
        return resource.startswith("Inbox/")

    guard = PermissionGuard(Policy(), asker=asker)
    assert guard.require("vault.write", "Inbox/a.md").reason == "allowed when asked"
    guard.require("vault.write", "Inbox/a.md")  # remembered: asked once
    with pytest.raises(PermissionDenied, match="refused when asked"):
        guard.require("vault.write", "b.md")
    assert asked == [("vault.write", "Inbox/a.md"), ("vault.write", "b.md")]
    with pytest.raises(PermissionDenied, match="not interactive"):
        PermissionGuard(Policy()).require("vault.write", "Inbox/a.md")


def test_a_restricted_guard_denies_other_capabilities_whatever_the_policy() -> None:
    allow_all = Policy(defaults={c: Effect.ALLOW for c in Capability})
    guard = PermissionGuard(allow_all).restricted({Capability.VAULT_READ})
    assert guard.require("vault.read", "a.md")
    with pytest.raises(PermissionDenied, match="not available"):
        guard.require("memory.write", "memory:workspace")


def test_an_invalid_policy_file_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "permissions.toml").write_text('[defaults]\n"vault.write" = "maybe"\n')
    with pytest.raises(ConfigError, match=r"permissions\.toml"):
        load_policy(tmp_path)
    (tmp_path / "permissions.toml").write_text("[[rules]\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_policy(tmp_path)


@pytest.mark.parametrize(
    "path",
    ["../x.md", "a/../../x.md", "/etc/passwd", "C:\\x.md", "", ".vaultctx/index.db", "a/.."],
)
def test_confine_refuses_escapes(tmp_path: Path, path: str) -> None:
    with pytest.raises(PathOutsideVault):
        confine(tmp_path, path)


def test_confine_follows_symlinks_and_refuses_those_leading_out(tmp_path: Path) -> None:
    vault, outside = tmp_path / "vault", tmp_path / "outside"
    (vault / "notes").mkdir(parents=True)
    outside.mkdir()
    (vault / "out").symlink_to(outside, target_is_directory=True)
    (vault / "in").symlink_to(vault / "notes", target_is_directory=True)
    (vault / "secret.md").symlink_to(outside / "secret.md")
    with pytest.raises(PathOutsideVault, match="symlink"):
        confine(vault, "out/new.md")
    with pytest.raises(PathOutsideVault):
        confine(vault, "secret.md")
    assert vault_relative(vault, "in/a.md") == "notes/a.md"
    assert vault_relative(vault, "Inbox\\New.md") == "Inbox/New.md"
