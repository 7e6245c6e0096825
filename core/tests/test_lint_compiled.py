"""tools/lint_compiled.py: no compiled module names a TYPE_CHECKING-only class in a field
that mypyc looks up at import, the check flags exactly such fields, and its rule is
the one mypyc follows (checked against a real mypyc build)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
from relaymq.testing.requirements import NOT_APPLICABLE

ROOT = Path(__file__).resolve().parents[2]


def _lint():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("lint_compiled", ROOT / "tools" / "lint_compiled.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HEADER = """\
from __future__ import annotations
import dataclasses
import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, ClassVar, NamedTuple, Optional, TypedDict
from mypy_extensions import mypyc_attr
if TYPE_CHECKING:
    import kl_types
    from kl_types import Peer
"""

#: module body -> does mypyc's compiled module fail to import (KeyError)?
CASES = {
    "dc_bare": ("@dataclass\nclass C:\n    peer: Peer\n", True),
    "dc_quoted": ("@dataclass\nclass C:\n    peer: 'Peer'\n", True),
    "dc_module": ("@dataclass\nclass C:\n    peer: kl_types.Peer\n", True),
    "dc_frozen": ("@dataclasses.dataclass(frozen=True)\nclass C:\n    peer: Peer\n", True),
    "dc_optional": ("@dataclass\nclass C:\n    peer: Peer | None\n    p2: Optional[Peer]\n", False),
    "dc_container": ("@dataclass\nclass C:\n    peers: list[Peer]\n"
                     "    cb: Callable[[Peer], None]\n", False),
    "namedtuple": ("class C(NamedTuple):\n    peer: Peer\n", True),
    "typeddict": ("class C(TypedDict):\n    peer: Peer\n", True),
    "enum": ("class C(enum.Enum):\n    A = 1\n    peer: Peer\n", True),
    "plain": ("class C:\n    peer: Peer\n    def __init__(self, p: Peer) -> None:\n"
              "        self.peer = p\n", False),
    "plain_native": ("@mypyc_attr(allow_interpreted_subclasses=True)\nclass C:\n"
                     "    peer: Peer\n    n: ClassVar[int] = 1\n", False),
}


def test_no_compiled_module_looks_up_a_typing_only_name() -> None:
    lint = _lint()
    assert lint.check(lint.packages()) == []


def test_the_check_reads_every_compiled_package() -> None:
    lint = _lint()
    checked = {str(p.relative_to(ROOT)) for pkg in lint.packages()
               for p in lint.compiled_modules(pkg)}
    assert "core/src/relaymq/dispatch/queue.py" in checked
    assert "plugins/stomp/src/relaymq_stomp/session.py" in checked
    assert "plugins/mirror/src/relaymq_mirror/wire.py" in checked


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_check_flags_fields_mypyc_looks_up(name: str) -> None:
    body, fails_compiled = CASES[name]
    problems = _lint().check_source(HEADER + body, f"{name}.py")
    assert bool(problems) == fails_compiled, problems
    if problems:
        assert "imported only under TYPE_CHECKING" in problems[0]


def test_names_also_bound_at_run_time_are_not_typing_only() -> None:
    source = textwrap.dedent("""
        from typing import TYPE_CHECKING
        from dataclasses import dataclass
        if TYPE_CHECKING:
            from kl_types import Peer, Other
        else:
            Other = object
        from kl_types import Peer
        @dataclass
        class C:
            peer: Peer
            other: Other
    """)
    assert _lint().check_source(source, "m.py") == []


def _toolchain() -> bool:
    include = Path(sysconfig.get_paths()["include"]) / "Python.h"
    return include.exists() and shutil.which("cc") is not None


@pytest.mark.slow
@pytest.mark.skipif(not _toolchain(), reason=f"{NOT_APPLICABLE}no C compiler or Python headers")
def test_the_rule_is_what_mypyc_does(tmp_path: Path) -> None:
    """Each case compiled by mypyc: its module fails to import exactly when the check
    flags it (quoted NamedTuple fields, which the check flags though mypyc copes, are
    left out)."""
    (tmp_path / "kl_types.py").write_text("class Peer:\n    pass\n")
    names = sorted(CASES)
    for name in names:
        (tmp_path / f"kl_{name}.py").write_text(HEADER + CASES[name][0])
    script = ("from setuptools import setup\nfrom mypyc.build import mypycify\n"
              f"setup(name='kl', ext_modules=mypycify({[f'kl_{n}.py' for n in names]!r},"
              " opt_level='0', separate=True))\n")
    env = dict(os.environ, MYPY_CACHE_DIR=str(tmp_path / "mypy-cache"))
    build = subprocess.run([sys.executable, "-c", script, "-q", "build_ext", "--inplace"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    probe = ("import importlib, sys\nm = importlib.import_module(sys.argv[1])\n"
             "assert not m.__file__.endswith('.py'), m.__file__\n")
    outcomes = {}
    for name in names:
        run = subprocess.run([sys.executable, "-c", probe, f"kl_{name}"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60)
        assert run.returncode == 0 or "KeyError" in run.stderr, run.stderr
        outcomes[name] = run.returncode != 0
    assert outcomes == {name: fails for name, (_, fails) in CASES.items()}
