"""How long a partitioned queue takes to give a joining consumer its partitions.

    .venv/bin/python bench/scripts/partition_rebalance.py [--partitions 8] [--consumers 4]

Starts `relaymq run` with relaymq-queue-types (a partitioned queue, rebalance delay
1000 ms, max hand-off 3000 ms), four STOMP consumers acknowledging every message,
one producer sending keyed messages without pause; then a fifth consumer joins.
Prints the time from its SUBSCRIBE to its first message (the rebalance delay plus
the hand-off: the old owners settle what they hold of the moving partitions), and
checks per-key order over everything received.
"""

from __future__ import annotations

import argparse
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import stomp

RELAYMQ = str(Path(sys.executable).with_name("relaymq"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--consumers", type=int, default=4)
    ap.add_argument("--delay", type=int, default=1000, help="rebalance delay, ms")
    ap.add_argument("--handoff", type=int, default=3000, help="max hand-off time, ms")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    port = free_port()
    cfg = tmp / "activemq.xml"
    cfg.write_text(f"""<broker xmlns="http://activemq.apache.org/schema/core" persistent="false">
  <destinationPolicy><policyMap><policyEntries>
    <policyEntry queue="bench.>" queueType="partitioned" partitionCount="{args.partitions}"
       partitionRebalanceDelay="{args.delay}" partitionMaxHandoffTime="{args.handoff}"/>
  </policyEntries></policyMap></destinationPolicy>
  <transportConnectors><transportConnector name="stomp" uri="stomp://127.0.0.1:{port}"/></transportConnectors>
</broker>""")
    proc = subprocess.Popen([RELAYMQ, "run", "-c", str(cfg)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("the broker did not start") from None
                time.sleep(0.05)
        first: dict[str, float] = {}
        seen: dict[str, list[int]] = {}
        lock = threading.Lock()

        def consumer(name: str) -> stomp.Connection12:
            conn = stomp.Connection12([("127.0.0.1", port)])

            class L(stomp.ConnectionListener):
                def on_message(self, frame) -> None:
                    with lock:
                        first.setdefault(name, time.monotonic())
                        seen.setdefault(frame.headers["key"], []).append(int(frame.headers["n"]))
                    conn.ack(frame.headers["ack"])

            conn.set_listener("", L())
            conn.connect(wait=True)
            conn.subscribe("/queue/bench.partitioned", id="1", ack="client-individual",
                           headers={"activemq.prefetchSize": "10"})
            return conn

        olds = [consumer(f"c{i}") for i in range(args.consumers)]
        stop = threading.Event()

        def produce() -> None:
            conn = stomp.Connection12([("127.0.0.1", port)])
            conn.connect(wait=True)
            n = 0
            while not stop.is_set():
                key = f"k{n % 64}"
                conn.send("/queue/bench.partitioned", "x", headers={"JMSXGroupID": key,
                                                                    "key": key, "n": str(n)})
                n += 1
                time.sleep(0.0005)
            conn.disconnect()

        producer = threading.Thread(target=produce)
        producer.start()
        time.sleep(args.delay / 1000 + 1.5)  # the first consumers' rebalance is done
        joined = time.monotonic()
        newcomer = consumer("new")
        deadline = joined + (args.delay + args.handoff) / 1000 + 10
        while "new" not in first and time.monotonic() < deadline:
            time.sleep(0.001)
        stop.set()
        producer.join()
        time.sleep(0.5)
        for c in [*olds, newcomer]:
            c.disconnect()
        if "new" not in first:
            print("the joining consumer got nothing")
            return 1
        took = (first["new"] - joined) * 1000
        ordered = all(v == sorted(v) for v in seen.values())
        print(f"{args.partitions} partitions, {args.consumers} -> {args.consumers + 1} consumers: "
              f"first message to the newcomer after {took:.0f} ms (rebalance delay {args.delay} ms,"
              f" max hand-off {args.handoff} ms); per-key order kept: {ordered}")
        return 0 if ordered else 1
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


if __name__ == "__main__":
    sys.exit(main())
