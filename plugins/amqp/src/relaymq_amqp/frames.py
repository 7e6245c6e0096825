"""A guard on the AMQP frame stream in front of proton.

Proton 0.40's engine ignores frames it cannot decode and performatives it does
not know, so a broken or hostile peer would stall instead of being told. The
guard looks at every frame header (size, data offset, type), checks that the
body is one of the nine performatives as a described list that fits in its
frame, and fully decodes the small control frames. Transfer payloads are not
buffered or decoded: only their performative's prefix is checked.

`feed` returns how many bytes of the chunk are good; the caller hands those to
proton and closes the connection with the guard's `error` condition when the
count falls short.

A flow asking for transactional acquisition (a `txn-id` in its properties) is
let through with its link's name in `acquisitions`: the connection refuses that
link before proton's flow event gives it credit (docs/amqp.md, Transactions).
"""

from __future__ import annotations

import struct
from typing import Any, Final

from relaymq_amqp.attach import read_attach
from relaymq_amqp.scanner import DecodeError, decode

_HEADER: Final = struct.Struct(">IBBH")
_U32: Final = struct.Struct(">I").unpack_from

PERFORMATIVES: Final = range(0x10, 0x19)  # open .. close
TRANSFER: Final = 0x14
DISPOSITION: Final = 0x15
ATTACH: Final = 0x12
#: attaches with capabilities kept until their link is handled (a bound against floods)
MAX_ATTACHES: Final = 1024
FLOW: Final = 0x13
DETACH: Final = 0x16
END: Final = 0x17
_FLOW_HANDLE: Final = 4
_FLOW_PROPERTIES: Final = 10  # the flow performative's properties field
#: the peer's receiver links kept by (channel, handle), to name the link of a flow
#: (a bound against floods: the oldest is forgotten past it)
MAX_RECEIVERS: Final = 65536
ACQUISITION_REFUSED: Final = (
    "transactional acquisition (a flow carrying txn-id in its properties, AMQP 1.0 "
    "section 4.4.3) is not supported; receive normally and settle each delivery "
    "with a transactional-state disposition naming the transaction")


def _asks_transactional_acquisition(fields: Any) -> bool:
    """A flow whose properties name a txn-id: the receiver asks to acquire in a transaction."""
    if not isinstance(fields, list) or len(fields) <= _FLOW_PROPERTIES:
        return False
    props = fields[_FLOW_PROPERTIES]
    return isinstance(props, dict) and "txn-id" in props


#: Control frames are small; a larger one is buffered only up to this size.
MAX_CONTROL_FRAME: Final = 1024 * 1024


class FrameGuard:
    """Validates an AMQP frame stream that starts with the 8-byte protocol header."""

    __slots__ = ("max_frame_size", "_skip", "_partial", "error", "attaches", "receivers",
                 "acquisitions", "accepts_only")

    def __init__(self, max_frame_size: int) -> None:
        self.max_frame_size = max_frame_size
        self._skip = 8  # the protocol header: proton checks it
        self._partial = b""  # the start of a frame that straddles chunks
        self.error: tuple[str, str] | None = None  # (condition, description)
        #: (link name, peer's role) -> (offered, desired) capabilities of attaches
        #: that carried some (proton drops them; see `attach`)
        self.attaches: dict[tuple[str, bool], tuple[list[str], list[str]]] = {}
        #: (channel, handle) -> name of each attached link whose peer end receives
        self.receivers: dict[tuple[int, int], str] = {}
        #: names of receiver links whose flow asked for transactional acquisition: the
        #: connection refuses each such link before that flow takes effect
        self.acquisitions: set[str] = set()
        #: every disposition in the bytes `feed` last passed was a receiver's settled
        #: `accepted` in the plain form (see `disposition_kind`; True when there was
        #: none): the connection then knows the outcome of each delivery event those
        #: bytes cause without asking proton for it
        self.accepts_only = True

    def feed(self, data: bytes) -> int:
        """Check `data`; return how many of its bytes may go to proton."""
        self.accepts_only = True
        if self.error is not None:
            return 0
        n = len(data)
        pos = 0
        if self._skip:
            if self._skip >= n:
                self._skip -= n
                return n
            pos = self._skip
            self._skip = 0
        if self._partial:
            head = self._partial
            take = 64  # enough to judge a transfer; a control frame may need more
            while True:
                buf = head + data[pos:pos + take]
                verdict = self._check(buf, 0, len(buf))
                if verdict is not None or pos + take >= n:
                    break
                take *= 8
            if verdict is None:  # still not enough to judge
                self._partial = buf
                return n
            if verdict < 0:
                return 0
            self._partial = b""
            # the frame started in an earlier chunk: continue after it
            consumed = verdict - len(head)
            if consumed > n - pos:
                self._skip = consumed - (n - pos)
                return n
            pos += consumed
        maxf: int = self.max_frame_size or 0xFFFFFFFF
        while pos < n:
            # Fast path: a whole transfer (or heartbeat) header, or a whole plain
            # disposition, inside this chunk. (The header is read byte by byte:
            # native integers in the compiled build, no tuple or call per frame.)
            if n - pos >= 11 and data[pos + 4] == 2 and data[pos + 5] == 0:
                size = (data[pos] << 24) | (data[pos + 1] << 16) | (data[pos + 2] << 8) | data[pos + 3]
                if 8 <= size <= maxf:
                    end = pos + size
                    body = pos + 8
                    if body == end:
                        pos = end
                        continue
                    if data[body] == 0 and data[body + 1] == 0x53:
                        code = data[body + 2]
                        if code == TRANSFER and n - pos >= 24:
                            t = data[body + 3]
                            if t == 0xC0:
                                fields_end = body + 5 + data[body + 4]
                            elif t == 0xD0:
                                fields_end = body + 8 + ((data[body + 4] << 24) | (data[body + 5] << 16)
                                                         | (data[body + 6] << 8) | data[body + 7])
                            else:
                                fields_end = end + 1
                            if fields_end <= end:
                                if end > n:
                                    self._skip = end - n
                                    return n
                                pos = end
                                continue
                        elif code == DISPOSITION and end <= n:
                            # a consumer's outcome, one per message with individual
                            # settlement: checked in place instead of decoded
                            kind = disposition_kind(data, body + 3, end)
                            if kind != NOT_PLAIN:
                                if kind != SETTLED_ACCEPT:
                                    self.accepts_only = False
                                pos = end
                                continue
            verdict = self._check(data, pos, n)
            if verdict is None:
                self._partial = data[pos:]
                return n
            if verdict < 0:
                return pos
            if verdict > n:
                self._skip = verdict - n
                return n
            pos = verdict
        return n

    def _check(self, data: bytes, pos: int, n: int) -> int | None:
        """The end offset of the frame at `pos` (possibly beyond `n`), None when
        more bytes are needed to judge it, or -1 (with `error` set) when it is bad."""
        if n - pos < 8:
            return None
        size, doff, ftype, channel = _HEADER.unpack_from(data, pos)
        if size < 8 or doff < 2 or doff * 4 > size:
            return self._fail("amqp:connection:framing-error",
                              f"bad frame header (size {size}, data offset {doff})")
        if self.max_frame_size and size > self.max_frame_size:
            return self._fail("amqp:connection:framing-error",
                              f"frame of {size} bytes exceeds the max-frame-size {self.max_frame_size}")
        if ftype != 0:
            return self._fail("amqp:connection:framing-error", f"unexpected frame type {ftype}")
        end = pos + size
        body = pos + doff * 4
        if body == end:
            return end  # an empty frame: a heartbeat
        avail = min(n, end)
        if avail < end and avail - body < 12:
            return None
        return self._perf(data, body, avail, end, channel)

    def _perf(self, data: bytes, body: int, avail: int, end: int, channel: int) -> int | None:
        if end - body < 3:
            return self._fail("amqp:decode-error", "truncated performative")
        if data[body] != 0x00:
            return self._fail("amqp:decode-error", "a frame body must be a described performative")
        c = data[body + 1]
        if c == 0x53:
            code = data[body + 2]
            lst = body + 3
        elif c == 0x80:
            if avail - body < 10:
                return None if avail < end else self._fail("amqp:decode-error", "truncated descriptor")
            code = int.from_bytes(data[body + 2:body + 10], "big")
            lst = body + 10
        else:
            return self._fail("amqp:decode-error", f"unsupported performative descriptor 0x{c:02x}")
        if code not in PERFORMATIVES:
            return self._fail("amqp:not-implemented", f"unknown performative 0x{code:x}")
        if lst >= avail:
            return None if avail < end else self._fail("amqp:decode-error", "missing performative fields")
        t = data[lst]
        if t == 0x45:
            fields_end = lst + 1
        elif t == 0xC0:
            if lst + 1 >= avail:
                return None
            fields_end = lst + 2 + data[lst + 1]
        elif t == 0xD0:
            if lst + 5 > avail:
                return None
            fields_end = lst + 5 + _U32(data, lst + 1)[0]
        else:
            return self._fail("amqp:decode-error", f"performative fields must be a list, not 0x{t:02x}")
        if fields_end > end:
            return self._fail("amqp:decode-error", "performative runs past the end of its frame")
        if code == TRANSFER:
            return end
        if code == DISPOSITION:
            self.accepts_only = False  # one decoded in full: its outcome is proton's to say
        # A control frame: small, so decode it fully.
        if end > avail:
            if end - body > MAX_CONTROL_FRAME:
                return self._fail("amqp:decode-error", "control frame too large")
            return None
        if fields_end != end:
            return self._fail("amqp:decode-error", "bytes after the performative")
        try:
            fields = decode(bytes(data[lst:fields_end]))[0]
        except DecodeError as exc:
            return self._fail("amqp:decode-error", str(exc))
        if code == ATTACH:
            found = read_attach(fields)
            if found is not None:
                attaches = self.attaches
                if len(attaches) >= MAX_ATTACHES:
                    attaches.pop(next(iter(attaches)))
                attaches[(found[0], found[1])] = (found[2], found[3])
            self._attached(channel, fields)
        elif code == FLOW and _asks_transactional_acquisition(fields):
            return self._acquisition(channel, fields, end)
        elif code == DETACH and self.receivers:
            if isinstance(fields, list) and fields and isinstance(fields[0], int):
                self.receivers.pop((channel, int(fields[0])), None)
        elif code == END and self.receivers:
            for key in [k for k in self.receivers if k[0] == channel]:
                del self.receivers[key]
        return end

    def _attached(self, channel: int, fields: Any) -> None:
        """Remember the name of a link whose peer end receives (role true)."""
        if not isinstance(fields, list) or len(fields) < 3 or fields[2] is not True:
            return
        name, handle = fields[0], fields[1]
        if not isinstance(name, str) or not isinstance(handle, int):
            return
        receivers = self.receivers
        if len(receivers) >= MAX_RECEIVERS:
            receivers.pop(next(iter(receivers)))
        receivers[(channel, int(handle))] = name

    def _acquisition(self, channel: int, fields: list[Any], end: int) -> int:
        """A flow asking for transactional acquisition: its link is named for the
        connection to refuse; one that names no attached receiver link fails the
        connection."""
        handle = fields[_FLOW_HANDLE]
        name = self.receivers.get((channel, int(handle))) if isinstance(handle, int) else None
        if name is None:
            return self._fail("amqp:not-implemented", ACQUISITION_REFUSED)
        self.acquisitions.add(name)
        return end

    def _fail(self, condition: str, description: str) -> int:
        self.error = (condition, description)
        return -1


def _plain_field(data: bytes, p: int, end: int) -> int:
    """The end of one disposition field at `p` in the plain forms clients write
    (null, true, false, uint0, smalluint, uint), or -1 for anything else."""
    if p >= end:
        return -1
    t = data[p]
    if t == 0x40 or t == 0x41 or t == 0x42 or t == 0x43:
        return p + 1
    if t == 0x52:
        return p + 2
    if t == 0x70:
        return p + 5
    return -1


#: `disposition_kind`: not in the plain form (decode it fully)
NOT_PLAIN: Final = 0
#: in the plain form, but not a receiver's settled `accepted`
PLAIN: Final = 1
#: the receiver (role true) settles its deliveries with `accepted` (settled true,
#: state accepted): the outcome one message with individual or ranged
#: acknowledgement gets
SETTLED_ACCEPT: Final = 2
_ACCEPTED_CODE: Final = 0x24


def plain_disposition(data: bytes, lst: int, end: int) -> bool:
    """True when the disposition fields at `lst` fill the frame up to `end` and
    are in the plain form every client writes for an outcome without details:
    a list8 of role, first, last, settled (null, booleans, uints), an optional
    state that is null or a described empty list under a small-ulong descriptor
    (accepted, released), and an optional batchable. Anything else (a rejected
    or modified outcome with fields, a transactional state, other encodings) is
    False: the guard then decodes the frame fully, as before."""
    return disposition_kind(data, lst, end) != NOT_PLAIN


def disposition_kind(data: bytes, lst: int, end: int) -> int:
    """`NOT_PLAIN`, `PLAIN` or `SETTLED_ACCEPT` for the disposition fields at
    `lst` (see `plain_disposition` for the plain form)."""
    if end - lst < 3 or data[lst] != 0xC0 or lst + 2 + data[lst + 1] != end:
        return NOT_PLAIN
    count = data[lst + 2]
    if count < 2 or count > 6:
        return NOT_PLAIN
    p = lst + 3
    accept = count >= 5 and p < end and data[p] == 0x41  # role: receiver
    for i in range(count):
        if i == 4 and p + 2 < end and data[p] == 0 and data[p + 1] == 0x53:
            if data[p + 2] != _ACCEPTED_CODE:
                accept = False
            p += 3  # a state: small-ulong descriptor, then an empty list
            if p < end and data[p] == 0x45:
                p += 1
            elif p + 2 < end and data[p] == 0xC0 and data[p + 1] == 1 and data[p + 2] == 0:
                p += 3
            else:
                return NOT_PLAIN
        else:
            if i == 3 and (p >= end or data[p] != 0x41):  # settled: true
                accept = False
            elif i == 4:  # no state
                accept = False
            p = _plain_field(data, p, end)
            if p < 0:
                return NOT_PLAIN
    if p != end:
        return NOT_PLAIN
    return SETTLED_ACCEPT if accept else PLAIN
