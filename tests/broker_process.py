"""`relaymq run` in a child process, compiled or interpreted, for tests that could
crash a broker: a crash ends the child and fails the test instead of killing pytest.

`BrokerProcess` is `relaymq.testing.processes.RelaymqProcess` (which starts, waits
for, stops and kills the process) plus what these tests need on top: a config with
an AMQP and a STOMP connector on fresh ports at each start, the build to run, and a
check that the child really runs that build."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from relaymq.testing import free_port
from relaymq.testing.processes import RelaymqProcess
from relaymq.testing.waits import wait_until

#: the packages whose per-message modules `make compile` builds
COMPILED_PACKAGES = ("relaymq", "relaymq_amqp", "relaymq_stomp")
#: what the child must say about each of them, per build
BUILD_STATUS = {"compiled": "compiled", "pure": "pure Python"}


def compiled_build_problem() -> str | None:
    """Why the compiled variant cannot run here (None: it can): no extensions
    (`make compile` not run) or a source its extension was not built from (the
    child would run that package interpreted: `relaymq.compiled` decides by
    content, and so does this)."""
    import importlib

    from relaymq.compiled import stale_source

    for pkg in COMPILED_PACKAGES:
        here = Path(importlib.import_module(pkg).__file__ or "").parent
        built = [p for p in here.rglob("*.so") if "__pycache__" not in p.parts]
        if not built:
            return f"{pkg} has no compiled modules: run `make compile`"
        stale = stale_source(pkg, str(here))
        if stale is not None:
            return f"{stale} differs from what its compiled module was built from: run `make compile`"
    return None


def build_env(build: str) -> dict[str, str]:
    """The child's environment: "compiled" without RELAYMQ_PURE_PYTHON, "pure" with
    it, "any" as this test run has it."""
    env = dict(os.environ)
    if build == "compiled":
        env.pop("RELAYMQ_PURE_PYTHON", None)
    elif build == "pure":
        env["RELAYMQ_PURE_PYTHON"] = "1"
    return env


class BrokerProcess(RelaymqProcess):
    """A broker started with `relaymq run --config`, an AMQP and a STOMP connector,
    the memory store unless `persistence` names another. `build` is "compiled",
    "pure" (RELAYMQ_PURE_PYTHON=1) or "any" (whatever this test run uses)."""

    def __init__(self, directory: Path, build: str, stomp_options: str = "",
                 persistence: str = "") -> None:
        if build not in ("any", *BUILD_STATUS):
            raise ValueError(f"build {build!r}: use one of any, {', '.join(BUILD_STATUS)}")
        self.directory = directory
        self.build = build
        self.stomp_options = stomp_options
        #: a `<persistenceAdapter>` child, e.g. `<kahaDB directory="..."/>` (default: memory)
        self.persistence = persistence
        self.amqp_port = self.stomp_port = 0
        self.starts = 0
        super().__init__(directory / "activemq.xml", directory / "broker.log")

    def _write_config(self) -> None:
        query = f"?{self.stomp_options}" if self.stomp_options else ""
        persistence = (f"<persistenceAdapter>{self.persistence}</persistenceAdapter>"
                       if self.persistence else "")
        self.config.write_text(f"""<broker xmlns="http://activemq.apache.org/schema/core" brokerName="under-test"
        persistent="{'true' if self.persistence else 'false'}">
  {persistence}
  <transportConnectors>
    <transportConnector name="amqp" uri="amqp://127.0.0.1:{self.amqp_port}"/>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{self.stomp_port}{query}"/>
  </transportConnectors>
</broker>""")

    def start(self, *, wait: bool = True, timeout: float = 60.0) -> BrokerProcess:
        """Start on fresh ports; return once both listen and the child says it runs
        the build asked for (AssertionError otherwise)."""
        self.amqp_port, self.stomp_port = free_port(), free_port()
        self.ports = [self.amqp_port, self.stomp_port]
        self._write_config()
        self.env = build_env(self.build)
        self.starts += 1
        super().start(wait=wait, timeout=timeout)
        if wait:
            try:
                self._check_build()
            except AssertionError:
                self.kill()
                raise
        return self

    def _check_build(self) -> None:
        """The child says how each package runs ("running relaymq: compiled (20
        modules); ..."): the compiled variant must really run compiled, the pure one
        interpreted."""
        found = wait_until(lambda: re.findall(r"running (relaymq: .*)", self.output()),
                           "the broker's 'running relaymq: ...' line", timeout=20,
                           interval=0.05, detail=lambda: self.output()[-2000:])
        status = dict(part.split(": ", 1) for part in found[-1].strip().split("; "))
        if self.build == "any":  # whatever this checkout runs
            return
        want = BUILD_STATUS[self.build]
        for pkg in COMPILED_PACKAGES:
            how = status.get(pkg, "")
            assert how.startswith(want), f"{pkg} runs {how!r} in the {self.build} broker"

    def ensure_running(self) -> None:
        if not self.alive():
            self.start()


def require_build(build: str) -> None:
    """The compiled variant needs a current `make compile`; without one it skips
    (and fails in CI, where RELAYMQ_REQUIRE_ALL turns skips into failures)."""
    if build == "compiled":
        problem = compiled_build_problem()
        if problem is not None:
            pytest.skip(problem)
