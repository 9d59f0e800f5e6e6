# Two commands on a fresh machine: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
VAULT ?= examples/vault
QUERY ?= when should I treat the hives for varroa mites

export HF_HUB_OFFLINE := 1
export LITELLM_LOCAL_MODEL_COST_MAP := True
export TOKENIZERS_PARALLELISM := false

.PHONY: install demo test test-fast lint bench clean

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $@

install: $(VENV)/.installed

demo: install
	$(VENV)/bin/vaultctx index $(VAULT)
	$(VENV)/bin/vaultctx select "$(QUERY)" --vault $(VAULT) -k 5

test: install
	$(PY) -m pytest -q

test-fast: install
	$(PY) -m pytest -q -m "not slow"

lint: install
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks
	$(VENV)/bin/lint-imports

bench: install
	$(PY) benchmarks/index_bench.py
	$(PY) benchmarks/select_bench.py
	$(PY) benchmarks/eval.py

clean:
	rm -rf $(VENV) $(VAULT)/.vaultctx
