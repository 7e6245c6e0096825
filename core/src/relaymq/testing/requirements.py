"""Whether this test run must have every component (CI) or may skip what is absent.

Tests skip when something they need is missing (a workspace plugin, Node.js and
rhea, openssl, Java, a database), so a developer can run a subset anywhere. In CI
a skip would hide breakage: `.ci/run` sets RELAYMQ_REQUIRE_ALL=1, and the pytest
plugin (`relaymq.testing.pytest_plugin`) then fails every skipped test. A skip
that is right even there (the environment makes the test meaningless, not broken:
a memory store has nothing to reopen) starts its reason with NOT_APPLICABLE.
"""

from __future__ import annotations

import os

REQUIRE_ALL_ENV = "RELAYMQ_REQUIRE_ALL"
NOT_APPLICABLE = "not applicable here: "


def require_all() -> bool:
    """True in a run that must have every component (CI)."""
    return os.environ.get(REQUIRE_ALL_ENV, "") not in ("", "0")
