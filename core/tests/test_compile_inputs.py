"""tools/compile_inputs.py: a package's compile stamp covers every workspace source its
mypyc build reads (the kernel's included), and nothing it does not read."""

from __future__ import annotations

import hashlib
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
try:
    import compile_hot_paths as chp
    from compile_inputs import SourceIndex
finally:
    sys.path.pop(0)


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, Path]:
    """A kernel `kern` and a plugin `plug` whose compiled `plug.hot` imports kernel types
    (one only for the type checker, one inside a function) and its own options."""
    kernel, plugin = tmp_path / "core" / "src", tmp_path / "plug" / "src"
    _write(kernel, {
        "kern/__init__.py": "",
        "kern/model/__init__.py": "",
        "kern/model/types.py": "from kern.model import base\nclass Broker: ...\n",
        "kern/model/base.py": "class Base: ...\n",
        "kern/lazy.py": "X = 1\n",
        "kern/cli.py": "import kern.model.types\n",
    })
    _write(plugin, {
        "plug/__init__.py": "",
        "plug/hot.py": """
            from typing import TYPE_CHECKING
            from . import options
            if TYPE_CHECKING:
                from kern.model.types import Broker
            def f() -> None:
                from kern import lazy
        """,
        "plug/options.py": "class Options: ...\n",
        "plug/plugin.py": "from . import hot\n",
    })
    return kernel, plugin


def _fingerprint(kernel: Path, plugin: Path) -> str:
    h = hashlib.sha256()
    for line in SourceIndex([kernel, plugin]).fingerprint_lines(["plug.hot"]):
        h.update(line)
    return h.hexdigest()


def test_the_closure_follows_typing_only_function_local_and_relative_imports(workspace) -> None:
    kernel, plugin = workspace
    closure = SourceIndex([kernel, plugin]).closure(["plug.hot"])
    assert closure == {"plug", "plug.hot", "plug.options", "kern", "kern.lazy", "kern.model",
                       "kern.model.types", "kern.model.base"}


@pytest.mark.parametrize("edited", ["core/src/kern/model/types.py", "core/src/kern/model/base.py",
                                    "core/src/kern/lazy.py", "plug/src/plug/options.py",
                                    "plug/src/plug/hot.py"])
def test_an_edit_to_what_the_build_reads_changes_the_fingerprint(workspace, edited: str) -> None:
    kernel, plugin = workspace
    before = _fingerprint(kernel, plugin)
    path = kernel.parent.parent / edited
    path.write_text(path.read_text() + "# edited\n")
    assert _fingerprint(kernel, plugin) != before


@pytest.mark.parametrize("edited", ["core/src/kern/cli.py", "plug/src/plug/plugin.py"])
def test_an_edit_elsewhere_leaves_the_fingerprint(workspace, edited: str) -> None:
    kernel, plugin = workspace
    before = _fingerprint(kernel, plugin)
    path = kernel.parent.parent / edited
    path.write_text(path.read_text() + "# edited\n")
    assert _fingerprint(kernel, plugin) == before


def test_the_kernel_becoming_typed_changes_the_fingerprint(workspace) -> None:
    kernel, plugin = workspace
    before = _fingerprint(kernel, plugin)
    (kernel / "kern" / "py.typed").write_text("")
    assert _fingerprint(kernel, plugin) != before


def _closure(package: str) -> set[str]:
    names = [m.removesuffix(".py").replace("/", ".") for m in chp._modules(ROOT / package)]
    return chp.source_index().closure(names)


def test_every_compiled_plugin_is_stamped_with_the_kernel_it_compiles_against() -> None:
    for package in chp.PACKAGES[1:]:
        assert "relaymq" in _closure(package) and "relaymq.model.message" in _closure(package)
    assert {"relaymq.broker.broker", "relaymq_stomp.config"} <= _closure("plugins/stomp")
    assert "relaymq_amqp.engine" in _closure("plugins/mirror")  # the mirror builds on AMQP
    assert "relaymq.cli" not in _closure("plugins/stomp")
