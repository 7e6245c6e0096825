"""Bad input against a real broker process, compiled and interpreted.

Each case sends one hostile frame over a raw socket -- nesting and descriptor
chains deep enough to exhaust a C stack, counts and sizes far beyond the frame,
truncation -- and checks that the broker answers with the protocol's error,
ends only that connection (or link), stays alive, and still serves bystander
clients that were connected before.

The broker runs in a child process so that a crash (the compiled build has no
recursion guard: a C stack overflow is a segfault) fails the test instead of
killing pytest; `BrokerProcess` also checks that the compiled child really runs
compiled code.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("relaymq_amqp", reason="relaymq-amqp is not installed")
pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")
proton = pytest.importorskip("proton", reason="python-qpid-proton is not installed")

from proton.utils import BlockingConnection, LinkDetached  # noqa: E402
from relaymq_amqp.encode import encode  # noqa: E402
from relaymq_amqp.scanner import decode  # noqa: E402
from relaymq_amqp.types import Described, UInt, ULong  # noqa: E402

from .broker_process import BrokerProcess, require_build  # noqa: E402

#: a STOMP header may be long enough to carry the deep selectors below
STOMP_OPTIONS = "maxHeaderLength=1100000&amp;maxFrameSize=4000000"
DEEP = 100_000  # selector nesting


# -- the broker and its bystanders ---------------------------------------------------------------


#: `make test` runs both builds' children; `make test-pure` (RELAYMQ_PURE_PYTHON=1) only the
#: interpreted one, which is what it is for (the compiled child ran in `make test`)
BUILDS = ["pure"] if os.environ.get("RELAYMQ_PURE_PYTHON") else ["compiled", "pure"]


@pytest.fixture(scope="module", params=BUILDS)
def broker(request: Any, tmp_path_factory: Any) -> Iterator[BrokerProcess]:
    require_build(request.param)
    bp = BrokerProcess(tmp_path_factory.mktemp(f"bad-input-{request.param}"), request.param,
                       STOMP_OPTIONS)
    bp.start()
    yield bp
    bp.stop()


class Bystanders:
    """An AMQP and a STOMP client connected before the bad input; each must still
    send and receive afterwards."""

    def __init__(self, bp: BrokerProcess) -> None:
        self.bp = bp
        self.amqp = BlockingConnection(f"127.0.0.1:{bp.amqp_port}", timeout=10)
        self.stomp = stomp.Connection12([("127.0.0.1", bp.stomp_port)], heartbeats=(0, 0),
                                        reconnect_attempts_max=1)
        self.got: list[str] = []
        self.cond = threading.Condition()
        outer = self

        class Listener(stomp.ConnectionListener):
            def on_message(self, frame: Any) -> None:
                with outer.cond:
                    outer.got.append(frame.body)
                    outer.cond.notify_all()

        self.stomp.set_listener("", Listener())
        self.stomp.connect(wait=True)
        self.stomp.subscribe("/queue/bystander.stomp", id="1", ack="auto")
        self.rounds = 0

    def still_served(self) -> None:
        assert self.bp.alive(), self.bp.describe_death()
        self.rounds += 1
        body = f"still here {self.rounds}"
        sender = self.amqp.create_sender("queue://bystander.amqp")
        sender.send(proton.Message(body=body))
        receiver = self.amqp.create_receiver("queue://bystander.amqp")
        msg = receiver.receive(timeout=10)
        receiver.accept()
        assert msg.body == body
        sender.close()
        receiver.close()
        self.stomp.send("/queue/bystander.stomp", body)
        with self.cond:
            assert self.cond.wait_for(lambda: body in self.got, 10), f"STOMP bystander got {self.got}"
        assert self.bp.alive(), self.bp.describe_death()

    def close(self) -> None:
        for close in (self.amqp.close, self.stomp.disconnect):
            try:
                close()
            except Exception:  # noqa: BLE001 - the assertions above say what went wrong
                pass


@pytest.fixture
def bystanders(broker: BrokerProcess) -> Iterator[Bystanders]:
    broker.ensure_running()  # an earlier case may have killed it (and failed)
    by = Bystanders(broker)
    yield by
    by.close()


# -- AMQP by hand -----------------------------------------------------------------------------------

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"


def frame(body: bytes, channel: int = 0) -> bytes:
    return struct.pack(">IBBH", 8 + len(body), 2, 0, channel) + body


def performative(code: int, fields: bytes, count: int) -> bytes:
    """A described list32 performative around already encoded fields."""
    return b"\x00\x53" + bytes([code]) + b"\xd0" + struct.pack(">II", 4 + len(fields), count) + fields


def open_with_properties(value: bytes) -> bytes:
    """An open frame whose `properties` field (the tenth) is the raw `value`."""
    fields = encode("bad-input") + b"\x40" * 8 + value
    return frame(performative(0x10, fields, 10))


def read_frames(bp: BrokerProcess, sock: socket.socket, timeout: float = 30) -> list[Any]:
    """Decoded performatives the broker sent until it closed the socket."""
    data = b""
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"the broker kept the connection open; got {data[:300]!r}")
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    _wait_alive(bp)
    assert data.startswith(AMQP_HEADER), data[:100]
    pos, out = 8, []
    while pos + 8 <= len(data):
        size, doff = struct.unpack_from(">IB", data, pos)
        body = data[pos + doff * 4:pos + size]
        if body:
            out.append(decode(body)[0])
        pos += size
    return out


def _wait_alive(bp: BrokerProcess) -> None:
    """A crash shows as a closed socket: say so rather than "no close frame"."""
    if bp.proc is not None:
        try:
            bp.proc.wait(0.3)
        except subprocess.TimeoutExpired:  # still running: the expected case
            pass
    assert bp.alive(), bp.describe_death()


def close_condition(frames: list[Any]) -> tuple[str, str]:
    """(condition, description) of the close frame the broker sent."""
    for f in frames:
        if isinstance(f, Described) and f.descriptor == 0x18:
            error = f.value[0] if f.value else None
            assert isinstance(error, Described), f"close without an error: {f}"
            return str(error.value[0]), str(error.value[1])
    raise AssertionError(f"no close frame in {frames}")


def raw_amqp(bp: BrokerProcess, data: bytes) -> list[Any]:
    with socket.create_connection(("127.0.0.1", bp.amqp_port), timeout=10) as sock:
        sock.sendall(AMQP_HEADER + data)
        return read_frames(bp, sock)


def _nest(innermost: bytes, depth: int, prefix: Callable[[int], bytes]) -> bytes:
    """`depth` levels around `innermost`, each level `prefix(len(what it wraps))`
    followed by what it wraps; built in linear time (one join)."""
    prefixes = []
    size = len(innermost)
    for _ in range(depth):
        head = prefix(size)
        prefixes.append(head)
        size += len(head)
    prefixes.reverse()  # the outermost level first
    return b"".join(prefixes) + innermost


def _nested_lists(depth: int) -> bytes:
    """list32 of one element, `depth` deep, a null inside."""
    return _nest(b"\x40", depth, lambda inner: b"\xd0" + struct.pack(">II", 4 + inner, 1))


def _nested_maps(depth: int) -> bytes:
    """map32 of one entry ("k" -> the next level), `depth` deep, a null inside."""
    return _nest(b"\x40", depth,
                 lambda inner: b"\xd1" + struct.pack(">II", 4 + 3 + inner, 2) + b"\xa1\x01k")


def _nested_arrays(depth: int) -> bytes:
    """An array of one array, `depth` deep (the inner array's constructor is the element
    constructor), an empty array of nulls inside."""
    return _nest(b"\xf0" + struct.pack(">II", 5, 0) + b"\x40", depth,
                 lambda inner: b"\xf0" + struct.pack(">II", 4 + inner, 1))


DEEP_VALUES = {
    # the frame of the report: a descriptor that is itself described, a million deep
    "descriptor chain 1M": b"\x00" * 1_000_000,
    "described values 500k": b"\x00" * 500_000 + b"\x40" * 500_001,
    "nested lists 100k": _nested_lists(100_000),
    "nested maps 50k": _nested_maps(50_000),
    "nested arrays 100k": _nested_arrays(100_000),
}


@pytest.mark.parametrize("case", list(DEEP_VALUES))
def test_deep_amqp_value_in_a_control_frame(broker: BrokerProcess, bystanders: Bystanders,
                                            case: str) -> None:
    frames = raw_amqp(broker, open_with_properties(DEEP_VALUES[case]))
    condition, description = close_condition(frames)
    assert condition == "amqp:decode-error", (condition, description)
    assert "nested" in description or "deep" in description, description
    bystanders.still_served()


OVERSIZED = {
    # list32 claiming 2^31 elements in a few bytes
    "list count 2^31": b"\xd0" + struct.pack(">II", 5, 2**31) + b"\x40",
    "map count 2^31": b"\xd1" + struct.pack(">II", 5, 2**31) + b"\x40",
    # an array of 2^31 nulls: zero bytes per element
    "array of 2^31 nulls": b"\xf0" + struct.pack(">II", 5, 2**31) + b"\x40",
    "string longer than the frame": b"\xb1" + struct.pack(">I", 0xFFFFFFF0) + b"abc",
    "binary longer than the frame": b"\xb0" + struct.pack(">I", 2**31) + b"abc",
    "list size beyond the frame": b"\xd0" + struct.pack(">II", 2**31, 1) + b"\x40",
}


@pytest.mark.parametrize("case", list(OVERSIZED))
def test_oversized_count_or_size_in_a_control_frame(broker: BrokerProcess, bystanders: Bystanders,
                                                    case: str) -> None:
    frames = raw_amqp(broker, open_with_properties(OVERSIZED[case]))
    condition, _ = close_condition(frames)
    assert condition == "amqp:decode-error"
    bystanders.still_served()


def test_truncated_frame_then_hang_up(broker: BrokerProcess, bystanders: Bystanders) -> None:
    """A frame header promising 1000 bytes, 20 of them sent, then the socket closes:
    nothing to answer, nothing to crash."""
    whole = open_with_properties(b"\x40")
    with socket.create_connection(("127.0.0.1", broker.amqp_port), timeout=10) as sock:
        sock.sendall(AMQP_HEADER + struct.pack(">IBBH", 1000, 2, 0, 0) + whole[8:28])
    _wait_alive(broker)
    assert broker.alive(), broker.describe_death()
    bystanders.still_served()


def test_links_attached_and_detached_at_once(broker: BrokerProcess,
                                             bystanders: Bystanders) -> None:
    """A thousand receiver links, each attached and detached again straight away:
    the broker's (asynchronous) work for an attach must not touch a link its detach
    freed already. It did, and the C engine crashed the process."""
    opened = frame(performative(0x10, encode("attach-detach") + b"\x40" + encode(UInt(65536)), 3))
    begun = frame(performative(0x11, b"\x40" + encode(UInt(0)) + encode(UInt(2048))
                               + encode(UInt(2048)), 4))
    source = encode(Described(ULong(0x28), ["attach.detach", UInt(0), None, UInt(0), False,
                                            None, None, None, None, None, None]))
    target = encode(Described(ULong(0x29), [None, UInt(0), None, UInt(0), False, None, None]))
    attach = frame(performative(0x12, encode("l") + encode(UInt(0)) + encode(True)
                                + b"\x40\x40" + source + target, 7))
    detach = frame(performative(0x16, encode(UInt(0)) + encode(True), 2))
    with socket.create_connection(("127.0.0.1", broker.amqp_port), timeout=10) as sock:
        sock.sendall(AMQP_HEADER + opened + begun)
        for _ in range(1000):  # one write each, as a client does
            sock.sendall(attach)
            sock.sendall(detach)
        time.sleep(2)  # let the broker work through them while the connection is open
    _wait_alive(broker)
    assert broker.alive(), broker.describe_death()
    bystanders.still_served()


def test_deep_value_in_the_sasl_layer(broker: BrokerProcess, bystanders: Bystanders) -> None:
    """Before authentication: a sasl-init whose mechanism is a million-deep chain."""
    body = performative(0x41, b"\x00" * 1_000_000, 1)
    data = b"AMQP\x03\x01\x00\x00" + struct.pack(">IBBH", 8 + len(body), 2, 1, 0) + body
    with socket.create_connection(("127.0.0.1", broker.amqp_port), timeout=10) as sock:
        sock.sendall(data)
        got = b""
        sock.settimeout(30)
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            got += chunk
    _wait_alive(broker)
    # the broker hung up, after at most its own SASL header and mechanisms
    assert got == b"" or got.startswith(b"AMQP\x03\x01\x00\x00"), got[:100]
    bystanders.still_served()


# -- a message that carries the bad value -----------------------------------------------------------


def _message(section: int, value: bytes) -> bytes:
    """An encoded message: one section `section` holding `value`, then a data body."""
    return b"\x00\x53" + bytes([section]) + value + b"\x00\x53\x75\xa0\x02ok"


MESSAGES = {
    "annotations: descriptor chain 500k": _message(0x72, b"\x00" * 500_000 + b"\x40" * 500_001),
    "properties: descriptor chain 1M": _message(0x73, b"\x00" * 1_000_000),
    "properties: nested lists 100k": _message(0x73, _nested_lists(100_000)),
    "header: list count 2^31": _message(0x70, b"\xd0" + struct.pack(">II", 5, 2**31) + b"\x40"),
}


def _send_raw(conn: Any, address: str, data: bytes) -> Any:
    """Send `data` as one transfer's payload, bytes as given; return the delivery
    once the broker settled it (or the link, if the broker closed it)."""
    sender = conn.create_sender(address, name=f"raw-{time.monotonic_ns()}")
    link = sender.link
    delivery = link.delivery(b"raw")
    link.stream(data)
    link.advance()
    try:
        conn.wait(lambda: bool(delivery.remote_state) or link.remote_condition is not None,
                  timeout=20, msg="no outcome for the message")
    except LinkDetached:
        pass
    return delivery, link


@pytest.mark.parametrize("case", list(MESSAGES))
def test_bad_message_is_rejected_on_its_link(broker: BrokerProcess, bystanders: Bystanders,
                                             case: str) -> None:
    conn = BlockingConnection(f"127.0.0.1:{broker.amqp_port}", timeout=20)
    try:
        delivery, link = _send_raw(conn, "queue://bad.messages", MESSAGES[case])
        if delivery.remote_state:
            assert delivery.remote_state == proton.Delivery.REJECTED
            assert delivery.remote.condition is not None
            assert delivery.remote.condition.name == "amqp:decode-error", delivery.remote.condition
        else:
            assert link.remote_condition is not None
            assert link.remote_condition.name == "amqp:decode-error", link.remote_condition
        # the same connection still sends good messages on a new link
        conn.create_sender("queue://bad.messages.good").send(proton.Message(body="fine"))
    finally:
        conn.close()
    bystanders.still_served()


def _body(section: int, value: bytes) -> bytes:
    """An encoded message of a durable header and one body section `section` holding `value`."""
    return b"\x00\x53\x70\xc0\x02\x01\x41\x00\x53" + bytes([section]) + value


def _str32(raw: bytes) -> bytes:
    return b"\xb1" + struct.pack(">I", len(raw)) + raw


#: messages every build refuses when they arrive: a consumer's decoder (proton's, a
#: JMS client's) would fail on them at each delivery, so storing them would poison
#: every consumer of the queue
UNDECODABLE = {
    "body: amqp-value nested lists 20k": _body(0x77, _nested_lists(20_000)),
    "body: amqp-sequence nested maps 20k": _body(0x76, _nested_maps(20_000)),
    "body: string cut inside a character": _body(0x77, b"\xa1\x03ab\xc3"),
    "body: long string with a lone continuation byte": _body(0x77, _str32(b"x" * 300 + b"\x80")),
    "body: list holding a string that is not UTF-8": _body(0x77, b"\xc0\x05\x01\xa1\x02\xff\xfe"),
    "body: symbol that is not ASCII": _body(0x77, b"\xa3\x02\xc3\xa9"),
    "body: unknown type code": _body(0x77, b"\xc0\x02\x01\x4f"),
    "application properties: value that is not UTF-8": _message(
        0x74, b"\xc1\x09\x02\xa1\x01k\xa1\x03\xe2\x82\x28"),
    "application properties: nested lists 100k": _message(
        0x74, b"\xd1" + struct.pack(">II", 4 + 7 + len(_nested_lists(100_000)), 2)
        + b"\xa1\x05color" + _nested_lists(100_000)),
    "annotations: key that is not ASCII": _message(0x72, b"\xc1\x06\x02\xa3\x02\xff\xfe\x41"),
    "header: a map, not a list": _message(0x70, b"\xc1\x01\x00"),
    "properties: a string, not a list": _message(0x73, b"\xa1\x02id"),
}


@pytest.mark.parametrize("case", list(UNDECODABLE))
def test_undecodable_message_is_refused_and_the_queue_still_serves(broker: BrokerProcess,
                                                                    bystanders: Bystanders,
                                                                    case: str) -> None:
    """Each build rejects the message with amqp:decode-error when it arrives (the
    interpreted and the compiled build alike), keeps nothing of it, and the
    queue's consumer gets the good message sent after it."""
    address = f"queue://undecodable.{abs(hash(case))}"
    conn = BlockingConnection(f"127.0.0.1:{broker.amqp_port}", timeout=20)
    try:
        delivery, link = _send_raw(conn, address, UNDECODABLE[case])
        assert delivery.remote_state == proton.Delivery.REJECTED, (delivery.remote_state,
                                                                   link.remote_condition)
        condition = delivery.remote.condition
        assert condition is not None and condition.name == "amqp:decode-error", condition
        assert "internal" not in (condition.description or "").lower(), condition.description
        conn.create_sender(address, name="good").send(
            proton.Message(body="good", properties={"color": "red"}, durable=True))
        receiver = conn.create_receiver(address)
        msg = receiver.receive(timeout=20)
        receiver.accept()
        assert msg.body == "good"
        with pytest.raises(proton.Timeout):
            receiver.receive(timeout=0.5)  # the refused message was not kept
    finally:
        conn.close()
    bystanders.still_served()


# -- selectors ------------------------------------------------------------------------------------

#: selector -> what the refusal says (None: a deep but harmless shape the parser
#: folds; the broker may take it, it must answer and stay up)
DEEP_SELECTORS: dict[str, tuple[str, str | None]] = {
    "parentheses": ("(" * DEEP + "a = 1" + ")" * DEEP, "nests"),
    "NOT chain": ("NOT " * DEEP + "a = 1", "nests"),
    "arithmetic chain": ("a" + " + 1" * DEEP + " = 3", "nested"),
    "AND chain": (" AND ".join(["a = 1"] * 20_000), "terms"),
    "sign chain": ("-" * DEEP + "a = 1", None),
}


@pytest.mark.parametrize("case", list(DEEP_SELECTORS))
def test_deep_selector_over_stomp(broker: BrokerProcess, bystanders: Bystanders, case: str) -> None:
    selector, refusal = DEEP_SELECTORS[case]
    with socket.create_connection(("127.0.0.1", broker.stomp_port), timeout=30) as sock:
        sock.sendall(b"CONNECT\naccept-version:1.2\nhost:localhost\n\n\x00")
        sock.sendall(b"SUBSCRIBE\nid:1\ndestination:/queue/deep.sel\nreceipt:sub\nselector:"
                     + selector.encode() + b"\n\n\x00")
        got = b""
        sock.settimeout(30)
        while not any(f.startswith(b"ERROR") or f.startswith(b"RECEIPT")
                      for f in got.split(b"\x00")[1:-1]):
            chunk = sock.recv(65536)
            assert chunk, f"closed without an answer; got {got[:300]!r}"
            got += chunk
    frames = got.split(b"\x00")[1:-1]  # after CONNECTED
    answer = next(f for f in frames if f.startswith(b"ERROR") or f.startswith(b"RECEIPT"))
    if refusal is not None:
        assert answer.startswith(b"ERROR"), answer[:300]
        assert b"selector" in answer.lower() and refusal.encode() in answer, answer[:500]
    bystanders.still_served()


@pytest.mark.parametrize("case", list(DEEP_SELECTORS))
def test_deep_selector_over_amqp(broker: BrokerProcess, bystanders: Bystanders, case: str) -> None:
    from proton.reactor import Filter

    selector, refusal = DEEP_SELECTORS[case]
    # frames large enough for the broker's attach to echo the selector (see the
    # test below for a client whose frames are not)
    conn = BlockingConnection(f"127.0.0.1:{broker.amqp_port}", timeout=30, max_frame_size=4_000_000)
    try:
        jms = Filter({proton.symbol("jms-selector"): proton.Described(
            proton.symbol("apache.org:selector-filter:string"), selector)})
        if refusal is None:
            receiver = conn.create_receiver("queue://deep.sel", options=jms)
            assert receiver.link.remote_source.filter is not None  # the echo came in one frame
            receiver.close()
        else:
            with pytest.raises(LinkDetached) as info:
                conn.create_receiver("queue://deep.sel", options=jms)
            assert "amqp:invalid-field" in str(info.value) and refusal in str(info.value), info.value
        # the connection itself is fine
        snd = conn.create_sender("queue://deep.sel.ok")
        snd.send(proton.Message(body="x"))
    finally:
        conn.close()
    bystanders.still_served()


def test_selector_longer_than_the_clients_frames(broker: BrokerProcess,
                                                 bystanders: Bystanders) -> None:
    """The attach answering a consumer's repeats its selector and cannot be split
    across frames. A selector too long for the client's max-frame-size (proton's
    default is 32 KiB) is refused on its link, with the reason; the connection
    goes on. A link name that long cannot be answered at all: the connection is
    closed with the reason, and no frame the client cannot read is sent."""
    from proton.reactor import Selector

    conn = BlockingConnection(f"127.0.0.1:{broker.amqp_port}", timeout=30)
    try:
        with pytest.raises(LinkDetached) as info:
            conn.create_receiver("queue://long.sel", options=Selector("a = '" + "x" * 40_000 + "'"))
        assert "amqp:invalid-field" in str(info.value) and "too long" in str(info.value), info.value
        sender = conn.create_sender("queue://long.sel")
        sender.send(proton.Message(body="still here"))
        receiver = conn.create_receiver("queue://long.sel", options=Selector("a IS NULL"))
        assert receiver.receive(timeout=20).body == "still here"
        receiver.accept()
    finally:
        conn.close()
    conn = BlockingConnection(f"127.0.0.1:{broker.amqp_port}", timeout=30)
    try:
        with pytest.raises(proton.ConnectionException) as closed:
            conn.create_sender("queue://" + "n" * 40_000)  # proton names the link after it
        assert "max-frame-size" in str(closed.value), closed.value
    finally:
        try:
            conn.close()
        except proton.ConnectionException:
            pass
    bystanders.still_served()


# -- STOMP by hand ----------------------------------------------------------------------------------

STOMP_CONNECT = b"CONNECT\naccept-version:1.2\nhost:localhost\n\n\x00"
#: frames beyond the limits of the broker under test (maxHeaderLength=1100000,
#: maxFrameSize=4000000, 1000 headers), or that no parser may accept: (bytes, what the
#: ERROR frame says)
BAD_STOMP = {
    "content-length beyond every limit": (
        b"SEND\ndestination:/queue/bad\ncontent-length:99999999999999999999\n\nx\x00",
        b"too large"),
    "content-length not a number": (
        b"SEND\ndestination:/queue/bad\ncontent-length:12abc\n\nx\x00", b"content-length"),
    "negative content-length": (
        b"SEND\ndestination:/queue/bad\ncontent-length:-5\n\nx\x00", b"content-length"),
    "content-length without its NUL": (
        b"SEND\ndestination:/queue/bad\ncontent-length:1\n\nxyz\x00", b"content-length"),
    "too many headers": (
        b"SEND\ndestination:/queue/bad\n" + b"".join(b"h%d:v\n" % i for i in range(5000))
        + b"\nx\x00", b"too many headers"),
    "header longer than maxHeaderLength": (
        b"SEND\ndestination:/queue/bad\nh:" + b"v" * 1_200_000 + b"\n\nx\x00", b"too "),
    "header not UTF-8": (b"SEND\ndestination:/queue/\xff\xfe\n\nx\x00", b"utf-8"),
    "frame beyond maxFrameSize": (
        b"SEND\ndestination:/queue/bad\n\n" + b"x" * 4_100_000 + b"\x00", b"too large"),
    "unknown command": (b"SHOUT\n\n\x00", b"shout"),
}


def raw_stomp(bp: BrokerProcess, data: bytes, timeout: float = 30) -> list[bytes]:
    """Connect, send `data`, and return the frames the broker sent until it closed
    the socket (AssertionError if it keeps it open past `timeout`)."""
    got = b""
    with socket.create_connection(("127.0.0.1", bp.stomp_port), timeout=10) as sock:
        sock.sendall(STOMP_CONNECT)
        deadline = time.monotonic() + timeout
        while b"\x00" not in got:  # CONNECTED first, so the bad frame meets a session
            sock.settimeout(max(deadline - time.monotonic(), 0.01))
            chunk = sock.recv(65536)
            assert chunk, f"closed before CONNECTED: {got[:300]!r}"
            got += chunk
        assert got.startswith(b"CONNECTED"), got[:300]
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):  # it stopped reading: its answer is read below
            pass
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"the broker kept the connection open; got {got[:300]!r}")
            sock.settimeout(remaining)
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            except TimeoutError:
                raise AssertionError(f"the broker kept the connection open; got "
                                     f"{got[:300]!r}") from None
            if not chunk:
                break
            got += chunk
    _wait_alive(bp)
    return [f.lstrip(b"\r\n") for f in got.split(b"\x00") if f.strip(b"\r\n")]


@pytest.mark.parametrize("case", list(BAD_STOMP))
def test_bad_stomp_frame_gets_error_and_close(broker: BrokerProcess, bystanders: Bystanders,
                                               case: str) -> None:
    data, says = BAD_STOMP[case]
    frames = raw_stomp(broker, data)
    errors = [f for f in frames[1:] if f.startswith(b"ERROR")]
    assert errors, f"no ERROR frame; got {[f[:200] for f in frames]}"
    assert says in errors[0].lower(), errors[0][:500]
    bystanders.still_served()


def test_truncated_stomp_frame_then_hang_up(broker: BrokerProcess, bystanders: Bystanders) -> None:
    """A SEND promising 1000 body bytes, 3 of them sent, then the socket closes."""
    with socket.create_connection(("127.0.0.1", broker.stomp_port), timeout=10) as sock:
        sock.sendall(STOMP_CONNECT + b"SEND\ndestination:/queue/truncated\ncontent-length:1000"
                     b"\n\nabc")
    _wait_alive(broker)
    bystanders.still_served()
    # nothing of it was accepted: the queue it named stays empty
    assert raw_queue_empty(broker, "/queue/truncated")


def raw_queue_empty(bp: BrokerProcess, destination: str) -> bool:
    """Whether a STOMP consumer of `destination` gets nothing before a marker sent to it."""
    from relaymq.testing.blocking_stomp import BlockingStomp

    c = BlockingStomp(bp.stomp_port)
    try:
        return c.receive_all(destination, timeout=30) == []
    finally:
        c.close()


def test_compiled_child_is_what_it_says(broker: BrokerProcess) -> None:
    """`BrokerProcess` refuses a compiled child that runs interpreted modules."""
    text = broker.output()
    assert "running relaymq: " in text
    assert ("compiled" if broker.build == "compiled" else "pure Python") in text

