"""The workspace sources a package's mypyc build reads, for `compile_hot_paths.py`'s stamp.

mypyc compiles a module against the types of everything it imports, followed
transitively as mypy follows it (imports under `TYPE_CHECKING` and inside
functions too): the kernel's classes, the package's own interpreted modules
(its options, errors), and other plugins it builds on (the mirror on AMQP). An
edit there can change the C code of a module whose own source did not change,
for example a kernel type that was `Any` becoming a class whose fields are then
looked up at import. So the stamp covers that closure, not just the listed
modules; finding it reads the import statements of the workspace sources only
(no type checking, a fraction of a second), and a package is rebuilt only when
something it imports changed, not on any kernel edit.

Whether mypy sees a package's types at all (its `py.typed` marker) is part of
the closure's fingerprint as well.
"""

from __future__ import annotations

import ast
from pathlib import Path


class SourceIndex:
    """The modules of a set of source roots (`core/src`, `plugins/*/src`) and the
    workspace modules each one imports."""

    def __init__(self, roots: list[Path]) -> None:
        self.files: dict[str, Path] = {}
        self.packages: set[str] = set()
        for root in roots:
            for path in sorted(root.rglob("*.py")):
                parts = list(path.relative_to(root).with_suffix("").parts)
                if any(p.startswith(".") or p == "__pycache__" for p in parts):
                    continue
                if parts[-1] == "__init__":
                    parts.pop()
                    if parts:
                        self.packages.add(".".join(parts))
                if parts:
                    self.files.setdefault(".".join(parts), path)
        self._imports: dict[str, frozenset[str]] = {}

    def _known(self, name: str) -> str | None:
        """The longest prefix of a dotted name that is a workspace module."""
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            candidate = ".".join(parts[:i])
            if candidate in self.files:
                return candidate
        return None

    def imports(self, name: str) -> frozenset[str]:
        """Workspace modules `name` imports anywhere in its source, with their parent
        packages (importing a.b.c runs a and a.b too)."""
        if name in self._imports:
            return self._imports[name]
        path = self.files[name]
        package = name if name in self.packages else name.rpartition(".")[0]
        found: set[str] = set()

        def add(target: str) -> None:
            module = self._known(target) if target else None
            while module:
                found.add(module)
                module = self._known(module.rpartition(".")[0]) if "." in module else None

        for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add(alias.name)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                add(module)
                for alias in node.names:
                    if alias.name != "*":
                        add(f"{module}.{alias.name}")  # a submodule, when it is one
        found.discard(name)
        self._imports[name] = frozenset(found)
        return self._imports[name]

    def closure(self, names: list[str]) -> set[str]:
        """`names` and every workspace module they import, transitively."""
        seen: set[str] = set()
        todo = [n for n in names if n in self.files]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            todo.extend(self.imports(name) - seen)
        return seen

    def fingerprint_lines(self, names: list[str]) -> list[bytes]:
        """What to hash for a build of `names`: each module of their closure by name
        and content, and whether each top-level package in it is typed."""
        modules = sorted(self.closure(names))
        lines = [m.encode() + b"\0" + self.files[m].read_bytes() for m in modules]
        for top in sorted({m.split(".")[0] for m in modules}):
            typed = (self.files[top].parent / "py.typed").exists() if top in self.packages else False
            lines.append(f"{top} typed={typed}".encode())
        return lines
