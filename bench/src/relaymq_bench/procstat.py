"""Broker-side resource accounting from /proc.

Why CPU time and not just throughput: on a shared 2-core box the client, the
broker and the kernel compete, so msg/s moves with whatever else runs.  The
broker's own CPU seconds (utime + stime from /proc/<pid>/stat, all threads)
divided by the messages it handled is a property of the broker's code path,
and it is what RelayMQ optimises.  Resolution is one clock tick (usually
10 ms), so runs should take at least a few hundred milliseconds.

Peak RSS is sampled from /proc/<pid>/status (VmRSS) by a background thread;
VmHWM, the kernel's own high-water mark, is reported too but covers the
process's whole life, not just the run.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def parse_stat_cpu(stat_line: str) -> float:
    """utime + stime in seconds from the text of /proc/<pid>/stat.

    The command name (field 2) may contain spaces and parentheses, so fields
    are counted from the last ')'.
    """
    rest = stat_line[stat_line.rindex(")") + 2:].split()
    # rest[0] is field 3 (state); utime is field 14, stime field 15
    return (int(rest[11]) + int(rest[12])) / CLK_TCK


def parse_status_kb(status_text: str, key: str) -> int | None:
    """A ``kB`` value (e.g. VmRSS, VmHWM) from the text of /proc/<pid>/status."""
    for line in status_text.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return None


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        return parse_stat_cpu(fh.read())


def memory_kb(pid: int) -> tuple[int | None, int | None]:
    """(VmRSS, VmHWM) in kB."""
    with open(f"/proc/{pid}/status") as fh:
        text = fh.read()
    return parse_status_kb(text, "VmRSS"), parse_status_kb(text, "VmHWM")


def process_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return "?"


@dataclass
class BrokerSample:
    """CPU seconds at named points of a run plus memory peaks."""

    marks: dict[str, float] = field(default_factory=dict)
    rss_peak_kb: int = 0
    hwm_kb: int | None = None
    alive: bool = True


class BrokerMonitor:
    """Samples a broker process during one run (no-op when pid is None)."""

    def __init__(self, pid: int | None, interval: float = 0.02):
        self.pid = pid
        self.interval = interval
        self.sample = BrokerSample()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if pid is not None and not os.path.exists(f"/proc/{pid}/stat"):
            raise ProcessLookupError(f"broker pid {pid} does not exist")

    def start(self) -> None:
        if self.pid is None:
            return
        self.mark("start")
        self._poll_memory()
        self._thread = threading.Thread(target=self._run, name="broker-rss", daemon=True)
        self._thread.start()

    def mark(self, name: str) -> None:
        if self.pid is None:
            return
        try:
            self.sample.marks[name] = cpu_seconds(self.pid)
        except OSError:
            self.sample.alive = False

    def _poll_memory(self) -> None:
        try:
            rss, hwm = memory_kb(self.pid)  # type: ignore[arg-type]
        except OSError:
            self.sample.alive = False
            return
        if rss is not None and rss > self.sample.rss_peak_kb:
            self.sample.rss_peak_kb = rss
        self.sample.hwm_kb = hwm

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._poll_memory()

    def stop(self) -> BrokerSample:
        if self.pid is None:
            return self.sample
        self.mark("end")
        self._stop.set()
        if self._thread:
            self._thread.join(1.0)
        self._poll_memory()
        return self.sample

    def cpu_between(self, a: str, b: str) -> float | None:
        m = self.sample.marks
        if a in m and b in m:
            return m[b] - m[a]
        return None
