"""Install the fixture plugin packages in tests/fixtures into temporary directories.

The tests then run Python in a subprocess with ``PYTHONPATH`` pointing there:
discovery reads installed distributions' metadata, so the only honest test is a
really installed package, and a subprocess keeps this test process's entry-point
caches out of it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures"


def _installer() -> list[str]:
    # `make venv` installs uv into .tools/ on a machine that has none
    uv = shutil.which("uv") or next(
        (str(p) for p in (ROOT / ".tools/bin/uv", Path.home() / ".local/bin/uv",
                          Path.home() / ".cargo/bin/uv") if p.exists()),
        None,
    )
    if uv:
        return [uv, "pip", "install", "--python", sys.executable]
    probe = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True)
    if probe.returncode == 0:
        return [sys.executable, "-m", "pip", "install", "--quiet"]
    pytest.skip("neither uv nor pip is available to install the fixture plugins")


def install(target: Path, *fixtures: str) -> Path:
    cmd = [*_installer(), "--no-deps", "--target", str(target),
           *(str(FIXTURES / name) for name in fixtures)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}"
    return target


def run_python(site: Path, code: str, *args: str, module: bool = False,
               timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``code`` (or ``-m code``) with ``site`` on PYTHONPATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    argv = [sys.executable, "-m", code, *args] if module else [sys.executable, "-c", code, *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)


@pytest.fixture(scope="session")
def example_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """relaymq-example installed alone."""
    return install(tmp_path_factory.mktemp("example-site"), "example_plugin")


@pytest.fixture(scope="session")
def troubled_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two distributions claiming one name, and one whose import fails."""
    return install(tmp_path_factory.mktemp("troubled-site"),
                   "conflict_plugin_a", "conflict_plugin_b", "broken_plugin")
