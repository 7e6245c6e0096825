"""Flag test functions that cannot fail: no assertion, no `pytest.raises`, no asserting helper.

    .venv/bin/python tools/lint_tests.py [PATH ...]

Run by `make lint` and by `core/tests/test_lint_tests.py`, so CI runs it too.

A test function (`test_*` at module level or in a `Test*` class) passes the check
when its body, including functions nested in it, contains at least one of:

* an `assert` statement;
* `pytest.raises(...)`, `pytest.warns(...)` or `pytest.fail(...)`;
* a call to an *asserting helper*.

A helper asserts when it is defined in a scanned file (test modules, conftest
files, helper modules beside them, and `relaymq.testing`) and its body asserts,
calls `pytest.raises`/`pytest.fail`, or calls another asserting helper; or when
its name starts with `assert_`/`expect_`; or when its name starts with `wait_`
and every definition of that name in the scanned files raises (a wait that just
returns on timeout is not an assertion); or when it is in ALLOWLIST below.
A plain call `f(...)` counts when `f` is such a helper defined in or imported
into the test's module. A method call `x.m(...)` is matched by its name: it
counts when `m` has an asserting prefix, or when every function and method named
`m` in the scanned files asserts (so a common name such as `read`, defined both
ways, does not count).

It also flags *sleep-then-assert* in test files (tests and their helpers): a
`time.sleep(...)` or `asyncio.sleep(...)` statement followed in the same block by
an `assert` (directly, or after one plain assignment). Such a check passes on a
fast machine without checking anything and fails on a slow one; wait for the
condition instead (`relaymq.testing.wait_until`), or, for "nothing more arrived",
send a marker after and wait for it. A sleep that is not followed by an assert
(pacing a producer, a random lifetime before a kill) is not flagged.

And it flags *reads until quiet* there: `consumer.receive_all(0.2)` (the vm:// and
`relaymq.testing.transports` clients: everything until `timeout` passes with
nothing new) decides what "all" is by the passing of time, so a late or doubled
copy goes unseen; read up to a marker (`relaymq.testing.barriers`) instead.
`BlockingStomp.receive_all("/queue/X")`, which reads up to a marker, names its
destination first and is not flagged.

And it flags *imports from a test module* anywhere in the scanned trees
(`from test_x import f`, `from .test_x import f`, `import test_x`): with
`--import-mode=importlib` the test packages of several plugins share module names,
so such an import can resolve to another plugin's file, and it runs that module's
collection-time code again. Shared helpers go into a module not named `test_*`.

Exit status 1 and one line per offending test when anything is flagged.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# where tests live, and where shared helpers they call are defined
TEST_DIRS = ["core/tests", "plugins", "bench/tests", "tests"]
HELPER_DIRS = ["core/src/relaymq/testing"]
ASSERTING_PREFIXES = ("assert_", "expect_")
WAIT_PREFIX = "wait_"
PYTEST_ASSERTIONS = {"raises", "warns", "fail", "deprecated_call"}
# helpers defined outside the scanned trees that fail the test on a wrong outcome
ALLOWLIST = {
    # hypothesis' stateful machines assert in their rules and invariants
    "run_state_machine_as_test",
}


def _python_files(paths: Iterable[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_file() and path.suffix == ".py":
            yield path
        elif path.is_dir():
            for p in sorted(path.rglob("*.py")):
                if ".venv" in p.parts or "node_modules" in p.parts or "__pycache__" in p.parts:
                    continue
                if path.name == "plugins" and "tests" not in p.relative_to(path).parts:
                    continue  # plugin sources are not tests
                yield p


def _is_pytest_assertion(call: ast.Call) -> bool:
    f = call.func
    return (isinstance(f, ast.Attribute) and f.attr in PYTEST_ASSERTIONS
            and isinstance(f.value, ast.Name) and f.value.id == "pytest")


class _Body:
    """What one function's body does: asserts directly, raises, and what it calls."""

    def __init__(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.asserts = False
        self.raises = False
        self.names: set[str] = set()  # plain calls: f(...)
        self.methods: set[str] = set()  # attribute calls: x.f(...)
        for node in ast.walk(fn):
            if isinstance(node, ast.Assert):
                self.asserts = True
            elif isinstance(node, ast.Raise):
                self.raises = True
            elif isinstance(node, ast.Call):
                if _is_pytest_assertion(node):
                    self.asserts = True
                elif isinstance(node.func, ast.Name):
                    self.names.add(node.func.id)
                elif isinstance(node.func, ast.Attribute):
                    self.methods.add(node.func.attr)


SLEEP_MODULES = {"time", "asyncio"}


def _is_sleep(stmt: ast.stmt) -> bool:
    """`time.sleep(x)`, `await asyncio.sleep(x)` (or a bare imported `sleep(x)`)."""
    if not isinstance(stmt, ast.Expr):
        return False
    value = stmt.value
    if isinstance(value, ast.Await):
        value = value.value
    if not isinstance(value, ast.Call):
        return False
    f = value.func
    if isinstance(f, ast.Attribute):
        return f.attr == "sleep" and isinstance(f.value, ast.Name) and f.value.id in SLEEP_MODULES
    return isinstance(f, ast.Name) and f.id == "sleep"


def _blocks(node: ast.AST) -> Iterator[list[ast.stmt]]:
    """Every statement list inside `node` (bodies, else and finally blocks, handlers)."""
    for child in ast.walk(node):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(child, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block


def sleeps_then_asserts(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[int]:
    """Line numbers of sleeps in `fn` that an assert follows in the same block
    (directly, or after one assignment)."""
    found = []
    for block in _blocks(fn):
        for i, stmt in enumerate(block[:-1]):
            if not _is_sleep(stmt):
                continue
            after = block[i + 1]
            if isinstance(after, (ast.Assign, ast.AnnAssign)) and i + 2 < len(block):
                after = block[i + 2]
            if isinstance(after, ast.Assert):
                found.append(stmt.lineno)
    return found


def _is_quiet_read(call: ast.Call) -> bool:
    """`x.receive_all()`, `x.receive_all(0.2)` or `x.receive_all(timeout=...)`: a
    read that ends when nothing came for a while (a destination first is a marker read)."""
    f = call.func
    if not (isinstance(f, ast.Attribute) and f.attr == "receive_all"):
        return False
    if call.args:
        first = call.args[0]
        return isinstance(first, ast.Constant) and isinstance(first.value, (int, float))
    return all(k.arg == "timeout" for k in call.keywords)


def quiet_reads(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[int]:
    """Line numbers of reads until quiet in `fn`."""
    return [n.lineno for n in ast.walk(fn) if isinstance(n, ast.Call) and _is_quiet_read(n)]


class _Module:
    """A scanned file: its tests, its module-level functions, its methods, what it imports."""

    def __init__(self, path: Path) -> None:
        self.path = path
        tree = ast.parse(path.read_text(), str(path))
        self.functions: dict[str, _Body] = {}
        self.methods: dict[str, list[_Body]] = {}
        self.imported: set[str] = set()
        self.tests: list[tuple[int, str, _Body]] = []
        #: (line, function) of sleep-then-assert in this file's functions
        self.sleeps: list[tuple[int, str]] = []
        #: (line, module) of imports from test modules
        self.test_imports: list[tuple[int, str]] = []
        #: (line, function) of reads until quiet in this file's functions
        self.quiet: list[tuple[int, str]] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            self.test_imports.extend((node.lineno, n) for n in names
                                     if n.rsplit(".", 1)[-1].startswith("test_"))
        is_test_file = path.name.startswith("test_") or path.name.endswith("_test.py")
        if is_test_file or path.name == "conftest.py":
            tops = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            tops += [item for n in tree.body if isinstance(n, ast.ClassDef) for item in n.body
                     if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))]
            for fn in tops:  # nested functions are inside their blocks
                self.sleeps.extend((line, fn.name) for line in sleeps_then_asserts(fn))
                self.quiet.extend((line, fn.name) for line in quiet_reads(fn))
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if is_test_file and node.name.startswith("test"):
                    self.tests.append((node.lineno, node.name, _Body(node)))
                else:
                    self.functions[node.name] = _Body(node)
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        continue
                    if is_test_file and node.name.startswith("Test") and item.name.startswith("test"):
                        self.tests.append((item.lineno, f"{node.name}.{item.name}", _Body(item)))
                    else:
                        self.methods.setdefault(item.name, []).append(_Body(item))
            elif isinstance(node, ast.ImportFrom):
                self.imported.update(a.asname or a.name for a in node.names)


def _asserting_names(modules: list[_Module]) -> tuple[set[str], set[str]]:
    """(module-level helper names, method names) that count as assertions; a fixpoint,
    since helpers assert through other helpers."""
    defs: dict[str, list[_Body]] = {}
    for m in modules:
        for name, bodies in m.methods.items():
            defs.setdefault(name, []).extend(bodies)
        for name, body in m.functions.items():
            defs.setdefault(name, []).append(body)
    methods = {n for n in defs if n.startswith(ASSERTING_PREFIXES)} | ALLOWLIST
    methods |= {n for n, bodies in defs.items()
                if n.startswith(WAIT_PREFIX) and all(b.raises or b.asserts for b in bodies)}
    functions = set(methods)
    changed = True
    while changed:
        changed = False
        for m in modules:
            for name, body in m.functions.items():
                if name not in functions and _counts(body, functions, methods):
                    functions.add(name)
                    changed = True
        for name, bodies in defs.items():
            if name not in methods and all(_counts(b, functions, methods) for b in bodies):
                methods.add(name)
                changed = True
    return functions, methods


def _counts(body: _Body, functions: set[str], methods: set[str]) -> bool:
    return body.asserts or bool(body.names & functions) or bool(body.methods & methods)


def check(paths: Iterable[Path], helper_paths: Iterable[Path] = ()) -> list[str]:
    """Lines `path:line: test_name has no assertion ...` for every test that cannot fail."""
    modules = [_Module(p) for p in [*_python_files(paths), *_python_files(helper_paths)]]
    functions, methods = _asserting_names(modules)
    found = []
    for m in modules:
        for line, name in sorted(set(m.sleeps)):
            found.append(f"{_shown(m.path)}:{line}: {name} sleeps, then asserts; wait for "
                         "the condition (relaymq.testing.wait_until) or a marker instead")
        for line, name in sorted(set(m.test_imports)):
            found.append(f"{_shown(m.path)}:{line}: imports from the test module {name}; move "
                         "what is shared into a module not named test_*")
        for line, name in sorted(set(m.quiet)):
            found.append(f"{_shown(m.path)}:{line}: {name} reads until nothing comes for a "
                         "while (receive_all(timeout)); read up to a marker "
                         "(relaymq.testing.barriers) instead")
        # a plain call counts when the helper is this module's own or imported into it
        visible = {n for n in functions if n in m.functions or n in m.imported} | methods
        for line, name, body in m.tests:
            if _counts(body, visible, methods):
                continue
            found.append(f"{_shown(m.path)}:{line}: {name} has no assert, pytest.raises or "
                         "asserting helper")
    return found


def _shown(path: Path) -> Path:
    try:
        return path.relative_to(ROOT)
    except ValueError:
        return path


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or [ROOT / d for d in TEST_DIRS]
    problems = check(paths, [ROOT / d for d in HELPER_DIRS])
    for line in problems:
        print(line)
    if problems:
        print(f"{len(problems)} test(s) cannot fail or sleep before asserting; see "
              "tools/lint_tests.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
