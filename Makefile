# RelayMQ developer entry points. Everything runs inside .venv, which `make venv`
# creates from the single workspace lockfile (uv.lock).
# uv is looked up when the venv is made, not when make starts: on a fresh machine
# the recipe installs it first (pip, else the official installer) and then finds it.
UV ?= uv
PY := .venv/bin/python
PYTEST_ARGS ?=
COMPILE_ARGS ?=
# type-checked by `make lint`: the kernel, and the plugins against the kernel's types
# (relaymq ships py.typed)
MYPY_PATHS := core/src $(wildcard plugins/*/src)

.PHONY: venv compile run test test-fast test-pure bench lint clean wheels

venv: .venv/.synced

.venv/.synced: pyproject.toml uv.lock core/pyproject.toml $(wildcard plugins/*/pyproject.toml) bench/pyproject.toml
	@set -e; uv="$$(command -v $(UV) 2>/dev/null || true)"; \
	if [ -z "$$uv" ] && [ -x .tools/bin/uv ]; then uv=.tools/bin/uv; fi; \
	if [ -z "$$uv" ]; then \
	  echo "uv not found: installing it into .tools/ (a project-local environment; rm -rf .tools removes it)"; \
	  python3 -m venv .tools && .tools/bin/python -m pip install --quiet uv; uv=.tools/bin/uv; \
	fi; \
	echo "$$uv sync --all-packages --frozen --compile-bytecode"; \
	$$uv sync --all-packages --frozen --compile-bytecode || $$uv sync --all-packages --compile-bytecode
	$(BYTECODE)
	@touch $@

# Bytecode (.pyc) for the workspace's own sources, and (uv sync --compile-bytecode) for
# every installed distribution: Python reads .pyc files even where it may not write them
# (PYTHONDONTWRITEBYTECODE=1, read-only installs), and without them every `relaymq`
# process compiles ~700 modules from source first, which doubles `relaymq run`'s time
# to listen (docs/operations.md#start-up-time). Stale files are only ignored, never wrong.
BYTECODE = $(PY) -m compileall -q core/src $(wildcard plugins/*/src)

# Per-message modules as C extensions (mypyc); a no-op when nothing changed, and
# without a C compiler the packages stay pure Python (tools/compile_hot_paths.py).
compile: venv
	$(PY) tools/compile_hot_paths.py $(COMPILE_ARGS)
	$(BYTECODE)

# The built-in default: AMQP 127.0.0.1:5672 and STOMP 127.0.0.1:61613, kahaDB in ./data/kahadb,
# no authentication (any user name is accepted): RUN_ARGS="--config conf/activemq.xml" to change it.
run: compile
	.venv/bin/relaymq run $(RUN_ARGS)

# sdists, pure wheels and compiled platform wheels of every package into dist/
wheels: compile
	$(PY) tools/build_wheels.py --out dist

# pytest keeps the test modules it rewrote for its assertions in __pycache__, unless
# PYTHONDONTWRITEBYTECODE is set: then every run rewrites about 700 modules again (15-20 s
# of each run). The runs below let it keep them; the sources' own bytecode is `make`'s.
PYTEST := env -u PYTHONDONTWRITEBYTECODE .venv/bin/python -m pytest
# Two pytest-xdist workers: each peer (PostgreSQL, ActiveMQ, RabbitMQ, Spark) still
# starts once, on one worker (relaymq.testing.parallel); XDIST= runs in one process.
XDIST ?= -n 2 --dist loadgroup

test: compile
	$(PYTEST) $(XDIST) $(PYTEST_ARGS)

test-fast: compile
	$(PYTEST) $(XDIST) -m "not slow" $(PYTEST_ARGS)

# the same sources interpreted, as a checkout runs them before `make compile`; the tests
# against another system (PostgreSQL, ActiveMQ, RabbitMQ, Spark, a browser) run on the
# compiled build only (relaymq.testing.external, docs/testing.md)
test-pure: venv
	$(BYTECODE)
	RELAYMQ_PURE_PYTHON=1 $(PYTEST) $(XDIST) -m "not slow and not external" $(PYTEST_ARGS)

bench: compile
	.venv/bin/relaymq-bench suite bench/scenarios/standard.yaml

lint: venv
	.venv/bin/ruff check core plugins bench tests tools
	.venv/bin/mypy $(MYPY_PATHS)
	$(PY) tools/lint_tests.py
	$(PY) tools/lint_compiled.py

clean:
	-$(PY) tools/compile_hot_paths.py --clean
	rm -rf .venv .tools .pytest_cache .mypy_cache .ruff_cache dist
