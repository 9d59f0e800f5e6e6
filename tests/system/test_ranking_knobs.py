"""The tables of ranking knobs (in `pipeline/note_ranking.py` and `memory/ranking.py`) are
true: every entry names a real knob with the default it states, and every numeric constant
on the select and memory paths has an entry, so none goes unexplained."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from types import ModuleType

import pytest

from vaultctx.config import Config

TABLES = ("vaultctx.pipeline.note_ranking", "vaultctx.memory.ranking")
ON_THE_PATH = (
    "pipeline/note_ranking.py",
    "pipeline/select.py",
    "pipeline/retrievers.py",
    "pipeline/candidates.py",
    "pipeline/graphwalk.py",
    "pipeline/gate.py",
    "search/query.py",
    "search/vectors.py",
    "search/fusion.py",
    "search/hybrid.py",
    "storage/graph.py",
    "memory/ranking.py",
    "memory/store.py",
    "memory/merging.py",
    "memory/turn_context.py",
    "memory/service.py",
    "memory/extract.py",
    "memory/background.py",
)
NOT_KNOBS = {
    "DEFAULT_RRF_K": "`rrf_k`'s default, read from Config",
    "DAY": "a unit",
}
ENTRY = re.compile(r"^(\w+) = (.+?)  \((\S+\.py)\)$", re.MULTILINE)


def entries(module: str) -> list[tuple[str, str, str]]:
    found = ENTRY.findall(importlib.import_module(module).__doc__ or "")
    assert found, f"{module} has no table of knobs"
    return found


def module_of(file: str) -> ModuleType:
    return importlib.import_module("vaultctx." + file.removesuffix(".py").replace("/", "."))


def assigned(module: ModuleType) -> list[str]:
    """The public upper-case names the module's own file assigns (not those it imports)."""
    tree = ast.parse(inspect.getsource(module))
    names = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        names += [t.id for t in targets if isinstance(t, ast.Name)]
    return [n for n in names if n.isupper() and not n.startswith("_")]


def is_knob(value: object) -> bool:
    numbers = (int, float)
    if isinstance(value, bool):
        return False
    if isinstance(value, numbers):
        return True
    if isinstance(value, tuple):
        return bool(value) and all(isinstance(v, numbers) for v in value)
    if isinstance(value, dict):
        return bool(value) and all(isinstance(v, numbers) for v in value.values())
    return False


@pytest.mark.parametrize("table", TABLES)
def test_every_entry_names_a_real_knob_with_its_default(table):
    for name, default, file in entries(table):
        if file == "config.py":
            actual = Config.model_fields[name].default
        else:
            actual = getattr(module_of(file), name)
        assert actual == ast.literal_eval(default), f"{name} in {file} is {actual!r}"


def test_every_constant_on_the_select_and_memory_paths_has_an_entry():
    tabled = {(name, file) for table in TABLES for name, _, file in entries(table)}
    missing = [
        f"{file}: {name}"
        for file in ON_THE_PATH
        for name in assigned(module_of(file))
        if is_knob(getattr(module_of(file), name)) and name not in NOT_KNOBS
        and (name, file) not in tabled
    ]  # fmt: skip
    assert not missing, "knobs without a table entry: " + ", ".join(missing)


def test_a_setting_is_tabled_where_its_ranking_lives():
    """Every weight and half-life in Config appears in a table, so a newcomer looking for
    "lexical evidence should count more" or "memories should fade faster" finds it."""
    tabled = {name for table in TABLES for name, _, file in entries(table) if file == "config.py"}
    ranking = {k for k in Config.model_fields if k.startswith(("weight_", "memory_half_life"))}
    assert ranking | {"rrf_k"} <= tabled
