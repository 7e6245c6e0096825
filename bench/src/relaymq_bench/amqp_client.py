"""Lean AMQP 1.0 client: one connection, one session, one link, own event loop.

Why not proton's reactor: Container + MessagingHandler costs ~40 µs per sent
and ~60 µs per received message in Python, which caps it near 20k msg/s and
makes the client, not the broker, the bottleneck.  This client:

* builds transfers from a :class:`~relaymq_bench.amqp_codec.TransferTemplate`
  into one reusable buffer, patched with one ``struct.pack_into`` each;
* writes whole batches with one ``send`` and reads with 256 KiB ``recv``;
* grants large link credit and settles received deliveries with one
  disposition (a first..last range) per read;
* parses dispositions and transfers with fixed-layout readers, never building
  per-message objects beyond a tuple.

Control frames (open/attach/flow/...) go through the generic codec.
"""

from __future__ import annotations

import os
import resource
import select
import socket
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from . import amqp_codec as ac
from . import payload
from .checker import SequenceChecker
from .control import Control, emit

RECV_SIZE = 1 << 18
RATE_TICK = 0.001  # fixed-rate producers wake at most every millisecond (each message
                   # still carries its own send timestamp)


class AmqpError(RuntimeError):
    """The broker refused something (SASL, attach, a detach/close with an error)."""


@dataclass
class LinkOptions:
    """How to address a node on a given broker (see targets.AddressStyle)."""

    address: str
    durable: int = 0                 # terminus durability (RabbitMQ: 2 => durable queue)
    capabilities: Sequence[str] = ()  # e.g. ("queue",) / ("topic",) for Artemis
    expiry_policy: str | None = None


@dataclass
class ClientStats:
    """Per-worker counters that become the JSON result line."""

    sent: int = 0
    accepted: int = 0
    rejected: int = 0
    released: int = 0
    other_outcomes: int = 0
    t_go: int = 0
    t_first: int = 0
    t_last: int = 0
    cpu_user: float = 0.0
    cpu_sys: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def _cpu() -> tuple[float, float]:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime, ru.ru_stime


class AmqpClient:
    """Connection + session + one link; see module docstring for why."""

    def __init__(self, host: str, port: int, user: str | None = None,
                 password: str | None = None, hostname: str | None = None,
                 timeout: float = 10.0, max_frame_size: int = 1 << 20):
        self.host, self.port = host, port
        self.timeout = timeout
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._rbuf = b""
        self.remote_max_frame = 512
        self.remote_idle_ms = 0
        self.max_frame_size = max_frame_size
        # session state
        self.next_outgoing_id = 0
        self.next_incoming_id = 0
        self.incoming_window = 0x7FFFFFFF
        self.remote_incoming_window = 0
        # link state
        self.handle = 0
        self.delivery_count = 0
        self.link_credit = 0
        self.last_grant = 0
        self.remote_attach: list[Any] = []
        self._sasl(user, password, hostname or host)
        self._open(hostname or host)

    # --- blocking setup helpers -------------------------------------------
    def _read_exact_header(self) -> bytes:
        while len(self._rbuf) < 8:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError(f"{self.host}:{self.port} closed during AMQP handshake")
            self._rbuf += chunk
        hdr, self._rbuf = self._rbuf[:8], self._rbuf[8:]
        return hdr

    def _read_frame(self) -> ac.Frame:
        while True:
            frames, used = ac.split_frames(self._rbuf)
            if frames:
                first = frames[0]
                # consume exactly one frame
                size = int.from_bytes(self._rbuf[:4], "big")
                self._rbuf = self._rbuf[size:]
                if first.body:  # skip heartbeats
                    return first
                continue
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"{self.host}:{self.port} closed the connection")
            self._rbuf += chunk

    def _expect(self, *codes: int) -> tuple[int, list[Any], ac.Frame]:
        while True:
            fr = self._read_frame()
            code, fields, _ = ac.decode_performative(fr.body)
            if code in codes:
                return code, fields, fr
            self._control(code, fields)

    def _sasl(self, user: str | None, password: str | None, hostname: str) -> None:
        self.sock.sendall(ac.SASL_HEADER)
        hdr = self._read_exact_header()
        if hdr == ac.AMQP_HEADER:  # broker without SASL: reconnect and speak AMQP directly
            self.sock.close()
            self.sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._rbuf = b""
            return
        if hdr != ac.SASL_HEADER:
            raise AmqpError(f"unexpected protocol header {hdr!r}")
        _, fields, _ = self._expect(ac.SASL_MECHANISMS)
        offered = fields[0] if fields else []
        offered = [offered] if isinstance(offered, str) else list(offered or [])
        if user is not None and "PLAIN" in offered:
            init = ac.sasl_init_frame("PLAIN", ac.sasl_plain_response(user, password or ""),
                                      hostname)
        elif "ANONYMOUS" in offered:
            init = ac.sasl_init_frame("ANONYMOUS", b"", hostname)
        elif "PLAIN" in offered:
            init = ac.sasl_init_frame("PLAIN", ac.sasl_plain_response("guest", "guest"), hostname)
        else:
            raise AmqpError(f"no usable SASL mechanism among {offered}")
        self.sock.sendall(init)
        _, fields, _ = self._expect(ac.SASL_OUTCOME)
        if ac.field(fields, 0, 1) != 0:
            raise AmqpError(f"SASL authentication failed (code {fields[0]})")

    def _open(self, hostname: str) -> None:
        container = f"relaymq-bench-{os.getpid()}"
        self.sock.sendall(ac.AMQP_HEADER + ac.open_frame(container, hostname, self.max_frame_size)
                          + ac.begin_frame(0, self.incoming_window))
        hdr = self._read_exact_header()
        if hdr != ac.AMQP_HEADER:
            raise AmqpError(f"unexpected protocol header {hdr!r}")
        _, fields, _ = self._expect(ac.OPEN)
        self.remote_max_frame = min(ac.field(fields, 2, 0xFFFFFFFF), self.max_frame_size)
        self.remote_idle_ms = ac.field(fields, 4, 0)
        _, fields, _ = self._expect(ac.BEGIN)
        self.next_incoming_id = ac.field(fields, 1, 0)
        self.remote_incoming_window = ac.field(fields, 2, 0)

    def _link(self, receiver: bool, opts: LinkOptions, snd_settle_mode: int) -> None:
        term = ac.terminus(ac.SOURCE if receiver else ac.TARGET, opts.address, opts.durable,
                           opts.capabilities, opts.expiry_policy)
        local = ac.terminus(ac.TARGET if receiver else ac.SOURCE, None)
        name = f"relaymq-bench-{os.getpid()}-{'rx' if receiver else 'tx'}"
        src, tgt = (term, local) if receiver else (local, term)
        self.sock.sendall(ac.attach_frame(name, self.handle, receiver, src, tgt, snd_settle_mode))
        _, fields, _ = self._expect(ac.ATTACH)
        self.remote_attach = fields
        remote_term = ac.field(fields, 5 if receiver else 6)
        if remote_term is None:
            # the broker refuses by attaching with a null terminus, then detaching with an error
            _, dfields, _ = self._expect(ac.DETACH)
            raise AmqpError(f"attach to {opts.address!r} refused: "
                            f"{ac.describe_error(ac.field(dfields, 2))}")
        if receiver:
            self.delivery_count = ac.field(fields, 9, 0)
            self.snd_settle_mode = ac.field(fields, 3, snd_settle_mode)

    def attach_sender(self, opts: LinkOptions) -> None:
        self._link(False, opts, snd_settle_mode=0)

    def attach_receiver(self, opts: LinkOptions, presettled: bool = False) -> None:
        self._link(True, opts, snd_settle_mode=1 if presettled else 0)

    # --- frames outside the hot path --------------------------------------
    def _control(self, code: int, fields: list[Any]) -> None:
        """Apply a non-transfer, non-disposition frame to session/link state."""
        if code == ac.FLOW:
            nii = ac.field(fields, 0, 0)
            self.remote_incoming_window = nii + fields[1] - self.next_outgoing_id
            if ac.field(fields, 4) is not None and not self._is_receiver():
                dc = ac.field(fields, 5, 0)
                credit = ac.field(fields, 6, 0)
                self.link_credit = dc + credit - self.delivery_count
                self.last_grant = max(credit, 1)
            if ac.field(fields, 9, False):  # echo
                self._send(self._flow(None))
        elif code in (ac.DETACH, ac.END, ac.CLOSE):
            err = ac.field(fields, 2 if code == ac.DETACH else 0)
            what = ac.PERFORMATIVE_NAMES[code]
            raise AmqpError(f"broker sent {what}: {ac.describe_error(err) if err else 'no error'}")
        # open/begin/attach duplicates, sasl frames: ignore

    def _is_receiver(self) -> bool:
        return bool(self.remote_attach) and self.remote_attach[2] is False

    def _flow(self, link_credit: int | None) -> bytes:
        if link_credit is None:
            return ac.flow_frame(self.next_incoming_id, self.incoming_window,
                                 self.next_outgoing_id, 0x7FFFFFFF)
        return ac.flow_frame(self.next_incoming_id, self.incoming_window, self.next_outgoing_id,
                             0x7FFFFFFF, self.handle, self.delivery_count, link_credit)

    def _send(self, data: bytes | memoryview) -> None:
        """Write everything, blocking in select when the socket is full."""
        view = memoryview(data)
        while view:
            try:
                n = self.sock.send(view)
                view = view[n:]
            except BlockingIOError:
                select.select([], [self.sock], [], self.timeout)

    def _control_frames(self, data: bytes) -> int:
        """Process complete control frames in ``data``; returns bytes consumed."""
        pos = 0
        n = len(data)
        while n - pos >= 8:
            size = int.from_bytes(data[pos:pos + 4], "big")
            if pos + size > n:
                break
            body = pos + data[pos + 4] * 4
            if size > 8:
                code, fields, _ = ac.decode_performative(data[body:pos + size])
                if code == ac.DISPOSITION or code == ac.TRANSFER:
                    raise AmqpError(f"unexpected {ac.PERFORMATIVE_NAMES[code]} before go")
                self._control(code, fields)
            pos += size
        return pos

    def wait_go(self, control: Control) -> list[str]:
        """Service the connection (flow, heartbeats) until the coordinator says go."""
        self.sock.setblocking(False)
        if self._rbuf:
            self._rbuf = self._rbuf[self._control_frames(self._rbuf):]
        beat = self.remote_idle_ms / 2000 if self.remote_idle_ms else None
        while True:
            r, _, _ = select.select([self.sock, control], [], [], beat)  # type: ignore[type-var]
            if control in r:
                cmds = control.read_commands()
                if "stop" in cmds:
                    raise SystemExit("stopped before go")
                if "go" in cmds:
                    return cmds
            if self.sock in r:
                chunk = self.sock.recv(RECV_SIZE)
                if not chunk:
                    raise ConnectionError("broker closed the connection")
                self._rbuf += chunk
                self._rbuf = self._rbuf[self._control_frames(self._rbuf):]
            if beat and not r:
                self._send(ac.EMPTY_FRAME)

    def close(self) -> None:
        """Detach, end and close one step at a time, each bounded by a short timeout.

        Why not all three at once: RabbitMQ's reader handles close before the
        session has applied our last dispositions, so accepted messages were
        requeued and showed up in the next run.  Waiting for the detach reply
        proves the session processed everything we sent before it.
        """
        try:
            self.sock.setblocking(True)
            self.sock.settimeout(2.0)
            for out, reply in ((ac.detach_frame(self.handle), ac.DETACH),
                               (ac.end_frame(), ac.END), (ac.close_frame(), ac.CLOSE)):
                self.sock.sendall(out)
                deadline = time.monotonic() + 2.0
                while time.monotonic() < deadline:
                    fr = self._read_frame()
                    code = fr.body[2] if len(fr.body) > 2 and fr.body[1] == 0x53 else None
                    if code == reply:
                        break
        except (OSError, ac.AmqpDecodeError, ConnectionError):
            pass
        finally:
            self.sock.close()

    # --- hot path: producing ------------------------------------------------
    def produce(self, template: ac.TransferTemplate, count: int | None, duration: float | None,
                rate: float | None, max_inflight: int, batch: int, control: Control,
                nap: float = 0.0) -> ClientStats:
        """Send ``count`` messages (or for ``duration`` s) and wait until all are settled.

        A new batch is built only when at least ``low_water`` messages may be
        sent (credit, session window and in-flight limit), so that one write
        carries many messages even when the broker settles one at a time.
        """
        sock = self.sock
        sock.setblocking(False)
        st = ClientStats()
        fpm = template.frames_per_message
        size = template.size
        batch = max(1, min(batch, max_inflight))
        buf = bytearray(template.data) * batch
        view = memoryview(buf)
        pack = template.struct.pack_into
        gap = template.gap
        idoff = template.id_offset
        tag_head = b"\xa0\x04"
        low_water_base = 1 if rate else max(1, min(batch // 4, max_inflight // 4))
        settled_flags = bytearray(count or 65536)
        seq = 0
        settled = 0
        accepted = rejected = released = other = 0
        pending: memoryview | None = None
        stopping = False
        writes = preads = waits = 0
        napped = False
        # frames that arrived with the attach reply (usually the first flow)
        data = self._rbuf[self._control_frames(self._rbuf):]
        self._rbuf = b""
        parse_disp = ac.parse_disposition
        u32 = ac._UNPACK_U32
        beat = self.remote_idle_ms / 2e3 if self.remote_idle_ms else None
        last_write = time.monotonic()
        ctl_next = 0.0
        cpu0 = _cpu()
        t_go = time.time_ns()
        t0 = time.monotonic()
        deadline = t0 + duration if duration else None
        st.t_go = t_go
        while True:
            mono = time.monotonic()
            if pending is None and not stopping:
                room = min(batch, self.link_credit, self.remote_incoming_window // fpm,
                           max_inflight - (seq - settled))
                if count is not None:
                    room = min(room, count - seq)
                    if seq >= count:
                        stopping = True
                elif deadline is not None and mono >= deadline:
                    stopping = True
                    room = 0
                if rate:
                    room = min(room, int((mono - t0) * rate) + 1 - seq)
                low_water = min(low_water_base, max(1, self.last_grant // 2))
                if count is not None:
                    low_water = min(low_water, count - seq)
                if room >= low_water and room > 0:
                    ts = time.time_ns()
                    if not st.t_first:
                        st.t_first = ts
                    off = idoff
                    for _ in range(room):
                        did = seq & 0xFFFFFFFF
                        pack(buf, off, did, tag_head, did, gap, seq, ts)
                        seq += 1
                        off += size
                    self.link_credit -= room
                    self.delivery_count += room
                    self.next_outgoing_id += room * fpm
                    self.remote_incoming_window -= room * fpm
                    pending = view[:room * size]
            progressed = False
            if pending is not None:
                try:
                    n = sock.send(pending)
                except BlockingIOError:
                    n = 0
                if n:
                    writes += 1
                    progressed = True
                    last_write = mono
                    pending = pending[n:] if n < len(pending) else None
            try:
                chunk = sock.recv(RECV_SIZE)
            except BlockingIOError:
                chunk = None
            if chunk is not None:
                if not chunk:
                    raise ConnectionError("broker closed the connection")
                progressed = True
                napped = False
                preads += 1
                data = data + chunk if data else chunk
                pos = 0
                n = len(data)
                while n - pos >= 8:
                    fsize = u32(data, pos)[0]
                    end = pos + fsize
                    if end > n:
                        break
                    if fsize > 8:
                        body = pos + data[pos + 4] * 4
                        if data[body + 2] == 0x15:
                            _, first, last, is_settled, state = parse_disp(data, body, end)
                            if is_settled:
                                # count each delivery once even if a broker repeats a range
                                if last >= len(settled_flags):
                                    settled_flags.extend(bytes(last + 1 - len(settled_flags)
                                                               + len(settled_flags)))
                                seg = settled_flags[first:last + 1]
                                fresh = seg.count(0)
                                if fresh:
                                    settled_flags[first:last + 1] = b"\x01" * len(seg)
                                    settled += fresh
                                    if state == ac.ACCEPTED:
                                        accepted += fresh
                                    elif state == ac.REJECTED:
                                        rejected += fresh
                                    elif state in (ac.RELEASED, ac.MODIFIED):
                                        released += fresh
                                    else:
                                        other += fresh
                                    st.t_last = time.time_ns()
                        else:
                            code, fields, _ = ac.decode_performative(data[body:end])
                            self._control(code, fields)
                    pos = end
                data = data[pos:]
            if stopping and pending is None and settled >= seq:
                break
            if mono >= ctl_next:
                ctl_next = mono + 0.25
                emit("progress", sent=seq, settled=settled)
                if "stop" in control.read_commands():
                    stopping = True
            if not progressed:
                timeout = 0.05
                if rate and not stopping:
                    # pace in ticks of >= RATE_TICK: one wake-up sends all messages due
                    timeout = min(timeout, max(RATE_TICK, (seq + 1) / rate - (mono - t0)))
                if beat:
                    timeout = min(timeout, max(0.0, last_write + beat - mono))
                    if mono - last_write >= beat:
                        self._send(ac.EMPTY_FRAME)
                        last_write = mono
                waits += 1
                if rate and pending is None and not stopping \
                        and seq - settled < max_inflight // 2:
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
        st.sent, st.accepted, st.rejected = seq, accepted, rejected
        st.released, st.other_outcomes = released, other
        st.cpu_user, st.cpu_sys = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
        st.extra = {"writes": writes, "reads": preads, "waits": waits}
        if not st.t_last:
            st.t_last = time.time_ns()
        return st

    # --- hot path: consuming ------------------------------------------------
    def consume(self, checker: SequenceChecker, credit: int, expect: int | None,
                control: Control, progress_interval: float | None,
                latencies: array, nap: float = 0.0, individual: bool = False) -> ClientStats:
        """Receive until ``expect`` messages of this run arrived or "stop" is sent.

        ``expect`` can also arrive later as an "expect N" command (duration
        runs, where the total is only known when producers finish).  With
        ``nap`` > 0 an idle consumer sleeps that long instead of waking on the
        first byte, so each read carries a batch (see docs/benchmarking.md).

        Reads go into one preallocated buffer with ``recv_into``: a fresh
        256 KiB ``bytes`` per ``recv`` costs page faults that showed up as
        a third of the client's CPU.  Accepted outcomes are sent as one
        first..last disposition per ``credit // 4`` messages, or at once
        when the socket runs dry.  With ``individual`` each delivery gets its
        own disposition (still written together, one write per batch), as a
        client that settles every message by itself does.
        """
        sock = self.sock
        sock.setblocking(False)
        st = ClientStats()
        presettled = self.snd_settle_mode == 1
        lat_append = latencies.append
        record = checker.record
        unpack_prefix = payload.AFTER_MAGIC.unpack_from
        magic = payload.MAGIC
        parse = ac.parse_transfer
        u32 = ac._UNPACK_U32
        recv_into = sock.recv_into
        credit = max(2, credit)
        credit_left = credit
        ack_batch = max(1, credit // 4)
        unacked = 0
        reads = waits = 0
        partial: bytearray | None = None
        first_unacked: int | None = None
        last_did = 0
        dids: list[int] = []  # individual: unsettled delivery ids
        acks = 0
        disposition = ac.disposition_frame

        def settle() -> bytes:
            nonlocal first_unacked, unacked, acks
            assert first_unacked is not None
            if individual:
                out = b"".join([disposition(d, d) for d in dids])
                acks += len(dids)
                dids.clear()
            else:
                out = disposition(first_unacked, last_did)
                acks += 1
            first_unacked = None
            unacked = 0
            return out
        buf = bytearray(max(4 * RECV_SIZE, len(self._rbuf) + RECV_SIZE))
        view = memoryview(buf)
        carry = len(self._rbuf)  # bytes kept from setup: parsed as if just received
        buf[:carry] = self._rbuf
        start = end = 0
        self._rbuf = b""
        beat = self.remote_idle_ms / 2e3 if self.remote_idle_ms else None
        last_write = time.monotonic()
        next_progress = last_write + (progress_interval or 1e9)
        ctl_next = 0.0
        stopped = False
        reported = 0
        napped = False
        cpu0 = _cpu()
        st.t_go = time.time_ns()
        self._send(self._flow(credit))
        while True:
            if expect is not None and checker.received >= expect:
                break
            if carry:
                n, carry = carry, 0
            else:
                if len(buf) - end < RECV_SIZE:
                    # compact: move the partial frame to the front (grow for huge frames)
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
                timeout = 0.05
                waits += 1
                if beat:
                    if mono - last_write >= beat:
                        self._send(ac.EMPTY_FRAME)
                        last_write = mono
                    timeout = min(timeout, beat)
                if nap and not stopped and not napped:
                    # data is flowing: let a batch accumulate (fewer, larger reads)
                    time.sleep(nap)
                    napped = True
                else:  # nothing came during a nap either: block until data arrives
                    napped = False
                    if unacked and partial is None and first_unacked is not None:
                        # settle what we hold before blocking; under load a disposition
                        # goes out only every ack_batch messages (each send costs the
                        # client a loopback TCP round through the kernel)
                        self._send(settle())
                        last_write = mono
                    select.select([sock, control], [], [], timeout)  # type: ignore[type-var]
                continue
            if n == 0:
                raise ConnectionError("broker closed the connection")
            now = time.time_ns()
            reads += 1
            napped = False
            end += n
            pos = start
            got = 0
            transfers = 0
            while end - pos >= 8:
                fend = pos + u32(buf, pos)[0]
                if fend > end:
                    break
                if fend - pos > 8:
                    body = pos + buf[pos + 4] * 4
                    if buf[body + 2] == 0x14:
                        transfers += 1
                        did, _, more, ps = parse(buf, body, fend)
                        if did is not None:
                            if first_unacked is None:
                                first_unacked = did
                            last_did = did
                            if individual and not presettled:
                                dids.append(did)
                        if more or partial is not None:
                            if partial is None:
                                partial = bytearray()
                            partial += buf[ps:fend]
                            if not more:
                                msg = bytes(partial)
                                partial = None
                                i = msg.find(magic)
                                if i < 0 or len(msg) - i < 28:
                                    checker.record_foreign()
                                else:
                                    run, prod, seq, ts = unpack_prefix(msg, i + 4)
                                    record(run, prod, seq)
                                    lat_append(now - ts)
                                got += 1
                        else:
                            i = buf.find(magic, ps, fend)
                            if i < 0 or fend - i < 28:
                                checker.record_foreign()
                            else:
                                run, prod, seq, ts = unpack_prefix(buf, i + 4)
                                record(run, prod, seq)
                                lat_append(now - ts)
                            got += 1
                    else:
                        code, fields, _ = ac.decode_performative(bytes(buf[body:fend]))
                        self._control(code, fields)
                pos = fend
            start = pos
            if start == end:
                start = end = 0
            if transfers:
                self.next_incoming_id += transfers
            if got:
                if not st.t_first:
                    st.t_first = now
                st.t_last = now
                st.sent += got
                self.delivery_count += got
                credit_left -= got
                out = b""
                if not presettled:
                    unacked += got
                    done = expect is not None and checker.received >= expect
                    if (unacked >= ack_batch or done) and first_unacked is not None \
                            and partial is None:
                        out = settle()
                if credit_left <= credit // 2:
                    out += self._flow(credit)
                    credit_left = credit
                if out:
                    self._send(out)
                    last_write = mono
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
        if first_unacked is not None and not presettled:
            self._send(settle())
        self._rbuf = bytes(buf[start:end])
        st.cpu_user, st.cpu_sys = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
        st.extra = {"reads": reads, "waits": waits, "acks": acks}
        return st
