"""relaymq.lazy_names: a plugin package's heavy names are imported on first use."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_a_lazy_name_is_imported_on_first_use_and_kept() -> None:
    code = ("import sys, relaymq_bridge\n"
            "assert 'relaymq_bridge.manager' not in sys.modules, 'imported early'\n"
            "m = relaymq_bridge.BridgeManager\n"
            "assert 'relaymq_bridge.manager' in sys.modules\n"
            "assert vars(relaymq_bridge)['BridgeManager'] is m\n"
            "print(m.__module__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "relaymq_bridge.manager"


def test_an_unknown_name_is_an_attribute_error() -> None:
    import relaymq_kahadb

    with pytest.raises(AttributeError, match="relaymq_kahadb.*no_such_name"):
        relaymq_kahadb.no_such_name  # noqa: B018
