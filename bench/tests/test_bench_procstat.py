"""/proc parsing for broker CPU and memory accounting."""

from __future__ import annotations

import os

import pytest
from relaymq_bench import procstat

# field 14/15 (utime/stime) = 250 and 50 ticks; comm contains spaces and ')'
STAT = ("1234 (beam.smp) x) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 "
        "30 0 500 1000000 2000 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0")


def test_parse_stat_cpu_counts_from_last_paren():
    assert procstat.parse_stat_cpu(STAT) == pytest.approx(300 / procstat.CLK_TCK)


def test_parse_status_kb():
    text = "Name:\tbeam.smp\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n"
    assert procstat.parse_status_kb(text, "VmRSS") == 102400
    assert procstat.parse_status_kb(text, "VmHWM") == 204800
    assert procstat.parse_status_kb(text, "VmSwap") is None


def test_own_process_is_measurable():
    pid = os.getpid()
    assert procstat.cpu_seconds(pid) > 0
    rss, hwm = procstat.memory_kb(pid)
    assert rss and hwm and hwm >= rss
    assert procstat.process_name(pid).startswith("python")


def test_monitor_marks_and_peaks():
    mon = procstat.BrokerMonitor(os.getpid(), interval=0.005)
    mon.start()
    sum(i * i for i in range(200_000))  # burn a little CPU between marks
    mon.mark("sent")
    sample = mon.stop()
    assert set(sample.marks) == {"start", "sent", "end"}
    assert mon.cpu_between("start", "end") >= 0
    assert mon.cpu_between("start", "nope") is None
    assert sample.rss_peak_kb > 0 and sample.alive


def test_monitor_without_pid_is_a_no_op():
    mon = procstat.BrokerMonitor(None)
    mon.start()
    assert mon.stop().marks == {}


def test_monitor_rejects_missing_pid():
    with pytest.raises(ProcessLookupError):
        procstat.BrokerMonitor(2**22 + 12345)
