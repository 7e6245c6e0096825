"""tools/lint_tests.py: no test in the repository lacks an assertion, and the check itself works."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _lint():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("lint_tests", ROOT / "tools" / "lint_tests.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_test_in_the_repository_can_fail() -> None:
    lint = _lint()
    assert lint.check([ROOT / d for d in lint.TEST_DIRS], [ROOT / d for d in lint.HELPER_DIRS]) == []


def test_the_check_flags_tests_without_assertions(tmp_path: Path) -> None:
    (tmp_path / "helpers.py").write_text(textwrap.dedent("""
        def check_reply(x):
            assert x == 1

        def wait_ready(c):  # returns on timeout: not an assertion
            return c.wait(5)

        class Client:
            def wait_message(self):
                if not self.wait(5):
                    raise AssertionError("no message")

            def expect_error(self):
                pass

            def still_served(self):
                assert self.alive()

            def read(self):  # also defined below without an assertion: not a helper
                assert self.sock

        class File:
            def read(self):
                return b""
        """))
    (tmp_path / "test_sample.py").write_text(textwrap.dedent("""
        import pytest
        from helpers import check_reply, wait_ready

        def local_helper(x):
            check_reply(x)

        def test_assert(): assert 1
        def test_raises():
            with pytest.raises(ValueError):
                int("x")
        def test_imported_helper(): check_reply(1)
        def test_local_helper_through_helper(): local_helper(1)
        def test_raising_wait_method(c): c.wait_message()
        def test_expect_prefix(c): c.expect_error()
        def test_unique_asserting_method(c): c.still_served()
        def test_nothing(c): c.send("x")
        def test_common_name(c): c.read()
        def test_non_raising_wait(c): wait_ready(c)
        class TestGroup:
            def test_method(self): self.client.send()
        """))
    flagged = [line.split(": ")[1].split()[0] for line in _lint().check([tmp_path])]
    assert flagged == ["test_nothing", "test_common_name", "test_non_raising_wait",
                       "TestGroup.test_method"]


def test_the_check_flags_sleep_then_assert(tmp_path: Path) -> None:
    (tmp_path / "test_sleeps.py").write_text(textwrap.dedent("""
        import asyncio
        import time

        def test_sleep_then_assert(c):
            time.sleep(0.3)
            assert c.messages == []

        async def test_async_sleep_assign_assert(c):
            await asyncio.sleep(0.1)
            n = len(c.messages)
            assert n == 1

        def test_nested_block(c):
            for _ in range(3):
                time.sleep(0.1)
                assert c.alive()

        def test_pacing_is_fine(c):
            for i in range(3):
                c.send(i)
                time.sleep(0.01)
            assert c.wait_for(3)

        def test_sleep_then_act_is_fine(proc):
            time.sleep(0.5)
            proc.kill()
            assert proc.wait() != 0
        """))
    flagged = [line.split(": ")[1].split()[0] for line in _lint().check([tmp_path])]
    assert flagged == ["test_sleep_then_assert", "test_async_sleep_assign_assert",
                       "test_nested_block"]


def test_the_check_flags_reads_until_quiet(tmp_path: Path) -> None:
    (tmp_path / "test_quiet.py").write_text(textwrap.dedent("""
        async def test_quiet_positional(c):
            assert [m.text for m in await c.receive_all(0.2)] == ["x"]

        async def test_quiet_default(c):
            got = await c.receive_all()
            assert got == []

        async def test_quiet_keyword(c):
            assert await c.receive_all(timeout=1) == []

        def test_marker_read_is_fine(client):
            assert client.receive_all("/queue/X") == [b"x"]

        def test_marker_read_with_timeout_is_fine(client):
            assert client.receive_all("/queue/X", timeout=30) == [b"x"]
        """))
    flagged = [line.split(": ")[1].split()[0] for line in _lint().check([tmp_path])]
    assert flagged == ["test_quiet_positional", "test_quiet_default", "test_quiet_keyword"]


def test_the_check_flags_imports_from_test_modules(tmp_path: Path) -> None:
    (tmp_path / "test_other.py").write_text(textwrap.dedent("""
        from test_helpers import probe
        from .test_relative import thing
        import test_plain
        from .shared import fine
        from tests.test_dotted import deep

        def test_uses_them():
            assert probe and thing and test_plain and fine and deep
        """))
    lines = _lint().check([tmp_path])
    flagged = sorted(line.split("the test module ")[1].split(";")[0] for line in lines)
    assert flagged == ["test_helpers", "test_plain", "test_relative", "tests.test_dotted"]
