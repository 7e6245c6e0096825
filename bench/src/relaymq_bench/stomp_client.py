"""Lean STOMP 1.2 client for load generation.

Producing: SEND frames come from a :class:`~relaymq_bench.stomp_codec.SendTemplate`
copied into one reusable batch buffer; each frame's body gets its sequence
number and timestamp with one ``pack_into``.  Every ``receipt_every``-th frame
(and the last one) carries a ``receipt`` header.  Brokers process a
connection's frames in order, so a RECEIPT for frame k confirms frames 0..k;
that is how the send rate counts "accepted by the broker" for STOMP.  With
persistent messages, RabbitMQ delays the receipt until the message is
confirmed and ActiveMQ until it is stored, so receipts measure the same thing
AMQP's accepted outcome does.

Consuming: subscription with ``ack:client`` (cumulative) and a prefetch
window (``prefetch-count`` for RabbitMQ, ``activemq.prefetchSize`` for
ActiveMQ/Artemis/RelayMQ); one ACK per read for the last message of the
read.  MESSAGE frames are located with ``bytes.find`` on ``content-length``.
"""

from __future__ import annotations

import select
import socket
import time
from array import array
from collections.abc import Mapping

from . import payload
from .amqp_client import RATE_TICK, RECV_SIZE, ClientStats, _cpu
from .checker import SequenceChecker
from .control import Control, emit
from .stomp_codec import (
    SendTemplate,
    StompError,
    build_frame,
    connect_frame,
    error_text,
    parse_frame,
    receipt_number,
    scan_message,
)


class StompClient:
    """One STOMP connection used either to produce or to consume."""

    def __init__(self, host: str, port: int, user: str | None = None,
                 password: str | None = None, vhost: str = "/", timeout: float = 10.0):
        self.host, self.port, self.timeout = host, port, timeout
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._rbuf = b""
        self.sock.sendall(connect_frame(vhost, user, password))
        frame = self._read_frame()
        if frame.command == "ERROR":
            raise StompError(f"CONNECT refused: {error_text(frame)}")
        if frame.command != "CONNECTED":
            raise StompError(f"expected CONNECTED, got {frame.command}")
        self.server = frame.headers.get("server", "")
        self.subscribed = False

    def _read_frame(self):  # -> stomp_codec.Frame
        while True:
            frame, pos = parse_frame(self._rbuf, 0)
            if frame is not None:
                self._rbuf = self._rbuf[pos:]
                return frame
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"{self.host}:{self.port} closed the STOMP connection")
            self._rbuf += chunk

    def _send(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            try:
                n = self.sock.send(view)
                view = view[n:]
            except BlockingIOError:
                select.select([], [self.sock], [], self.timeout)

    def subscribe(self, destination: str, prefetch: int, ack: str = "client",
                  wait_receipt: bool = True,
                  extra_headers: Mapping[str, str] | None = None) -> None:
        """SUBSCRIBE with a receipt, so a refused destination or login fails loudly.

        With ``wait_receipt`` the receipt is awaited here (used before "ready",
        when nothing can be queued yet).  Without it the consume loop sees
        the RECEIPT or ERROR among the first frames: when subscribing to a
        full queue, messages arrive ahead of the receipt and must not be
        parsed on the slow path.
        """
        headers: dict[str, str | int] = {"id": "0", "destination": destination, "ack": ack,
                   "prefetch-count": prefetch, "activemq.prefetchSize": prefetch,
                   "receipt": "sub-0"}
        headers.update(extra_headers or {})  # e.g. Artemis destination-type
        blocking = self.sock.getblocking()
        self.sock.setblocking(True)
        self._send(build_frame("SUBSCRIBE", headers))
        self.subscribed = True
        if not wait_receipt:
            self.sock.setblocking(blocking)
            return
        buf = bytearray(self._rbuf)
        deadline = time.monotonic() + self.timeout
        pos = 0
        while True:
            scan = scan_message(buf, pos)
            if scan is None:
                if time.monotonic() > deadline:
                    raise StompError(f"no receipt for SUBSCRIBE {destination}")
                chunk = self.sock.recv(RECV_SIZE)
                if not chunk:
                    raise ConnectionError("broker closed the connection on SUBSCRIBE")
                buf += chunk
                continue
            if buf.startswith(b"RECEIPT", scan.start) or buf.startswith(b"ERROR", scan.start):
                frame, _ = parse_frame(bytes(buf[scan.start:scan.next_pos]), 0)
                if frame is not None and frame.command == "ERROR":
                    raise StompError(f"SUBSCRIBE {destination} refused: {error_text(frame)}")
                if frame is not None and frame.headers.get("receipt-id") == "sub-0":
                    del buf[scan.start:scan.next_pos]
                    break
            pos = scan.next_pos
        self._rbuf = bytes(buf)
        self.sock.setblocking(blocking)

    def wait_go(self, control: Control) -> list[str]:
        """Idle until "go"; STOMP runs without heart-beats so nothing to service."""
        while True:
            select.select([control], [], [], 1.0)
            cmds = control.read_commands()
            if "stop" in cmds:
                raise SystemExit("stopped before go")
            if "go" in cmds:
                return cmds

    def close(self) -> None:
        """DISCONNECT with a receipt (bounded wait), then close the socket."""
        try:
            self.sock.setblocking(True)
            self.sock.settimeout(2.0)
            self.sock.sendall(build_frame("DISCONNECT", {"receipt": "bye"}))
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline:
                chunk = self.sock.recv(RECV_SIZE)
                if not chunk or b"receipt-id:bye" in chunk:
                    break
        except OSError:
            pass
        finally:
            self.sock.close()

    # --- hot path: producing ------------------------------------------------
    def produce(self, template: SendTemplate, count: int | None, duration: float | None,
                rate: float | None, max_inflight: int, batch: int, receipt_every: int,
                control: Control, nap: float = 0.0) -> ClientStats:
        """Send frames in batches; the send completes when the last frame is receipted.

        In duration mode the frame sent when time runs out may lack a receipt;
        then one more (receipted) message is sent so that every message is
        covered by some receipt.
        """
        sock = self.sock
        sock.setblocking(False)
        st = ClientStats()
        receipt_every = max(1, receipt_every)
        max_inflight = max(max_inflight, 2 * receipt_every)
        batch = max(1, min(batch, max_inflight))
        plain, with_r = template.plain, template.with_receipt
        lp, lr = len(plain), len(with_r)
        buf = bytearray(max(lp, lr) * batch)
        view = memoryview(buf)
        pack = payload.SEQ_TS.pack_into
        soff_p, soff_r = template.seq_offset_plain, template.seq_offset_receipt
        roff = template.receipt_offset
        low_water_base = 1 if rate else max(1, min(batch // 4, max_inflight // 4))
        seq = 0
        confirmed = 0  # frames covered by the highest receipt so far
        last_receipted_seq = -1
        pending: memoryview | None = None
        stopping = False
        writes = preads = waits = 0
        napped = False
        extra_needed = False
        data = self._rbuf
        self._rbuf = b""
        ctl_next = 0.0
        cpu0 = _cpu()
        st.t_go = time.time_ns()
        t0 = time.monotonic()
        deadline = t0 + duration if duration else None
        while True:
            mono = time.monotonic()
            if pending is None and (not stopping or extra_needed):
                room = min(batch, max_inflight - (seq - confirmed))
                if extra_needed:
                    room = min(room, 1)
                elif count is not None:
                    room = min(room, count - seq)
                    if seq >= count:
                        stopping = True
                elif deadline is not None and mono >= deadline:
                    stopping = True
                    extra_needed = seq > 0 and last_receipted_seq != seq - 1
                    room = 1 if extra_needed else 0
                if rate and not extra_needed:
                    room = min(room, int((mono - t0) * rate) + 1 - seq)
                low_water = low_water_base
                if count is not None:
                    low_water = min(low_water, count - seq)
                if room > 0 and (room >= low_water or extra_needed):
                    ts = time.time_ns()
                    if not st.t_first:
                        st.t_first = ts
                    off = 0
                    for _ in range(room):
                        if (seq + 1) % receipt_every == 0 or seq + 1 == count or extra_needed:
                            buf[off:off + lr] = with_r
                            buf[off + roff:off + roff + 10] = b"%010d" % seq
                            pack(buf, off + soff_r, seq, ts)
                            off += lr
                            last_receipted_seq = seq
                        else:
                            buf[off:off + lp] = plain
                            pack(buf, off + soff_p, seq, ts)
                            off += lp
                        seq += 1
                    extra_needed = False
                    pending = view[:off]
            progressed = False
            if pending is not None:
                try:
                    n = sock.send(pending)
                except BlockingIOError:
                    n = 0
                if n:
                    writes += 1
                    progressed = True
                    pending = pending[n:] if n < len(pending) else None
            try:
                chunk = sock.recv(RECV_SIZE)
            except BlockingIOError:
                chunk = None
            if chunk is not None:
                if not chunk:
                    raise ConnectionError("broker closed the STOMP connection")
                progressed = True
                napped = False
                preads += 1
                data = data + chunk if data else chunk
                pos = 0
                while True:
                    frame, nxt = parse_frame(data, pos)
                    if frame is None:
                        break
                    pos = nxt
                    if frame.command == "RECEIPT":
                        k = receipt_number(frame.headers.get("receipt-id", ""))
                        if k + 1 > confirmed:
                            confirmed = k + 1
                            st.t_last = time.time_ns()
                    elif frame.command == "ERROR":
                        raise StompError(f"broker error while sending: {error_text(frame)}")
                data = data[pos:]
            if stopping and not extra_needed and pending is None and confirmed >= seq:
                break
            if mono >= ctl_next:
                ctl_next = mono + 0.25
                emit("progress", sent=seq, settled=confirmed)
                if "stop" in control.read_commands() and not stopping:
                    stopping = True
                    extra_needed = seq > 0 and last_receipted_seq != seq - 1
            if not progressed:
                timeout = 0.05
                if rate and not stopping:
                    # pace in ticks of >= RATE_TICK: one wake-up sends all messages due
                    timeout = min(timeout, max(RATE_TICK, (seq + 1) / rate - (mono - t0)))
                waits += 1
                if rate and pending is None and not stopping \
                        and seq - confirmed < max_inflight // 2:
                    # paced and far from the in-flight limit: outcomes can wait for the
                    # next tick, so wake once per tick instead of once per outcome too
                    time.sleep(timeout)
                elif nap and not rate and pending is None and not stopping and not napped:
                    # window-limited: let outcomes accumulate instead of waking per outcome
                    time.sleep(nap)
                    napped = True
                else:
                    napped = False
                    select.select([sock], [sock] if pending is not None else [], [], timeout)
        cpu1 = _cpu()
        self._rbuf = data
        st.sent = st.accepted = seq
        st.cpu_user, st.cpu_sys = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
        st.extra = {"writes": writes, "reads": preads, "waits": waits}
        if not st.t_last:
            st.t_last = time.time_ns()
        return st

    # --- hot path: consuming ------------------------------------------------
    def consume(self, checker: SequenceChecker, destination: str, prefetch: int, ack: str,
                expect: int | None, control: Control, progress_interval: float | None,
                latencies: array, nap: float = 0.0,
                extra_headers: Mapping[str, str] | None = None,
                ack_receipt_every: int = 0) -> ClientStats:
        """Receive until ``expect`` of this run's messages arrived or "stop" is sent.

        Same buffering as the AMQP consumer (one preallocated buffer,
        ``recv_into``, idle ``nap``).  ``ack:client``: one cumulative ACK per
        ``prefetch // 4`` messages, or at once when the socket runs dry.
        ``ack:client-individual``: one ACK per message, written together at the
        same points.  ``ack_receipt_every`` N > 0 puts a receipt on every Nth
        ACK frame (the RECEIPTs are read and ignored).
        """
        sock = self.sock
        st = ClientStats()
        cpu0 = _cpu()
        st.t_go = time.time_ns()
        if not self.subscribed:
            self.subscribe(destination, prefetch, ack, wait_receipt=False,
                           extra_headers=extra_headers)
        sock.setblocking(False)
        recv_into = sock.recv_into
        client_ack = ack != "auto"
        individual = ack == "client-individual"
        pending: list[bytes] = []  # individual: ack ids not yet acknowledged
        acks = 0

        def ack_frames() -> bytes:
            """The ACK frame(s) for what is held; counts them and their receipts."""
            nonlocal acks
            ids = pending if individual else [last_ack_id]
            frames = []
            for ack_id in ids:
                acks += 1
                receipt = ack_receipt_every and acks % ack_receipt_every == 0
                frames.append(_ack_frame(ack_id, b"a%d" % acks if receipt else None))  # type: ignore[arg-type]
            pending.clear()
            return b"".join(frames)
        lat_append = latencies.append
        record = checker.record
        unpack_prefix = payload.AFTER_MAGIC.unpack_from
        magic = payload.MAGIC
        buf = bytearray(max(4 * RECV_SIZE, len(self._rbuf) + RECV_SIZE))
        view = memoryview(buf)
        carry = len(self._rbuf)  # frames that arrived with the SUBSCRIBE receipt
        buf[:carry] = self._rbuf
        start = end = 0
        self._rbuf = b""
        unacked = 0
        ack_threshold = max(1, prefetch // 4)
        reads = waits = 0
        last_ack_id: bytes | None = None
        next_progress = time.monotonic() + (progress_interval or 1e9)
        ctl_next = 0.0
        stopped = False
        reported = 0
        napped = False
        while True:
            if expect is not None and checker.received >= expect:
                break
            if carry:
                n, carry = carry, 0
            else:
                if len(buf) - end < RECV_SIZE:
                    if start == 0:
                        buf.extend(bytes(len(buf)))
                        view = memoryview(buf)
                    else:
                        buf[:end - start] = buf[start:end]
                        end -= start
                        start = 0
                try:
                    n = recv_into(view[end:end + RECV_SIZE])
                except BlockingIOError:
                    n = -1
            mono = time.monotonic()
            if n < 0:
                waits += 1
                if checker.received != reported and mono >= next_progress:
                    # the last chunk may have come between two progress ticks
                    reported = checker.received
                    emit("progress", received=reported)
                if mono >= ctl_next or stopped:
                    ctl_next = mono + 0.05
                    for cmd in control.read_commands():
                        if cmd == "stop":
                            stopped = True
                        elif cmd.startswith("expect "):
                            expect = int(cmd.split()[1])
                    if stopped:
                        break
                if nap and not stopped and not napped:
                    # data is flowing: let a batch accumulate (fewer, larger reads)
                    time.sleep(nap)
                    napped = True
                else:  # nothing came during a nap either: block until data arrives
                    napped = False
                    if unacked and last_ack_id is not None:
                        # ack what we hold before blocking; under load an ACK goes out
                        # only every ack_threshold messages
                        self._send(ack_frames())
                        unacked = 0
                    select.select([sock, control], [], [], 0.05)  # type: ignore[type-var]
                continue
            if n == 0:
                raise ConnectionError("broker closed the STOMP connection")
            now = time.time_ns()
            reads += 1
            napped = False
            end += n
            pos = start
            got = 0
            last_s = last_e = 0
            while pos < end:
                c = buf[pos]
                if c == 10 or c == 13:  # heart-beat EOLs between frames
                    pos += 1
                    continue
                hdr_end = buf.find(b"\n\n", pos, end)
                if hdr_end < 0:
                    break
                # brokers put content-length last or nearly so: search backwards
                cl = buf.rfind(b"\ncontent-length:", pos, hdr_end)
                body = hdr_end + 2
                if cl >= 0:
                    fend = body + int(buf[cl + 16:buf.find(b"\n", cl + 16, hdr_end + 1)])
                    if fend >= end:
                        break
                else:
                    fend = buf.find(b"\x00", body, end)
                    if fend < 0:
                        break
                if c == 77:  # "M": MESSAGE is the only server frame starting with M
                    if fend - body >= 28 and buf.startswith(magic, body):
                        run, prod, seq, ts = unpack_prefix(buf, body + 4)
                        record(run, prod, seq)
                        lat_append(now - ts)
                    else:
                        checker.record_foreign()
                    got += 1
                    last_s = pos
                    last_e = hdr_end
                    if individual:
                        i = buf.find(b"\nack:", pos, hdr_end)
                        k = i + 5
                        if i < 0:  # STOMP 1.1: the message-id is the ack id
                            k = buf.find(b"\nmessage-id:", pos, hdr_end) + 12
                        pending.append(bytes(buf[k:buf.find(b"\n", k, hdr_end + 1)]))
                else:
                    frame, _ = parse_frame(bytes(buf[pos:fend + 1]), 0)
                    if frame is not None and frame.command == "ERROR":
                        raise StompError(f"broker error while consuming: {error_text(frame)}")
                pos = fend + 1
                if pos < end and buf[pos] == 10:  # the EOL most brokers send after NUL
                    pos += 1
            if got:
                if not st.t_first:
                    st.t_first = now
                st.t_last = now
                st.sent += got
                if client_ack:
                    unacked += got
                    i = buf.find(b"\nack:", last_s, last_e)
                    if i < 0:
                        i = buf.find(b"\nmessage-id:", last_s, last_e)
                        last_ack_id = bytes(buf[i + 12:buf.find(b"\n", i + 12, last_e + 1)])
                    else:
                        last_ack_id = bytes(buf[i + 5:buf.find(b"\n", i + 5, last_e + 1)])
                    if unacked >= ack_threshold or (expect is not None
                                                    and checker.received >= expect):
                        self._send(ack_frames())
                        unacked = 0
            start = pos
            if start == end:
                start = end = 0
            if mono >= next_progress:
                next_progress = mono + (progress_interval or 1e9)
                reported = checker.received
                emit("progress", received=reported)
            if mono >= ctl_next:
                ctl_next = mono + 0.05
                for cmd in control.read_commands():
                    if cmd == "stop":
                        stopped = True
                    elif cmd.startswith("expect "):
                        expect = int(cmd.split()[1])
                if stopped:
                    break
        cpu1 = _cpu()
        if client_ack and unacked and last_ack_id is not None:
            self._send(ack_frames())
        self._rbuf = bytes(buf[start:end])
        st.cpu_user, st.cpu_sys = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
        st.extra = {"reads": reads, "waits": waits, "acks": acks}
        return st


def _ack_frame(ack_id: bytes, receipt: bytes | None = None) -> bytes:
    """ACK of one id; carries 1.2's id and 1.1's message-id/subscription (and a receipt)."""
    extra = b"\nreceipt:" + receipt if receipt else b""
    return (b"ACK\nid:" + ack_id + b"\nsubscription:0\nmessage-id:" + ack_id + extra
            + b"\n\n\x00")
