"""Compile each package's per-message modules to C extensions with mypyc, in place.

    .venv/bin/python tools/compile_hot_paths.py [--clean] [--force] [--stale] [PACKAGE_DIR ...]

A package lists the modules worth compiling in its pyproject.toml:

    [tool.relaymq.compile]
    modules = ["relaymq/model/message.py", "relaymq/dispatch/queue.py"]

Paths are relative to the package's `src/`. The extensions land next to their
sources (the workspace installs packages editable), one mypyc group per package;
a stamp file records what they were built from (the listed modules and every
workspace module they import, the kernel's included: `compile_inputs.py`), so a
package is rebuilt exactly when something its build reads changed. The sources stay plain Python: `RELAYMQ_PURE_PYTHON=1` runs them
interpreted, and `relaymq.compiled` falls back to them by itself when a source is
newer than its extension. A machine without a C compiler or Python headers keeps
the pure-Python package and says so; nothing else depends on the build.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compile_inputs import SourceIndex  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["core", "plugins/amqp", "plugins/stomp", "plugins/kahadb", "plugins/virtual_topic",
            "plugins/queue_types", "plugins/mirror", "plugins/spark"]
STAMP = ".compiled-stamp"
MANIFEST = "_compiled_sources.json"  # read by relaymq.compiled
EXT_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX") or ".so"


def _modules(package: Path) -> list[str]:
    with open(package / "pyproject.toml", "rb") as f:
        config = tomllib.load(f)
    return list(config.get("tool", {}).get("relaymq", {}).get("compile", {}).get("modules", []))


_index: SourceIndex | None = None


def source_index() -> SourceIndex:
    """Every workspace source root, read once per run."""
    global _index
    if _index is None:
        _index = SourceIndex([ROOT / "core" / "src", *sorted((ROOT / "plugins").glob("*/src"))])
    return _index


def _mypy_config(package: Path) -> str:
    """The [tool.mypy] tables mypy may read during the build (package, workspace root)."""
    tables = []
    for pyproject in (package / "pyproject.toml", ROOT / "pyproject.toml"):
        with open(pyproject, "rb") as f:
            tables.append(tomllib.load(f).get("tool", {}).get("mypy", {}))
    return json.dumps(tables, sort_keys=True)


def _fingerprint(src: Path, modules: list[str]) -> str:
    """What a build reads: the tool versions, the listed modules and every workspace
    module they import (the kernel's too: its types decide the plugin's C code)."""
    import mypy.version

    h = hashlib.sha256()
    h.update(f"{sys.version}|{mypy.version.__version__}|{EXT_SUFFIX}".encode())
    h.update(_mypy_config(src.parent).encode())
    for module in modules:
        h.update(module.encode())
        h.update((src / module).read_bytes())
    names = [m.removesuffix(".py").replace("/", ".") for m in modules]
    for line in source_index().fingerprint_lines(names):
        h.update(hashlib.sha256(line).digest())
    return h.hexdigest()


def _built_files(src: Path) -> list[Path]:
    found = [p for p in src.rglob(f"*{EXT_SUFFIX}")]
    return [p for p in found if "__mypyc" in p.name or p.with_name(p.name[: -len(EXT_SUFFIX)] + ".py").exists()]


def clean(package: Path) -> None:
    src = package / "src"
    for path in _built_files(src):
        path.unlink()
    for manifest in src.glob(f"*/{MANIFEST}"):
        manifest.unlink()
    (src / STAMP).unlink(missing_ok=True)


def write_manifests(src: Path, modules: list[str]) -> list[Path]:
    """Record each compiled source's sha256 beside its top-level package's __init__.py;
    `relaymq.compiled` runs the extensions only while the sources still match."""
    by_package: dict[str, dict[str, str]] = {}
    for module in modules:
        top, _, rel = module.partition("/")
        digest = hashlib.sha256((src / module).read_bytes()).hexdigest()
        by_package.setdefault(top, {})[rel] = digest
    written = []
    for top, digests in by_package.items():
        path = src / top / MANIFEST
        path.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
        written.append(path)
    return written


def _missing_toolchain() -> str | None:
    include = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not include.exists():
        return f"no Python headers ({include})"
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None and shutil.which("cc") is None:
        return f"no C compiler ({cc})"
    return None


def is_current(package: Path, fingerprint: str | None = None) -> bool:
    """The package's extensions were built from what its build would read now."""
    src = package / "src"
    stamp = src / STAMP
    if fingerprint is None:
        fingerprint = _fingerprint(src, _modules(package))
    return stamp.exists() and stamp.read_text() == fingerprint


def build(package: Path, force: bool = False) -> bool:
    """Build one package's extensions; True when they are present and current."""
    src = package / "src"
    modules = _modules(package)
    if not modules:
        return True
    stamp = src / STAMP
    fingerprint = _fingerprint(src, modules)
    if not force and is_current(package, fingerprint):
        write_manifests(src, modules)  # builds from before manifests existed
        return True
    clean(package)
    problem = _missing_toolchain()
    if problem:
        print(f"compile_hot_paths: {package.name}: {problem}; running pure Python", file=sys.stderr)
        return False
    work = ROOT / ".venv" / "compile" / package.name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    script = (
        "import sys\n"
        "from setuptools import setup\n"
        "from mypyc.build import mypycify\n"
        f"setup(name={package.name!r}, ext_modules=mypycify({modules!r}, opt_level='3', multi_file={len(modules) > 1},"
        f" debug_level='0', target_dir={str(work / 'c')!r}),"
        f" script_args=['-q', 'build_ext', '--inplace', '-j', str(len(__import__('os').sched_getaffinity(0))),"
        f" '--build-temp', {str(work / 'temp')!r}, '--build-lib', {str(work / 'lib')!r}])\n"
    )
    env = dict(os.environ, MYPY_CACHE_DIR=str(work / "mypy-cache"))
    result = subprocess.run([sys.executable, "-c", script], cwd=src, env=env,
                            capture_output=True, text=True)
    if result.returncode != 0:
        clean(package)
        sys.stderr.write(result.stdout[-4000:] + result.stderr[-4000:])
        print(f"compile_hot_paths: {package.name}: mypyc failed; running pure Python", file=sys.stderr)
        return False
    write_manifests(src, modules)
    stamp.write_text(fingerprint)
    print(f"compile_hot_paths: {package.name}: {len(modules)} modules compiled")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("packages", nargs="*", help="package directories (default: all)")
    parser.add_argument("--clean", action="store_true", help="remove the extensions and stop")
    parser.add_argument("--force", action="store_true", help="rebuild even when current")
    parser.add_argument("--stale", action="store_true",
                        help="list the packages a build would rebuild, build nothing")
    parser.add_argument("--strict", action="store_true", help="exit non-zero when a build fails")
    args = parser.parse_args(argv)
    packages = [ROOT / p for p in (args.packages or PACKAGES)]
    if args.stale:
        for package in packages:
            if _modules(package) and not is_current(package):
                print(package.relative_to(ROOT))
        return 0
    if args.clean:
        for package in packages:
            clean(package)
        return 0
    # Each package is its own mypyc run and C build (own work and cache directories);
    # mypyc's type check and code generation are single-threaded, so packages built side
    # by side keep every core busy (the kernel's C alone is most of one core's work).
    workers = max(1, min(len(packages), len(os.sched_getaffinity(0))))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(lambda package: build(package, args.force), packages))
    return 0 if all(results) or not args.strict else 1


if __name__ == "__main__":
    sys.exit(main())
