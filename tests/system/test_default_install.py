"""What the default install declares: no torch, no CUDA, no sentence-transformers and no
model client (litellm is the `llm` extra), while the developer install, which CI runs the
tests in, holds every extra the tests need. `.ci/run` checks a real fresh install as well;
`benchmarks/install_bench.py` measures it."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
HEAVY = {"torch", "sentence-transformers", "transformers", "litellm", "triton"}
# the Hugging Face hub client chain: the bundled model's tokenizer is vaultctx's own
HUB = {"tokenizers", "huggingface-hub", "hf-xet"}


def project() -> dict:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]


def names(requirements: list[str]) -> set[str]:
    return {Requirement(r).name.lower() for r in requirements}


def test_the_default_install_declares_no_torch_and_no_model_client() -> None:
    declared = names(project()["dependencies"])
    assert not declared & HEAVY
    assert not {n for n in declared if n.startswith("nvidia-")}
    assert {"onnxruntime", "numpy"} <= declared  # the bundled model runs on these
    assert not declared & HUB


def test_the_extras_that_run_tokenizers_declare_it() -> None:
    extras = project()["optional-dependencies"]
    assert "tokenizers" in names(extras["export"])  # other models' tokenizers
    assert "tokenizers" in names(extras["multilingual"])  # e5's Unigram tokenizer
    torch = [Requirement(r) for r in extras["torch"]]
    assert any(r.name == "vaultctx" and "export" in r.extras for r in torch)


def test_the_llm_extra_is_litellm_and_the_dev_install_has_it() -> None:
    extras = project()["optional-dependencies"]
    assert names(extras["llm"]) == {"litellm"}
    dev = [Requirement(r) for r in extras["dev"]]
    assert any(r.name == "vaultctx" and "llm" in r.extras for r in dev)
