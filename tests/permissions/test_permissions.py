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
    VaultPolicy,
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


def write_policy(vault: Path, text: str, folder: str = ".vaultctx") -> Path:
    path = vault / folder / "permissions.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults_read_allowed_writes_ask_memory_allowed_net_denied(tmp_path: Path) -> None:
    policy = load_policy(tmp_path)  # no file
    assert policy.effect_for(Capability.VAULT_READ, "a.md")[0] is Effect.ALLOW
    assert policy.effect_for(Capability.VAULT_WRITE, "a.md")[0] is Effect.ASK
    assert policy.effect_for(Capability.MEMORY_WRITE, "memory:workspace")[0] is Effect.ALLOW
    assert policy.effect_for(Capability.MEMORY_ACCOUNT, "memory:account")[0] is Effect.ALLOW
    assert policy.effect_for(Capability.NET, "https://x")[0] is Effect.DENY
    assert not policy.restricts_reading


def test_path_globs_scope_rules_and_the_first_match_wins(tmp_path: Path) -> None:
    write_policy(tmp_path, INBOX_ONLY)
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
    write_policy(tmp_path, '[defaults]\n"vault.write" = "maybe"\n')
    with pytest.raises(ConfigError, match=r"permissions\.toml"):
        load_policy(tmp_path)
    write_policy(tmp_path, "[[rules]\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_policy(tmp_path)


def test_the_policy_lives_with_the_vault_wherever_the_index_is(tmp_path: Path) -> None:
    vault, elsewhere = tmp_path / "vault", tmp_path / "index"
    write_policy(vault, INBOX_ONLY)
    assert not load_policy(vault, elsewhere).readable("Private/diary.md")
    # a policy beside a separate index (where earlier versions read it) still counts…
    (vault / ".vaultctx" / "permissions.toml").unlink()
    write_policy(tmp_path, INBOX_ONLY, folder="index")
    assert not load_policy(vault, elsewhere).readable("Private/diary.md")
    # …and one in each place is an error, never one silently ignored
    write_policy(vault, "")
    with pytest.raises(ConfigError, match="two permission files"):
        load_policy(vault, elsewhere)


def test_what_the_vault_hides_is_never_readable_whatever_the_rules(tmp_path: Path) -> None:
    (tmp_path / ".vaultctxignore").write_text("Journal/\n*.draft.md\n!Keep.draft.md\n")
    write_policy(tmp_path, '[[rules]]\ncapability = "vault.read"\neffect = "allow"\n')
    policy = load_policy(tmp_path)
    assert policy.restricts_reading
    for hidden in ("Journal/2025/a.md", "Ideas/x.draft.md", ".obsidian/a.md", "A/.trash/b.md"):
        effect, reason = policy.effect_for(Capability.VAULT_READ, hidden)
        assert (effect, reason) == (Effect.DENY, "hidden or ignored (.vaultctxignore)")
        assert not policy.readable(hidden)
    assert policy.readable("Ideas/Keep.draft.md")
    assert policy.readable("Ideas/Plan.md")


def test_a_hidden_folder_is_writable_only_through_a_rule_that_names_it(tmp_path: Path) -> None:
    allow_all = '[defaults]\n"vault.write" = "allow"\n'
    write_policy(tmp_path, allow_all)
    policy = load_policy(tmp_path)
    assert policy.effect_for(Capability.VAULT_WRITE, "Inbox/a.md")[0] is Effect.ALLOW
    for hidden in (".obsidian/plugins/x/main.js", ".git/hooks/pre-commit", "A/.trash/b.md"):
        assert policy.effect_for(Capability.VAULT_WRITE, hidden)[0] is Effect.DENY
    write_policy(
        tmp_path,
        allow_all + '\n[[rules]]\ncapability = "vault.write"\neffect = "allow"\n'
        '\n[[rules]]\ncapability = "vault.write"\npaths = [".trash/**"]\neffect = "allow"\n',
    )
    policy = load_policy(tmp_path)
    assert policy.effect_for(Capability.VAULT_WRITE, ".git/config")[0] is Effect.DENY
    assert policy.effect_for(Capability.VAULT_WRITE, ".trash/old.md") == (
        Effect.ALLOW,
        "policy rule 2",
    )


def test_a_changed_rule_holds_at_the_next_look_without_reopening(tmp_path: Path) -> None:
    live = VaultPolicy(tmp_path)
    first = live.current()
    assert live.current() is first  # unchanged files are not read again
    assert live.current().readable("Private/diary.md")
    write_policy(tmp_path, INBOX_ONLY)
    assert not live.current().readable("Private/diary.md")
    (tmp_path / ".vaultctxignore").write_text("Public/\n")
    assert not live.current().readable("Public/a.md")
    (tmp_path / ".vaultctxignore").unlink()
    (tmp_path / ".vaultctx" / "permissions.toml").unlink()
    assert live.current().readable("Private/diary.md") and live.current().readable("Public/a.md")


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


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("Inbox\u2215Plan.md", "looks like a slash"),  # DIVISION SLASH
        ("Inbox\uff0fPlan.md", "looks like a slash"),  # FULLWIDTH SOLIDUS (NFKC: "/")
        ("Inbox\u2044Plan.md", "looks like a slash"),  # FRACTION SLASH
        ("~/notes.md", "'~'"),
        ("Inbox/first\nsecond.md", "control or invisible"),
        ("Inbox/a\u202egnp.md", "control or invisible"),  # a right-to-left override
        ("Inbox/", "names a folder"),
        ("Inbox/.md", "no name"),
    ],
)
def test_confine_refuses_names_that_only_look_like_paths(
    tmp_path: Path, name: str, reason: str
) -> None:
    with pytest.raises(PathOutsideVault, match=reason):
        confine(tmp_path, name)


@pytest.mark.parametrize("name", ["Café/Crème brûlée.md", "日記/2025-05-01.md", "a b/c-d_e (1).md"])
def test_confine_keeps_ordinary_names_in_any_script(tmp_path: Path, name: str) -> None:
    assert vault_relative(tmp_path, name) == name
