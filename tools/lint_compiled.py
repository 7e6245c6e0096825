"""Flag class fields in compiled modules whose type is imported only under TYPE_CHECKING.

    .venv/bin/python tools/lint_compiled.py [PACKAGE_DIR ...]

Run by `make lint` and by `core/tests/test_lint_compiled.py`, so CI runs it too.
It reads the modules each package compiles (`[tool.relaymq.compile]` in its
pyproject.toml; default: core and every plugin).

Why: mypyc hands a dataclass (and an attrs class, a NamedTuple, a TypedDict, an
Enum, any class it cannot build natively) its field types as *objects*, and it
gets a type that is not compiled in the same package by looking its name up in
the module's globals when the module is imported. A name imported only under
`if TYPE_CHECKING:` is not there, so the compiled module fails to import with
`KeyError: 'Broker'`, while the interpreted module, mypy and the tests in pure
Python are all fine. Quoting the annotation does not help a dataclass: mypyc
resolves the string to the same class. Whether a field is affected depends on
what the outermost type is (`Broker`, `"Broker"`, `mod.Broker`, `Broker[int]`
are looked up; `Broker | None`, `Optional[Broker]`, `list[Broker]`,
`Callable[[Broker], None]` are not), and the check follows that rule.

A field is flagged when, in a compiled module:

* it is annotated in the body of a class that is not a plain class: a plain
  class has no decorator other than `mypyc_attr`/`final`/`trait`, no keyword
  (metaclass) and no base other than `object`/`Generic[...]`, and mypyc only
  reads the annotations of such a class statically;
* and the outermost name of its annotation (quoted or not) is bound at module
  level only inside `if TYPE_CHECKING:`.

The fix: import the class at run time (the import-circle check counts
typing-only imports too, so moving one out of TYPE_CHECKING never adds a
circle), or give the field a type that is not looked up.
Exit status 1 and one line per flagged field.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: decorators that leave a class native without mypyc reading its annotations
NATIVE_DECORATORS = {"mypyc_attr", "final", "trait"}
#: wrappers whose own name is what mypyc looks up (their argument is not)
WRAPPERS = {"ClassVar", "Final", "Annotated", "InitVar"}
PLAIN_BASES = {"object", "Generic"}


def packages() -> list[Path]:
    return [ROOT / "core", *sorted(p.parent for p in (ROOT / "plugins").glob("*/pyproject.toml"))]


def compiled_modules(package: Path) -> list[Path]:
    with open(package / "pyproject.toml", "rb") as f:
        config = tomllib.load(f)
    modules = config.get("tool", {}).get("relaymq", {}).get("compile", {}).get("modules", [])
    return [package / "src" / m for m in modules]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _bound(stmts: list[ast.stmt]) -> Iterator[tuple[str, int]]:
    """Names a block binds at its own level (imports, assignments, defs, classes),
    looking into if/try/with blocks but not into functions or classes."""
    for stmt in stmts:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                yield (alias.asname or alias.name).split(".")[0], stmt.lineno
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield stmt.name, stmt.lineno
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                for node in ast.walk(target):
                    if isinstance(node, ast.Name):
                        yield node.id, stmt.lineno
        elif isinstance(stmt, ast.If):
            yield from _bound(stmt.body)
            yield from _bound(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            yield from _bound(stmt.body)
            for handler in stmt.handlers:
                yield from _bound(handler.body)
            yield from _bound(stmt.orelse)
            yield from _bound(stmt.finalbody)
        elif isinstance(stmt, (ast.With, ast.For, ast.While)):
            yield from _bound(stmt.body)


def typing_only_names(tree: ast.Module) -> dict[str, int]:
    """Module-level names bound under `if TYPE_CHECKING:` and nowhere else at run time."""
    typing_only: dict[str, int] = {}
    runtime: set[str] = set()

    def walk(stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            if isinstance(stmt, ast.If) and _is_type_checking(stmt.test):
                for name, line in _bound(stmt.body):
                    typing_only.setdefault(name, line)
                walk(stmt.orelse)
            elif isinstance(stmt, (ast.If, ast.Try)):
                # an if/try at module level: look for TYPE_CHECKING blocks inside it
                blocks = [stmt.body, stmt.orelse]
                if isinstance(stmt, ast.Try):
                    blocks += [h.body for h in stmt.handlers] + [stmt.finalbody]
                for block in blocks:
                    walk(block)
            else:
                runtime.update(name for name, _ in _bound([stmt]))

    walk(tree.body)
    return {name: line for name, line in typing_only.items() if name not in runtime}


def _decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _is_plain(cls: ast.ClassDef) -> bool:
    if cls.keywords or any(_decorator_name(d) not in NATIVE_DECORATORS
                           for d in cls.decorator_list):
        return False
    for base in cls.bases:
        if isinstance(base, ast.Subscript):
            base = base.value
        name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
        if name not in PLAIN_BASES:
            return False
    return True


def looked_up_name(annotation: ast.expr) -> str | None:
    """The global name mypyc loads for a field annotated `annotation` when its
    outermost type is a class; None when the outermost type is not a class
    (a union, a callable, a literal ...) or cannot be read."""
    node: ast.expr = annotation
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value.strip(), mode="eval").body
        except SyntaxError:
            return None
    if isinstance(node, ast.Subscript):
        node = node.value
    while isinstance(node, ast.Attribute):
        node = node.value
    if isinstance(node, ast.Name):
        return node.id
    return None


def _class_fields(cls: ast.ClassDef) -> Iterator[ast.AnnAssign]:
    def walk(stmts: list[ast.stmt]) -> Iterator[ast.AnnAssign]:
        for stmt in stmts:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                yield stmt
            elif isinstance(stmt, ast.If):
                yield from walk(stmt.body)
                yield from walk(stmt.orelse)
    yield from walk(cls.body)


def check_source(source: str, filename: str) -> list[str]:
    tree = ast.parse(source, filename)
    typing_only = typing_only_names(tree)
    if not typing_only:
        return []
    problems = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef) or _is_plain(node):
            continue
        for field in _class_fields(node):
            name = looked_up_name(field.annotation)
            if name in typing_only and name not in WRAPPERS:
                problems.append(
                    f"{filename}:{field.lineno}: {node.name}.{ast.unparse(field.target)}: "
                    f"{ast.unparse(field.annotation)} names {name!r}, imported only under "
                    f"TYPE_CHECKING (line {typing_only[name]}); compiled, the module looks it "
                    f"up at import and fails with KeyError: import it at run time")
    return problems


def check(package_dirs: list[Path]) -> list[str]:
    problems = []
    for package in package_dirs:
        for path in compiled_modules(package):
            try:
                shown = str(path.relative_to(ROOT))
            except ValueError:
                shown = str(path)
            problems += check_source(path.read_text(), shown)
    return problems


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    dirs = [Path(a).resolve() for a in args] or packages()
    problems = check(dirs)
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
