"""Which of a package's modules run compiled, and a safe fallback when they are stale.

A package's per-message modules may sit beside a mypyc-built extension of the same
name (`tools/compile_hot_paths.py`). Python prefers the extension, which would
hide an edit made to the source after the build. So each such package calls
`select(__name__, __path__[0])` first thing in its `__init__`: when any source is
newer than its extension, or `RELAYMQ_PURE_PYTHON` is set, every module of that
package is imported from source instead (all or none: compiled modules of one
package call each other natively). "Newer" is decided by content: the build writes
each source's sha256 to `_compiled_sources.json`, so an installed wheel (whose
files all carry the install time) runs compiled. `status()` says what was chosen, per package.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import logging
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

PURE_ENV = "RELAYMQ_PURE_PYTHON"
#: sources' sha256 at build time, beside the package's `__init__.py`
MANIFEST = "_compiled_sources.json"
_SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES)
_status: dict[str, str] = {}
log = logging.getLogger(__name__)


def _extensions(package: str, directory: str) -> dict[str, tuple[str, str]]:
    """module name -> (source path, extension path) for compiled modules under directory."""
    found: dict[str, tuple[str, str]] = {}
    for root, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            suffix = next((s for s in _SUFFIXES if name.endswith(s)), None)
            if suffix is None:
                continue
            stem = name[: -len(suffix)]
            source = os.path.join(root, stem + ".py")
            if not os.path.exists(source):
                continue
            rel = os.path.relpath(os.path.join(root, stem), directory).replace(os.sep, ".")
            found[f"{package}.{rel}"] = (source, os.path.join(root, name))
    return found


class _SourceFirst:
    """A meta-path finder that imports the named modules from their .py files."""

    def __init__(self, sources: dict[str, str]) -> None:
        self.sources = sources

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        source = self.sources.get(fullname)
        if source is None:
            return None
        return importlib.util.spec_from_file_location(fullname, source)


def select(package: str, directory: str) -> str:
    """Decide compiled or source for `package`; call before importing its modules."""
    modules = _extensions(package, directory)
    if not modules:
        _status[package] = "pure Python"
        return _status[package]
    reason = None
    if os.environ.get(PURE_ENV):
        reason = f"{PURE_ENV} is set"
    else:
        stale = _stale_source(directory, modules)
        if stale is not None:
            reason = f"{os.path.basename(stale)} changed after the build"
            log.warning("%s: %s differs from what its compiled module was built from; running"
                        " pure Python until `make compile`", package, stale)
    if reason is None:
        _status[package] = f"compiled ({len(modules)} modules)"
    else:
        sys.meta_path.insert(0, _SourceFirst({name: src for name, (src, _) in modules.items()}))
        _status[package] = f"pure Python ({reason})"
    return _status[package]


def stale_source(package: str, directory: str) -> str | None:
    """The first source of `package` (in `directory`) that its compiled module was not
    built from, by content as `select` decides; None when all match or none is built."""
    modules = _extensions(package, directory)
    return _stale_source(directory, modules) if modules else None


def _digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _stale_source(directory: str, modules: dict[str, tuple[str, str]]) -> str | None:
    """The first source its extension was not built from, or None.

    The build records each source's sha256 in `MANIFEST` (in-tree by `make compile`,
    in a wheel by `tools/build_wheels.py`); an installed wheel's files all carry the
    install time, so only the content can tell. Without a manifest (an extension
    built some other way) a source newer than its extension is stale."""
    manifest_path = os.path.join(directory, MANIFEST)
    try:
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        manifest = None
    for source, extension in modules.values():
        if manifest is not None:
            rel = os.path.relpath(source, directory).replace(os.sep, "/")
            if manifest.get(rel) != _digest(source):
                return source
        elif os.stat(source).st_mtime > os.stat(extension).st_mtime:
            return source
    return None


def status() -> dict[str, str]:
    """package -> "compiled (N modules)" or "pure Python (why)", for packages seen so far."""
    return dict(_status)


def is_compiled(module: ModuleType) -> bool:
    """True when `module` was loaded from an extension rather than its source."""
    return (getattr(module, "__file__", None) or "").endswith(_SUFFIXES)
