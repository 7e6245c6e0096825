"""Import every compiled per-message module of every package, each in a fresh interpreter.

    .venv/bin/python tools/check_compiled_imports.py [--jobs N] [--allow-interpreted] [PACKAGE_DIR ...]

Run it after `make compile` (`tools/compile_hot_paths.py`). A module passes when it
imports in an interpreter that has imported nothing else of RelayMQ before it
and it runs as its C extension (`relaymq.compiled.is_compiled`). A fresh
interpreter per module is the point: a compiled module that needs at import
what another module happened to import first, or that looks up at import a name
the source binds only under `TYPE_CHECKING` (a dataclass field's class, see
docs/compiled-modules.md), fails here even when the test suite, which imports
everything in one process, passes. `--allow-interpreted` only asks for the import
(a module whose source changed after the build runs interpreted, see
`relaymq.compiled`).

Exit status 1 and one line per failing module when anything fails;
`core/tests/test_compiled.py` runs it in the compiled CI run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compile_hot_paths as chp  # noqa: E402

PROBE = """
import importlib, sys
from relaymq import compiled
module = importlib.import_module(sys.argv[1])
if sys.argv[2] == "require" and not compiled.is_compiled(module):
    package = sys.argv[1].split(".")[0]
    sys.exit(f"runs interpreted: {compiled.status().get(package)}")
"""


def modules(packages: list[Path]) -> list[str]:
    names = []
    for package in packages:
        for path in chp._modules(package):
            names.append(path.removesuffix(".py").replace("/", "."))
    return names


def probe(name: str, require_compiled: bool = True) -> str | None:
    """None when `name` imports (compiled, if required) in a fresh interpreter, else why not."""
    env = {k: v for k, v in os.environ.items() if k != "RELAYMQ_PURE_PYTHON"}
    result = subprocess.run([sys.executable, "-c", PROBE, name,
                             "require" if require_compiled else "any"], capture_output=True,
                            text=True, env=env, cwd=chp.ROOT, timeout=300)
    if result.returncode == 0:
        return None
    lines = [ln for ln in (result.stderr or result.stdout).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit status {result.returncode}"


def check(packages: list[Path], jobs: int = 2, require_compiled: bool = True) -> list[str]:
    names = modules(packages)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        outcomes = list(pool.map(lambda name: probe(name, require_compiled), names))
    return [f"{name}: {why}" for name, why in zip(names, outcomes, strict=True) if why]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("packages", nargs="*", help="package directories (default: all compiled)")
    parser.add_argument("--jobs", type=int, default=2, help="interpreters at a time (default 2)")
    parser.add_argument("--allow-interpreted", action="store_true",
                        help="only require the import, not that it runs compiled")
    args = parser.parse_args(argv)
    packages = [chp.ROOT / p for p in (args.packages or chp.PACKAGES)]
    failures = check(packages, args.jobs, not args.allow_interpreted)
    for line in failures:
        print(line)
    print(f"compiled modules importing in a fresh interpreter: "
          f"{len(modules(packages)) - len(failures)}/{len(modules(packages))}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
