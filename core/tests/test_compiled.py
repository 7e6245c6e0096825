"""relaymq.compiled: a source edited after the build wins over its stale extension."""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from relaymq import compiled
from relaymq.testing.requirements import NOT_APPLICABLE

SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def _package(tmp_path: Path, name: str, extension_age: float) -> Path:
    """A package whose `mod` has a source and an "extension" that is not loadable:
    importing the extension fails, so a successful import proves the source ran."""
    pkg = tmp_path / name
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    for mod in (pkg / "mod", pkg / "sub" / "inner"):
        mod.with_suffix(".py").write_text("WHERE = 'source'\n")
        ext = mod.parent / (mod.name + SUFFIX)
        ext.write_bytes(b"not an extension")
        t = time.time() + extension_age
        os.utime(ext, (t, t))
    return pkg


@pytest.fixture
def isolated_imports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(compiled.PURE_ENV, raising=False)
    before = list(sys.meta_path)
    yield
    sys.meta_path[:] = before
    for name in [n for n in sys.modules if n.startswith("cpkg_")]:
        del sys.modules[name]


def test_stale_extension_falls_back_to_the_source(tmp_path: Path, isolated_imports) -> None:  # type: ignore[no-untyped-def]
    pkg = _package(tmp_path, "cpkg_stale", extension_age=-60)
    status = compiled.select("cpkg_stale", str(pkg))
    assert status.startswith("pure Python") and "changed after the build" in status
    assert importlib.import_module("cpkg_stale.mod").WHERE == "source"
    assert importlib.import_module("cpkg_stale.sub.inner").WHERE == "source"
    assert compiled.status()["cpkg_stale"] == status


def test_current_extension_is_preferred(tmp_path: Path, isolated_imports) -> None:  # type: ignore[no-untyped-def]
    pkg = _package(tmp_path, "cpkg_current", extension_age=+60)
    assert compiled.select("cpkg_current", str(pkg)) == "compiled (2 modules)"
    # Python's own finder picks the extension, which here is not loadable
    with pytest.raises(ImportError):
        importlib.import_module("cpkg_current.mod")


def test_pure_python_on_request(tmp_path: Path, isolated_imports,  # type: ignore[no-untyped-def]
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(compiled.PURE_ENV, "1")
    pkg = _package(tmp_path, "cpkg_pure", extension_age=+60)
    assert compiled.select("cpkg_pure", str(pkg)) == f"pure Python ({compiled.PURE_ENV} is set)"
    assert importlib.import_module("cpkg_pure.mod").WHERE == "source"


def test_package_without_extensions(tmp_path: Path, isolated_imports) -> None:  # type: ignore[no-untyped-def]
    pkg = tmp_path / "cpkg_plain"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    assert compiled.select("cpkg_plain", str(pkg)) == "pure Python"


def test_the_kernel_reports_how_it_runs() -> None:
    import relaymq.dispatch.queue as queue

    status = compiled.status()["relaymq"]
    assert status.startswith("compiled") == compiled.is_compiled(queue)


# CI builds the per-message modules (`make compile` with --strict) and then sets
# RELAYMQ_REQUIRE_COMPILED=1: from then on a module that runs interpreted (a source
# newer than its extension, a failed or missing build) fails the run instead of
# quietly testing pure Python under the compiled run's name.
REQUIRE_COMPILED_ENV = "RELAYMQ_REQUIRE_COMPILED"
ROOT = Path(__file__).resolve().parents[2]


def _per_message_modules() -> list[str]:
    import tomllib

    names = []
    for pyproject in sorted([ROOT / "core" / "pyproject.toml", *ROOT.glob("plugins/*/pyproject.toml")]):
        config = tomllib.loads(pyproject.read_text())
        for path in config.get("tool", {}).get("relaymq", {}).get("compile", {}).get("modules", []):
            names.append(path.removesuffix(".py").replace("/", "."))
    return names


def test_per_message_modules_are_listed_and_importable() -> None:
    names = _per_message_modules()
    assert "relaymq.dispatch.queue" in names and "relaymq_stomp.codec" in names
    for name in names:
        module = importlib.import_module(name)
        package = name.split(".")[0]
        assert compiled.status()[package].startswith("compiled") == compiled.is_compiled(module), name


@pytest.mark.skipif(not os.environ.get(REQUIRE_COMPILED_ENV),
                    reason=f"{NOT_APPLICABLE}{REQUIRE_COMPILED_ENV} is not set (the pure run or a local run)")
def test_the_compiled_run_runs_every_per_message_module_compiled() -> None:
    assert not os.environ.get(compiled.PURE_ENV), f"{compiled.PURE_ENV} is set in the compiled run"
    interpreted = [name for name in _per_message_modules()
                   if not compiled.is_compiled(importlib.import_module(name))]
    status = {p: s for p, s in compiled.status().items() if not s.startswith("compiled")}
    assert not interpreted, f"running interpreted in the compiled run: {interpreted}; {status}"


def _built() -> bool:
    """Every package that compiles modules has been built (`make compile`)."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import compile_hot_paths as chp
    finally:
        sys.path.pop(0)
    return all((ROOT / p / "src" / chp.STAMP).exists() for p in chp.PACKAGES)


@pytest.mark.skipif(bool(os.environ.get(compiled.PURE_ENV)),
                    reason=f"{NOT_APPLICABLE}{compiled.PURE_ENV} is set")
def test_every_compiled_module_imports_in_a_fresh_interpreter() -> None:
    """What the suite's one process can hide: a compiled module that needs what another
    imported first, or looks up a TYPE_CHECKING-only name at import (tools/lint_compiled.py)."""
    require = bool(os.environ.get(REQUIRE_COMPILED_ENV))
    if not require and not _built():
        pytest.skip(f"{NOT_APPLICABLE}the per-message modules are not built (make compile)")
    args = [] if require else ["--allow-interpreted"]
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "check_compiled_imports.py"), *args],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "importing in a fresh interpreter" in run.stdout
