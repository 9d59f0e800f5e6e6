"""Destinations: where a note's text goes (a client, a model on this machine, a model
elsewhere), and read rules that name them."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vaultctx.errors import ConfigError
from vaultctx.permissions import (
    Capability,
    Destination,
    Effect,
    Policy,
    Rule,
    destination_of,
    load_policy,
)

CLIENT, LOCAL, REMOTE = Destination.CLIENT, Destination.LOCAL_MODEL, Destination.REMOTE_MODEL


# --- destination_of ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "api_base",
    [
        "http://127.0.0.1:8080/v1",
        "http://localhost:11434",
        "https://LOCALHOST/",
        "http://127.8.9.10",
        "http://[::1]:8000/v1",
        "localhost:1234",
        "http://user:secret@127.0.0.1:9/v1",
    ],
)
def test_an_endpoint_on_a_loopback_host_is_a_local_model(api_base: str) -> None:
    assert destination_of("openai/anything", api_base, environ={}) is LOCAL


@pytest.mark.parametrize(
    "api_base",
    [
        "https://api.openai.com/v1",
        "http://192.168.1.20:11434",
        "http://0.0.0.0:8000",
        "http://localhost.example.com",
        "http://127.0.0.1.example.com/v1",
        "http://[fe80::1]:80",
        "not a url at all",
        "http://[broken",
    ],
)
def test_any_other_endpoint_is_a_remote_model(api_base: str) -> None:
    assert destination_of("ollama/qwen2.5:0.5b", api_base, environ={}) is REMOTE


def test_a_local_provider_without_an_endpoint_runs_on_this_machine() -> None:
    assert destination_of("ollama/qwen2.5:0.5b", None, environ={}) is LOCAL
    assert destination_of("ollama_chat/llama3", None, environ={}) is LOCAL


def test_a_local_provider_sent_elsewhere_by_its_variable_is_remote() -> None:
    away = {"OLLAMA_API_BASE": "https://ollama.example.com"}
    home = {"OLLAMA_API_BASE": "http://127.0.0.1:11434"}
    assert destination_of("ollama/qwen2.5:0.5b", None, environ=away) is REMOTE
    assert destination_of("ollama/qwen2.5:0.5b", None, environ=home) is LOCAL


@pytest.mark.parametrize("model", ["openai/gpt-4o-mini", "anthropic/claude", "gpt-4o", ""])
def test_a_hosted_provider_without_an_endpoint_is_remote(model: str) -> None:
    assert destination_of(model, None, environ={}) is REMOTE


# --- rules that name destinations ----------------------------------------------------------

HEALTH_REMOTE_DENIED = Policy(
    rules=(
        Rule(
            capability=Capability.VAULT_READ,
            paths=("Health/**",),
            destinations=(REMOTE,),
            effect=Effect.DENY,
        ),
    )
)


def test_a_rule_for_remote_models_keeps_a_folder_from_them_only() -> None:
    policy = HEALTH_REMOTE_DENIED
    assert policy.readable("Health/blood.md", CLIENT)
    assert policy.readable("Health/blood.md", LOCAL)
    assert not policy.readable("Health/blood.md", REMOTE)
    assert policy.readable("Garden/roses.md", REMOTE)
    assert policy.readable("Health/blood.md"), "a client is the destination by default"


def test_which_rule_decided_is_named_per_destination() -> None:
    policy = HEALTH_REMOTE_DENIED
    read = Capability.VAULT_READ
    assert policy.effect_for(read, "Health/a.md", REMOTE) == (Effect.DENY, "policy rule 1")
    assert policy.effect_for(read, "Health/a.md", LOCAL) == (Effect.ALLOW, "policy default")


def test_reading_is_restricted_only_where_a_rule_restricts_it() -> None:
    policy = HEALTH_REMOTE_DENIED
    assert policy.restricts_reading_for(REMOTE)
    assert not policy.restricts_reading_for(LOCAL)
    assert not policy.restricts_reading and not policy.restricts_reading_for(CLIENT)


def test_model_stands_for_both_model_destinations() -> None:
    rule = Rule(capability=Capability.VAULT_READ, effect=Effect.DENY, destinations=["model"])
    assert set(rule.destinations) == {LOCAL, REMOTE}
    single = Rule(capability=Capability.VAULT_READ, effect=Effect.DENY, destinations="client")
    assert single.destinations == (CLIENT,)


def test_a_policy_file_keeps_a_folder_from_every_model_but_shows_it_in_search(
    tmp_path: Path,
) -> None:
    (tmp_path / ".vaultctx").mkdir()
    (tmp_path / ".vaultctx" / "permissions.toml").write_text(
        '[[rules]]\ncapability = "vault.read"\npaths = ["Diary/**"]\n'
        'destinations = ["model"]\neffect = "deny"\n',
        encoding="utf-8",
    )
    policy = load_policy(tmp_path)
    assert policy.readable("Diary/2024.md")
    assert not policy.readable("Diary/2024.md", LOCAL)
    assert not policy.readable("Diary/2024.md", REMOTE)


def test_an_unknown_destination_is_a_config_error_naming_the_field(tmp_path: Path) -> None:
    (tmp_path / ".vaultctx").mkdir()
    (tmp_path / ".vaultctx" / "permissions.toml").write_text(
        '[[rules]]\ncapability = "vault.read"\ndestinations = ["the_cloud"]\neffect = "deny"\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match=r"rules\.0\.destinations"):
        load_policy(tmp_path)


destinations = st.sampled_from(list(Destination))
rule_destinations = st.lists(st.sampled_from([*Destination, "model"]), max_size=3).map(tuple)
folders = st.sampled_from(["Health", "Garden", "Work", "Diary"])
effects = st.sampled_from([Effect.ALLOW, Effect.DENY, Effect.ASK])


def expected(
    rules: list[tuple[str, tuple[str, ...], Effect]], folder: str, destination: Destination
) -> Effect:
    """The rule semantics, written out: the first rule on the folder whose destinations
    (none: all; "model": both models) include the one asked about."""
    for rule_folder, names, effect in rules:
        covered = {d for name in names for d in ((LOCAL, REMOTE) if name == "model" else (name,))}
        if rule_folder == folder and (not names or destination in covered):
            return effect
    return Effect.ALLOW


@given(
    rules=st.lists(st.tuples(folders, rule_destinations, effects), max_size=6),
    folder=folders,
    destination=destinations,
)
def test_the_first_rule_for_the_path_and_destination_decides(
    rules: list[tuple[str, tuple[str, ...], Effect]], folder: str, destination: Destination
) -> None:
    policy = Policy(
        rules=tuple(
            Rule(
                capability=Capability.VAULT_READ,
                paths=(f"{f}/**",),
                destinations=names,
                effect=effect,
            )
            for f, names, effect in rules
        )
    )
    path = f"{folder}/note.md"
    want = expected(rules, folder, destination)
    assert policy.effect_for(Capability.VAULT_READ, path, destination)[0] is want
    assert policy.readable(path, destination) is (want is Effect.ALLOW)
    # asked again, the remembered answer is the same, and per destination
    assert policy.readable(path, destination) is (want is Effect.ALLOW)
    for other in Destination:
        assert policy.readable(path, other) is (expected(rules, folder, other) is Effect.ALLOW)
    if any(
        expected(rules, f, destination) is not Effect.ALLOW
        for f in ("Health", "Garden", "Work", "Diary")
    ):
        assert policy.restricts_reading_for(destination)
