"""Lean STOMP load test: broker CPU per message, producer -> queue -> consumer.

    .venv/bin/python plugins/stomp/bench_load.py [--n 200000] [--size 1024]
        [--producers 1] [--ack client|auto] [--persistent] [--url host:port]

Starts `relaymq run` (memory store, one STOMP connector) in a subprocess unless
`--url` points at a running one (then give `--pid` of the broker to measure,
e.g. ActiveMQ's java process). Producers pipeline SEND frames (a receipt every
`--receipt-every`, at most `--inflight` unreceipted); consumers subscribe with
`activemq.prefetchSize` and, in client mode, send one cumulative ACK per read.
The broker's CPU time (user + system, from /proc) over the run divided by the
messages consumed is the number that matters; wall-clock throughput is printed
too. Clients run in their own processes so they do not share the broker's core.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

CONFIG = """<broker xmlns="http://activemq.apache.org/schema/core" persistent="{persistent}">
  <persistenceAdapter><kahaDB directory="{workdir}/kahadb"/></persistenceAdapter>
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{port}"/>
  </transportConnectors>
</broker>
"""


def start_relaymq(workdir: str, kahadb: bool) -> tuple[subprocess.Popen[str], int]:
    """`relaymq run` (uvloop, tuned GC: the deployment) on a free loopback port,
    with the memory store or kahaDB."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = os.path.join(workdir, "activemq.xml")
    with open(path, "w") as f:
        f.write(CONFIG.format(port=port, workdir=workdir, persistent=str(kahadb).lower()))
    relaymq = os.path.join(os.path.dirname(sys.executable), "relaymq")
    proc = subprocess.Popen([relaymq, "run", "--config", path, "--log-level", "warning"],
                            cwd=workdir, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("relaymq run did not start listening")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


LOGIN = {"login": "admin", "passcode": "admin"}


def _connect(host: str, port: int) -> socket.socket:
    s = socket.create_connection((host, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(b"CONNECT\naccept-version:1.2\nhost:/\nlogin:%s\npasscode:%s\n\n\x00"
              % (LOGIN["login"].encode(), LOGIN["passcode"].encode()))
    buf = b""
    while b"\x00" not in buf:
        buf += s.recv(4096)
    if not buf.startswith(b"CONNECTED"):
        raise SystemExit(f"CONNECT refused: {buf[:200]!r}")
    return s


def producer(host: str, port: int, dest: str, n: int, size: int, persistent: bool,
             receipt_every: int, inflight: int, go: mp.Event) -> None:
    s = _connect(host, port)
    body = b"x" * size
    extra = b"persistent:true\n" if persistent else b""
    plain = (b"SEND\ndestination:%s\n%scontent-length:%d\n\n" % (dest.encode(), extra, size)) + body + b"\x00"

    def with_receipt(i: int) -> bytes:
        return (b"SEND\ndestination:%s\n%sreceipt:%d\ncontent-length:%d\n\n"
                % (dest.encode(), extra, i, size)) + body + b"\x00"

    go.wait()
    sent = confirmed = 0
    buf = b""
    while confirmed < n:
        batch = []
        while sent < n and sent - confirmed < inflight and len(batch) < 64:
            sent += 1
            batch.append(with_receipt(sent) if sent % receipt_every == 0 or sent == n else plain)
        if batch:
            s.sendall(b"".join(batch))
        if sent - confirmed >= inflight or sent == n:
            buf += s.recv(65536)
            while True:
                i = buf.find(b"receipt-id:")
                if i < 0:
                    break
                j = buf.find(b"\n", i)
                if j < 0:
                    break
                confirmed = max(confirmed, int(buf[i + 11:j]))
                buf = buf[j:]
            if b"ERROR" in buf:
                raise SystemExit(f"producer got {buf[:300]!r}")
    s.close()


def consumer(host: str, port: int, dest: str, n: int, ack: str, prefetch: int,
             ready: mp.Event, done: mp.Queue) -> None:
    s = _connect(host, port)
    s.sendall(b"SUBSCRIBE\ndestination:%s\nid:0\nack:%s\nactivemq.prefetchSize:%d\n"
              b"prefetch-count:%d\nreceipt:s\n\n\x00" % (dest.encode(), ack.encode(), prefetch, prefetch))
    buf = b""
    while b"receipt-id:s" not in buf:
        buf += s.recv(4096)
    ready.set()
    got = 0
    tail = b""
    t_first = 0.0
    while got < n:
        chunk = s.recv(262144)
        if not chunk:
            raise SystemExit("broker closed the consumer")
        if not t_first:
            t_first = time.monotonic()
        data = tail + chunk
        last = data.rfind(b"\x00")
        if last < 0:
            tail = data
            continue
        got += data.count(b"\x00", 0, last + 1)
        if ack == "client":
            a = data.rfind(b"\nack:", 0, last)
            e = data.find(b"\n", a + 5)
            s.sendall(b"ACK\nid:" + data[a + 5:e] + b"\n\n\x00")
        tail = data[last + 1:]
    done.put((got, t_first, time.monotonic()))
    s.close()


def one_run(args: argparse.Namespace, host: str, port_i: int, pid: int | None, dest: str) -> float:
    total = args.n * args.producers
    ctx = mp.get_context("fork")
    go, ready, done = ctx.Event(), ctx.Event(), ctx.Queue()
    cons = ctx.Process(target=consumer, args=(host, port_i, dest, total, args.ack,
                                              args.prefetch, ready, done))
    cons.start()
    ready.wait(10)
    prods = [ctx.Process(target=producer, args=(host, port_i, dest, args.n, args.size,
                                                args.persistent, args.receipt_every,
                                                args.inflight, go))
             for _ in range(args.producers)]
    for p in prods:
        p.start()
    time.sleep(0.5)
    cpu0 = cpu_seconds(pid) if pid else 0.0
    t0 = time.monotonic()
    go.set()
    got, _t_first, t_end = done.get(timeout=600)
    cpu1 = cpu_seconds(pid) if pid else 0.0
    for p in prods:
        p.join(30)
    cons.join(10)
    wall = t_end - t0
    per = (cpu1 - cpu0) / got * 1e6
    print(f"{total} x {args.size} B {'persistent' if args.persistent else 'non-persistent'}, "
          f"{args.producers} producer(s), ack:{args.ack}, prefetch {args.prefetch}: "
          f"{got / wall:,.0f} msg/s" + (f", broker CPU {per:.1f} us/msg" if pid else ""))
    return per


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200_000, help="messages per producer")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--producers", type=int, default=1)
    ap.add_argument("--ack", choices=["client", "auto"], default="client")
    ap.add_argument("--prefetch", type=int, default=1000)
    ap.add_argument("--persistent", action="store_true", help="send persistent:true")
    ap.add_argument("--store", choices=["memory", "kahadb"], default="memory",
                    help="the started broker's store (default memory)")
    ap.add_argument("--receipt-every", type=int, default=100)
    ap.add_argument("--inflight", type=int, default=2000)
    ap.add_argument("--url", help="host:port of a running broker (default: start RelayMQ)")
    ap.add_argument("--pid", type=int, help="pid of the broker to measure with --url")
    ap.add_argument("--dest", default="/queue/bench.load")
    ap.add_argument("--repeat", type=int, default=1, help="runs (against the same broker)")
    ap.add_argument("--login", default="admin")
    ap.add_argument("--passcode", default="admin")
    args = ap.parse_args()
    LOGIN.update(login=args.login, passcode=args.passcode)

    proc = None
    if args.url:
        host, port = args.url.rsplit(":", 1)
        pid = args.pid
    else:
        workdir = tempfile.mkdtemp(prefix="relaymq-bench-")
        proc, port_n = start_relaymq(workdir, args.store == "kahadb")
        host, port = "127.0.0.1", str(port_n)
        pid = proc.pid
    port_i = int(port)
    results = []
    for run in range(args.repeat):
        results.append(one_run(args, host, port_i, pid, f"{args.dest}.{run}"))
    if pid and len(results) > 1:
        per = sorted(r for r in results)
        print(f"broker CPU per message over {len(per)} runs: min {per[0]:.1f} us, "
              f"median {per[len(per) // 2]:.1f} us")
    if proc is not None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


if __name__ == "__main__":
    main()
