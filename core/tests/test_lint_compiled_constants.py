"""Module constants that compiled code reads are `Final`.

mypyc looks a module-level name up in the module's dict every time a function
reads it, unless the name is `Final`: then a literal is compiled in and any
other value is kept in a C static. In the AMQP scanner the section codes alone
were a quarter of its CPU (docs/compiled-modules.md). This keeps new constants
from slipping back: an upper-case name bound once at module level by a plain
assignment and read inside a function of a compiled module must be annotated
`Final`, unless it is listed below with the reason it is rebound.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: (module path under src/, name) -> why it stays an ordinary global
REBOUND = {
    ("relaymq/feed/cursor.py", "WINDOW"): "tests shrink the window to cross page edges",
    ("relaymq/feed/cursor.py", "PAGE"): "tests shrink the page to cross page edges",
    ("relaymq/feed/cursor.py", "PREFETCH_AT"): "tests shrink the prefetch point",
    ("relaymq_kahadb/recovery.py", "_PROGRESS_EVERY"): "a test logs progress on every file",
}
_CONSTANT = re.compile(r"_?[A-Z][A-Z0-9_]*")


def _compiled_modules() -> list[Path]:
    spec = importlib.util.spec_from_file_location("lint_compiled", ROOT / "tools" / "lint_compiled.py")
    assert spec is not None and spec.loader is not None
    lint = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lint)
    return [m for package in lint.packages() for m in lint.compiled_modules(package)]


def plain_constants_read_in_functions(source: str) -> list[str]:
    """Upper-case module names bound by one plain assignment and read in a function."""
    tree = ast.parse(source)
    assigned = [n.targets[0].id for n in tree.body
                if isinstance(n, ast.Assign) and len(n.targets) == 1
                and isinstance(n.targets[0], ast.Name) and _CONSTANT.fullmatch(n.targets[0].id)]
    read = {x.id for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
            for x in ast.walk(f) if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Load)}
    return [name for name in assigned if name in read]


def test_constants_read_by_compiled_functions_are_final() -> None:
    modules = _compiled_modules()
    assert len(modules) > 40  # every package's list was read
    found = []
    for path in modules:
        rel = path.as_posix().split("/src/", 1)[1]
        for name in plain_constants_read_in_functions(path.read_text()):
            if (rel, name) not in REBOUND:
                found.append(f"{rel}: {name}")
    assert not found, "declare these `Final` (or list them in REBOUND with why):\n" + "\n".join(found)


def test_the_rule_flags_a_plain_constant_and_passes_a_final_one() -> None:
    source = ("from typing import Final\nCODE = 0x70\nKEPT: Final = 0x71\nUNUSED = 1\n"
              "lower = 2\ndef f(x):\n    return x == CODE or x == KEPT or x == lower\n")
    assert plain_constants_read_in_functions(source) == ["CODE"]


def test_the_listed_exceptions_are_still_rebound_and_still_plain() -> None:
    for (rel, name), _why in REBOUND.items():
        path = next(p for p in _compiled_modules() if p.as_posix().endswith("/src/" + rel))
        assert name in plain_constants_read_in_functions(path.read_text()), (rel, name)
