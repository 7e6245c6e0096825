"""In-process benchmark: the broker side of STOMP without sockets.

    .venv/bin/python plugins/stomp/bench_session.py [--n 100000] [--size 1024]

A real broker and two `StompProtocol`s wired to fake transports: one producer
fed batches of SEND frames (as one socket read would deliver them), one
consumer (``--ack client``: one cumulative ACK per batch, the default;
``client-individual``: one ACK frame per message, sent together; ``auto``: none).
Reports CPU per message
for parse -> session -> kernel -> MESSAGE frame -> ACK, i.e. everything the
broker does except the socket system calls and the event loop's polling (the
fake clients' own work, finding `ack` headers and writing ACK frames, is timed
and left out).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import time
from typing import Any

from relaymq.testing import broker_config, plugin_element, running_broker


class FakeTransport:
    def __init__(self) -> None:
        self.out: list[bytes] = []
        self.closed = False
        self.protocol: Any = None

    def write(self, data: Any) -> None:
        self.out.append(data)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True
        asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)


async def run(n: int, size: int, batch: int, kahadb: str | None = None,
              ack: str = "client") -> None:
    config = broker_config("stomp://127.0.0.1:0")
    if kahadb:  # persistent SENDs stored in a kahaDB in this directory
        shutil.rmtree(kahadb, ignore_errors=True)
        config = broker_config("stomp://127.0.0.1:0", persistent=True, data_directory=kahadb)
        config.persistence_adapter = plugin_element("kahaDB")
    async with running_broker(config) as broker:
        connector = broker.connectors[0]
        from relaymq_stomp.server import StompProtocol

        prod, cons = StompProtocol(connector), StompProtocol(connector)
        tp, tc = FakeTransport(), FakeTransport()
        tp.protocol, tc.protocol = prod, cons
        prod.connection_made(tp)  # type: ignore[arg-type]
        cons.connection_made(tc)  # type: ignore[arg-type]
        connect = b"CONNECT\naccept-version:1.2\nhost:x\n\n\x00"
        prod.data_received(connect)
        cons.data_received(connect)
        cons.data_received(b"SUBSCRIBE\ndestination:/queue/bench\nid:0\nack:" + ack.encode()
                           + b"\nactivemq.prefetchSize:1000\n\n\x00")
        for _ in range(5):
            await asyncio.sleep(0)
        tc.out.clear()
        body = b"x" * size
        frame = (b"SEND\ndestination:/queue/bench\ncontent-type:text/plain\nregion:eu\n"
                 + (b"persistent:true\n" if kahadb else b"")
                 + b"content-length:%d\n\n" % size) + body + b"\x00"
        chunk = frame * batch
        sent = 0
        received = 0
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        client = 0.0  # CPU the fake clients spent reading MESSAGEs and writing ACKs
        clock = time.process_time
        while received < n:
            if sent < n:
                prod.data_received(chunk)
                sent += batch
            for _ in range(3):
                await asyncio.sleep(0)
            c0 = clock()
            data = b"".join(bytes(x) for x in tc.out)
            tc.out.clear()
            tp.out.clear()
            if not data:
                client += clock() - c0
                if kahadb:
                    await asyncio.sleep(0.0002)  # waiting for the store: idle, not spinning
                continue
            received += data.count(b"\nsubscription:")
            acks = b""
            if ack == "client":
                a = data.rfind(b"\nack:")
                e = data.find(b"\n", a + 5)
                acks = b"ACK\nid:" + data[a + 5:e] + b"\n\n\x00"
            elif ack == "client-individual":
                frames = []
                a = data.find(b"\nack:")
                while a >= 0:
                    e = data.find(b"\n", a + 5)
                    frames.append(b"ACK\nid:" + data[a + 5:e] + b"\n\n\x00")
                    a = data.find(b"\nack:", e)
                acks = b"".join(frames)
            client += clock() - c0
            if acks:
                cons.data_received(acks)
        cpu = time.process_time() - cpu0 - client
        wall = time.perf_counter() - t0
        print(f"{received} x {size} B through one queue, {batch} frames per read, ack:{ack}")
        print(f"  {cpu / received * 1e6:.1f} us CPU per message ({received / wall:,.0f} msg/s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--profile", help="write cProfile stats to this file")
    ap.add_argument("--kahadb", metavar="DIR", help="persistent SENDs, stored in a kahaDB in DIR")
    ap.add_argument("--ack", choices=("auto", "client", "client-individual"), default="client")
    args = ap.parse_args()
    if args.profile:
        import cProfile

        prof = cProfile.Profile()
        prof.runcall(asyncio.run, run(args.n, args.size, args.batch, args.kahadb, args.ack))
        prof.dump_stats(args.profile)
    else:
        asyncio.run(run(args.n, args.size, args.batch, args.kahadb, args.ack))


if __name__ == "__main__":
    main()
