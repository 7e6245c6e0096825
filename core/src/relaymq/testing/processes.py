"""A real broker process for tests: `relaymq run --config FILE`, its output in a log
file, started and waited for until its connectors listen, stopped with SIGTERM or
killed with SIGKILL (crash tests)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from relaymq.testing.net import is_listening
from relaymq.testing.waits import wait_until

#: the `relaymq` command of the interpreter running the tests
RELAYMQ = str(Path(sys.executable).with_name("relaymq"))


class RelaymqProcess:
    """`relaymq run --config config`, writing to `log`; `start` returns once every port
    of `ports` accepts connections (AssertionError, with the log, when the process
    exits first or the bound runs out)."""

    def __init__(self, config: Path, log: Path, ports: Sequence[int] = (),
                 env: dict[str, str] | None = None, args: Sequence[str] = ()) -> None:
        self.config = config
        self.log = log
        self.ports = list(ports)
        self.env = env
        self.args = list(args)  # more `relaymq run` arguments (``-D name=value``)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *, wait: bool = True, timeout: float = 60.0) -> RelaymqProcess:
        with open(self.log, "ab") as out:  # the child keeps its own descriptor
            self.proc = subprocess.Popen([RELAYMQ, "run", "--config", str(self.config), *self.args],
                                         stdout=out, stderr=subprocess.STDOUT, env=self.env)
        if wait:
            self.wait_listening(timeout)
        return self

    def listening(self) -> bool:
        return all(is_listening(port) for port in self.ports)

    def wait_listening(self, timeout: float = 60.0) -> None:
        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"the broker exited with {self.proc.returncode}:\n"
                                     f"{self.output()[-5000:]}")
            return self.listening()

        try:
            wait_until(ready, f"the broker to listen on {self.ports}", timeout)
        except AssertionError:
            self.kill()
            raise

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def alive(self) -> bool:
        """Started and not (yet) ended."""
        return self.proc is not None and self.proc.poll() is None

    def describe_death(self) -> str:
        """How the process ended (exit code or signal, e.g. SIGSEGV) and its log's tail."""
        assert self.proc is not None, "never started"
        code = self.proc.poll()
        how = (f"signal {signal.Signals(-code).name}" if code is not None and code < 0
               else f"exit {code}")
        return f"the broker died ({how}); log tail:\n{self.output()[-2000:]}"

    def kill(self) -> None:
        """SIGKILL (a crash), and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout: float = 30.0, must_stop: bool = True) -> None:
        """SIGTERM and wait; past `timeout` SIGKILL it, and (`must_stop`) fail the test."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                if must_stop:
                    raise AssertionError(f"the broker did not stop within {timeout:g} s of "
                                         f"SIGTERM:\n{self.output()[-5000:]}") from None
