"""Stream drivers run as child processes (stream_driver.py) for the crash tests:
start, kill with SIGKILL, restart on the same checkpoint.

A restarted driver is a *standby*: started ahead, it builds its SparkSession and
runs the same kind of query once on a scratch queue and checkpoint of its own
(its JVM, its Python workers and the source's runner come up), then waits for its
go file before it starts the real query. The kills happen at the same points as
with a cold restart (after two more committed micro-batches); only the start-up of
the next driver runs while the previous one works, as a replacement driver kept
warm would. The real query (its checkpoint, offsets, commits) starts only after
the previous driver is dead."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from proton import Message
from relaymq.testing.waits import wait_until
from relaymq_spark.client import Client, Endpoint

DRIVER = str(Path(__file__).with_name("stream_driver.py"))


def fill(url: str, dest: str, count: int, start: int = 0) -> None:
    sent = Client(Endpoint(url)).send(
        Message(body=f"msg-{i}", address=f"queue://{dest}", id=f"id-{i}", durable=True)
        for i in range(start, start + count))
    assert sent == count


def committed_batches(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.exists() else 0


class Driver:
    """One stream_driver.py process (its Python and its JVM: one process group)."""

    def __init__(self, args: list[str], log: Path, go: Path | None = None) -> None:
        self.go = go
        extra = [str(go)] if go is not None else []
        out = open(log, "ab")  # noqa: SIM115 - the child writes it until it ends
        try:
            self.proc = subprocess.Popen([sys.executable, DRIVER, *args, *extra], stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True,
                                         env=dict(os.environ, PYSPARK_PYTHON=sys.executable))
        finally:
            out.close()
        self.log = log

    def release(self, timeout: float = 240) -> None:
        """Wait until the standby is ready (session and workers up), then let it
        start its query."""
        assert self.go is not None
        ready = self.go.with_name(self.go.name + ".ready")
        wait_until(lambda: ready.exists() or self.proc.poll() is not None,
                   "the standby driver ready", timeout=timeout, interval=0.1)
        assert self.proc.poll() is None, self.log.read_text()[-5000:]
        self.go.touch()

    def kill(self) -> None:
        """SIGKILL the driver: its Python process and its JVM."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def wait(self, timeout: float = 300) -> None:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"driver did not finish: {self.log.read_text()[-3000:]}") from None
        assert rc == 0, self.log.read_text()[-5000:]


def run_to_end(args: list[str], log: Path, timeout: float = 300) -> None:
    Driver(args, log).wait(timeout)


def kill_twice_then_finish(args: list[str], most: str, checkpoint: Path, log: Path,
                           feed: Callable[[int], None]) -> None:
    """Run the driver, SIGKILL it after two more committed micro-batches, twice;
    then run it on the same checkpoint until everything available is done.

    `feed(stage)` adds input before each run (stages 0, 1, 2): each stage must
    add at least two micro-batches' worth, so the two commits a kill waits for
    always come, however far a run got before it was killed (a driver that had
    read everything would otherwise wait for commits that never come). Each
    run's driver is a standby started one run ahead (module docstring)."""
    gates = checkpoint.parent / "gates"
    gates.mkdir(exist_ok=True)

    def standby(run: int, mode: str) -> Driver:
        return Driver([*args, mode, most], log, gates / f"go-{run}")

    drivers = [standby(0, "run"), standby(1, "run")]
    try:
        for stage in range(2):
            feed(stage)
            before = committed_batches(checkpoint)
            current = drivers[stage]
            current.release()
            if stage == 0:  # the last run's standby comes up while the first two run
                drivers.append(standby(2, "finish"))
            try:
                def progressed(proc: subprocess.Popen[bytes] = current.proc,
                               before: int = before) -> bool:
                    return committed_batches(checkpoint) >= before + 2 or proc.poll() is not None

                wait_until(progressed, "two more committed micro-batches", timeout=240,
                           interval=0.2)
                assert current.proc.poll() is None, log.read_text()[-5000:]
            finally:
                current.kill()
        feed(2)
        drivers[2].release()
        drivers[2].wait()
    finally:
        for driver in drivers:  # a failed run leaves no standby behind
            if driver.proc.poll() is None:
                driver.kill()


def thirds(total: int, stage: int) -> tuple[int, int]:
    """`(start, count)` of the stage-th of three consecutive parts of range(total)."""
    bounds = [0, total // 3, 2 * total // 3, total]
    return bounds[stage], bounds[stage + 1] - bounds[stage]
