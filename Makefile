# RelayMQ developer entry points. Everything runs inside .venv, which `make venv`
# creates from the single workspace lockfile (uv.lock).
UV ?= $(shell command -v uv 2>/dev/null || echo $(HOME)/.local/bin/uv)
PY := .venv/bin/python
PYTEST_ARGS ?=

.PHONY: venv run test test-fast bench lint clean

venv: .venv/.synced

.venv/.synced: pyproject.toml uv.lock core/pyproject.toml $(wildcard plugins/*/pyproject.toml) bench/pyproject.toml
	@command -v uv >/dev/null 2>&1 || test -x $(HOME)/.local/bin/uv || python3 -m pip install --quiet uv || curl -LsSf https://astral.sh/uv/install.sh | sh
	$(UV) sync --all-packages --frozen || $(UV) sync --all-packages
	@touch $@

run: venv
	.venv/bin/relaymq run $(RUN_ARGS)

test: venv
	.venv/bin/python -m pytest $(PYTEST_ARGS)

test-fast: venv
	.venv/bin/python -m pytest -m "not slow" $(PYTEST_ARGS)

bench: venv
	.venv/bin/relaymq-bench suite bench/scenarios/standard.yaml

lint: venv
	.venv/bin/ruff check core plugins bench tests
	.venv/bin/mypy core/src

clean:
	rm -rf .venv .pytest_cache .mypy_cache .ruff_cache
