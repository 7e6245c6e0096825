"""`relaymq run` in a child process, compiled or interpreted, for tests that could
crash a broker: a crash ends the child and fails the test instead of killing pytest."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from relaymq.testing import free_port

RELAYMQ = str(Path(sys.executable).with_name("relaymq"))
#: the packages whose per-message modules `make compile` builds
COMPILED_PACKAGES = ("relaymq", "relaymq_amqp", "relaymq_stomp")


def compiled_build_problem() -> str | None:
    """Why the compiled variant cannot run here (None: it can): no extensions
    (`make compile` not run) or a source newer than its extension (the child
    would run that package interpreted)."""
    import importlib

    for pkg in COMPILED_PACKAGES:
        here = Path(importlib.import_module(pkg).__file__ or "").parent
        built = [p for p in here.rglob("*.so") if "__pycache__" not in p.parts]
        if not built:
            return f"{pkg} has no compiled modules: run `make compile`"
        for ext in built:
            source = ext.with_name(ext.name.split(".", 1)[0] + ".py")
            if source.exists() and source.stat().st_mtime > ext.stat().st_mtime:
                return f"{source} is newer than its compiled module: run `make compile`"
    return None


class BrokerProcess:
    """A broker started with `relaymq run --config`, an AMQP and a STOMP connector,
    the memory store unless `persistence` names another. `build` is "compiled",
    "pure" (RELAYMQ_PURE_PYTHON=1) or "any" (whatever this test run uses)."""

    def __init__(self, directory: Path, build: str, stomp_options: str = "",
                 persistence: str = "") -> None:
        self.directory = directory
        self.build = build
        self.stomp_options = stomp_options
        #: a `<persistenceAdapter>` child, e.g. `<kahaDB directory="..."/>` (default: memory)
        self.persistence = persistence
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = directory / "broker.log"
        self.starts = 0

    def start(self) -> None:
        self.amqp_port, self.stomp_port = free_port(), free_port()
        cfg = self.directory / "activemq.xml"
        query = f"?{self.stomp_options}" if self.stomp_options else ""
        persistence = (f"<persistenceAdapter>{self.persistence}</persistenceAdapter>"
                       if self.persistence else "")
        cfg.write_text(f"""<broker xmlns="http://activemq.apache.org/schema/core" brokerName="under-test"
        persistent="{'true' if self.persistence else 'false'}">
  {persistence}
  <transportConnectors>
    <transportConnector name="amqp" uri="amqp://127.0.0.1:{self.amqp_port}"/>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{self.stomp_port}{query}"/>
  </transportConnectors>
</broker>""")
        env = dict(os.environ)  # build "any": as this test run (RELAYMQ_PURE_PYTHON or not)
        if self.build == "compiled":
            env.pop("RELAYMQ_PURE_PYTHON", None)
        elif self.build == "pure":
            env["RELAYMQ_PURE_PYTHON"] = "1"
        self.starts += 1
        out = open(self.log, "ab")  # noqa: SIM115 - the child writes it until it ends
        try:
            self.proc = subprocess.Popen([RELAYMQ, "run", "--config", str(cfg)], stdout=out,
                                         stderr=subprocess.STDOUT, env=env)
        finally:
            out.close()
        deadline = time.monotonic() + 30
        for port in (self.amqp_port, self.stomp_port):
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), 0.2).close()
                    break
                except OSError:
                    if self.proc.poll() is not None:
                        raise AssertionError(f"broker exited: {self.output()[-3000:]}") from None
                    if time.monotonic() >= deadline:
                        raise AssertionError("broker did not listen") from None
                    time.sleep(0.05)
        self._check_build()

    def _check_build(self) -> None:
        """The child says how each package runs ("running relaymq: compiled (20
        modules); ..."): the compiled variant must really run compiled."""
        deadline = time.monotonic() + 10
        while True:
            found = re.findall(r"running (relaymq: .*)", self.output())
            if found:
                break
            if time.monotonic() >= deadline:
                raise AssertionError(f"no 'running ...' line from the broker: {self.output()[-2000:]}")
            time.sleep(0.05)
        status = dict(part.split(": ", 1) for part in found[-1].strip().split("; "))
        for pkg in COMPILED_PACKAGES:
            how = status.get(pkg, "")
            if self.build == "any":  # whatever this checkout runs
                continue
            if self.build == "compiled":
                assert how.startswith("compiled"), f"{pkg} runs {how!r} in the compiled broker"
            else:
                assert how.startswith("pure Python"), f"{pkg} runs {how!r} in the pure broker"

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def describe_death(self) -> str:
        assert self.proc is not None
        code = self.proc.poll()
        how = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit {code}"
        return f"the broker died ({how}); log tail: {self.output()[-2000:]}"

    def ensure_running(self) -> None:
        if not self.alive():
            self.start()

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def require_build(build: str) -> None:
    """The compiled variant needs a current `make compile`; without one it skips
    (and fails in CI, where RELAYMQ_REQUIRE_ALL turns skips into failures)."""
    if build == "compiled":
        problem = compiled_build_problem()
        if problem is not None:
            pytest.skip(problem)
