"""Names of a package imported on first use (PEP 562 module `__getattr__`).

A plugin package whose runtime classes pull in heavy libraries (SQLAlchemy, the
bridge machinery, the security service) still exports them from its top level,
but `relaymq <command> --help` and the commands that do not need them import the
package without paying for them (docs/operations.md, "Start-up time")."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: `names` maps each lazily exported name
    to the module that defines it; the first use imports that module and keeps the
    value on the package, so later uses are plain attribute reads."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
