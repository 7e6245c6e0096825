"""The one module that touches proton's engine (python-qpid-proton 0.40.0, pinned).

RelayMQ drives proton's protocol engine -- a `pn_connection` bound to a
`pn_transport`, with a `pn_collector` for events -- from the broker's asyncio
loop: bytes from the socket are pushed into the transport, events are pumped
out of the collector, and pending output is written back. Proton's reactor
(`Container`, `MessagingHandler`) is not used: its Python event layer costs
more per message than the whole broker may spend.

We call the C functions through ``cproton_ffi`` (the cffi module the binding
itself is built on) instead of the binding's wrapper classes, which allocate a
Python object per delivery. That layer is not a public API, so the version is
pinned and this module is the only place that knows it; `tests/test_engine.py`
covers what the rest of the plugin relies on.

Terminus capabilities and filters, connection properties and error-condition
info cross this boundary as AMQP-encoded bytes, converted with our own codec
(`pn_data_encode`/`pn_data_decode`), so no pn_data walker is needed.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import proton
from cproton_ffi import ffi, lib

from relaymq_amqp.attach import patch_attaches
from relaymq_amqp.encode import encode
from relaymq_amqp.scanner import decode

PINNED_VERSION = (0, 40, 0)
if tuple(proton.VERSION[:3]) != PINNED_VERSION:  # pragma: no cover - guarded by the pin
    raise ImportError(
        f"relaymq-amqp drives proton's engine through cproton_ffi and is pinned to "
        f"python-qpid-proton=={'.'.join(map(str, PINNED_VERSION))}; found "
        f"{'.'.join(map(str, proton.VERSION))}. Install the pinned version."
    )

NULL: Final = ffi.NULL

# Event types the plugin handles.
CONNECTION_REMOTE_OPEN: Final[int] = lib.PN_CONNECTION_REMOTE_OPEN
CONNECTION_REMOTE_CLOSE: Final[int] = lib.PN_CONNECTION_REMOTE_CLOSE
SESSION_REMOTE_OPEN: Final[int] = lib.PN_SESSION_REMOTE_OPEN
SESSION_REMOTE_CLOSE: Final[int] = lib.PN_SESSION_REMOTE_CLOSE
LINK_REMOTE_OPEN: Final[int] = lib.PN_LINK_REMOTE_OPEN
LINK_REMOTE_CLOSE: Final[int] = lib.PN_LINK_REMOTE_CLOSE
LINK_REMOTE_DETACH: Final[int] = lib.PN_LINK_REMOTE_DETACH
LINK_FLOW: Final[int] = lib.PN_LINK_FLOW
DELIVERY: Final[int] = lib.PN_DELIVERY
TRANSPORT_ERROR: Final[int] = lib.PN_TRANSPORT_ERROR
TRANSPORT_CLOSED: Final[int] = lib.PN_TRANSPORT_CLOSED
TRANSPORT: Final[int] = lib.PN_TRANSPORT

# Delivery states (outcomes).
RECEIVED: Final[int] = lib.PN_RECEIVED
ACCEPTED: Final[int] = lib.PN_ACCEPTED
REJECTED: Final[int] = lib.PN_REJECTED
RELEASED: Final[int] = lib.PN_RELEASED
MODIFIED: Final[int] = lib.PN_MODIFIED

# Terminus settings.
DIST_MODE_COPY: Final[int] = lib.PN_DIST_MODE_COPY
DIST_MODE_MOVE: Final[int] = lib.PN_DIST_MODE_MOVE
NONDURABLE: Final[int] = lib.PN_NONDURABLE
UNSETTLED_STATE = 2
EXPIRE_WITH_LINK: Final[int] = lib.PN_EXPIRE_WITH_LINK
EXPIRE_WITH_SESSION: Final[int] = lib.PN_EXPIRE_WITH_SESSION
EXPIRE_WITH_CONNECTION: Final[int] = lib.PN_EXPIRE_WITH_CONNECTION
EXPIRE_NEVER: Final[int] = lib.PN_EXPIRE_NEVER
SND_UNSETTLED: Final[int] = lib.PN_SND_UNSETTLED
SND_SETTLED: Final[int] = lib.PN_SND_SETTLED
SND_MIXED: Final[int] = lib.PN_SND_MIXED
RCV_FIRST: Final[int] = lib.PN_RCV_FIRST
RCV_SECOND: Final[int] = lib.PN_RCV_SECOND
LOCAL_UNINIT: Final[int] = lib.PN_LOCAL_UNINIT
LOCAL_ACTIVE: Final[int] = lib.PN_LOCAL_ACTIVE
LOCAL_CLOSED: Final[int] = lib.PN_LOCAL_CLOSED
REMOTE_CLOSED: Final[int] = lib.PN_REMOTE_CLOSED

# Direct C calls the hot paths use (no conversion needed).
link_credit: Final[Callable[[Any], int]] = lib.pn_link_credit
link_advance: Final = lib.pn_link_advance
link_current: Final = lib.pn_link_current
link_flow: Final = lib.pn_link_flow
link_get_drain: Final = lib.pn_link_get_drain
link_drained: Final = lib.pn_link_drained
link_is_sender: Final = lib.pn_link_is_sender
link_session: Final = lib.pn_link_session
link_state: Final = lib.pn_link_state
link_queued: Final = lib.pn_link_queued
link_unsettled: Final = lib.pn_link_unsettled
delivery_link: Final = lib.pn_delivery_link
delivery_partial: Final = lib.pn_delivery_partial
delivery_aborted: Final = lib.pn_delivery_aborted
delivery_readable: Final = lib.pn_delivery_readable
delivery_pending: Final = lib.pn_delivery_pending
delivery_settled: Final = lib.pn_delivery_settled
delivery_settle: Final = lib.pn_delivery_settle
delivery_update: Final = lib.pn_delivery_update
delivery_updated: Final = lib.pn_delivery_updated
delivery_remote_state: Final = lib.pn_delivery_remote_state
delivery_local_state: Final = lib.pn_delivery_local_state
session_connection: Final = lib.pn_session_connection

_pn_collector_peek: Final = lib.pn_collector_peek
_pn_collector_pop: Final = lib.pn_collector_pop
_pn_event_type: Final = lib.pn_event_type
_pn_event_delivery: Final = lib.pn_event_delivery
_pn_event_link: Final = lib.pn_event_link
_pn_event_session: Final = lib.pn_event_session
_pn_link_recv: Final = lib.pn_link_recv
_pn_link_send: Final = lib.pn_link_send
_pn_link_advance: Final = lib.pn_link_advance
_pn_delivery: Final = lib.pn_delivery
_from_buffer: Final = ffi.from_buffer
_pack_tag: Final = struct.Struct(">Q").pack_into
_unpack: Final = ffi.unpack


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


# ---------------------------------------------------------------------------
# pn_data <-> AMQP bytes <-> Python
# ---------------------------------------------------------------------------


def _data_get(data: Any) -> Any:
    """The value held by a pn_data (terminus capabilities, filter, properties)."""
    size = lib.pn_data_encoded_size(data)
    if size <= 0:
        return None
    buf = ffi.new("char[]", size)
    n = lib.pn_data_encode(data, buf, size)
    if n <= 0:
        return None
    return decode(_unpack(buf, n))[0]


def _data_set(data: Any, value: Any) -> None:
    lib.pn_data_clear(data)
    if value is None:
        return
    raw = encode(value)
    if lib.pn_data_decode(data, raw, len(raw)) < 0:
        raise ValueError(f"proton refused the encoded value {value!r}")


def _str(p: Any) -> str | None:
    return None if p == NULL else ffi.string(p).decode("utf-8", "replace")


def _set_condition(cond: Any, name: str, description: str | None = None,
                   info: dict[Any, Any] | None = None) -> None:
    lib.pn_condition_set_name(cond, name.encode())
    if description:
        lib.pn_condition_set_description(cond, description.encode("utf-8", "replace"))
    if info:
        _data_set(lib.pn_condition_info(cond), info)


def _get_condition(cond: Any) -> Condition | None:
    if cond == NULL or not lib.pn_condition_is_set(cond):
        return None
    return Condition(
        _str(lib.pn_condition_get_name(cond)) or "",
        _str(lib.pn_condition_get_description(cond)),
        _data_get(lib.pn_condition_info(cond)),
    )


@dataclass(slots=True)
class Condition:
    """An AMQP error condition: `amqp:not-found`, a description, optional info."""

    name: str
    description: str | None = None
    info: Any = None

    def __str__(self) -> str:
        return f"{self.name}: {self.description}" if self.description else self.name


# ---------------------------------------------------------------------------
# Termini
# ---------------------------------------------------------------------------


@dataclass(slots=True)
class Terminus:
    """A source or target as the peer described it (or as we answer it)."""

    address: str | None = None
    dynamic: bool = False
    durable: int = 0  # 0 none, 1 configuration, 2 unsettled-state
    expiry_policy: int = EXPIRE_WITH_LINK
    timeout: int = 0
    distribution_mode: int = 0  # 0 unspecified, 1 copy, 2 move
    capabilities: list[str] = field(default_factory=list)
    filter: dict[str, Any] = field(default_factory=dict)
    dynamic_node_properties: Any = None
    kind: int = 0  # 0 unspecified, 1 source, 2 target, 3 coordinator


def _read_terminus(t: Any) -> Terminus:
    caps = _data_get(lib.pn_terminus_capabilities(t))
    if isinstance(caps, str):
        caps = [caps]
    elif not isinstance(caps, (list, tuple)):
        caps = []  # none, or not symbols (a number): no capabilities
    flt = _data_get(lib.pn_terminus_filter(t))
    return Terminus(
        address=_str(lib.pn_terminus_get_address(t)),
        dynamic=bool(lib.pn_terminus_is_dynamic(t)),
        durable=lib.pn_terminus_get_durability(t),
        expiry_policy=lib.pn_terminus_get_expiry_policy(t),
        timeout=lib.pn_terminus_get_timeout(t),
        distribution_mode=lib.pn_terminus_get_distribution_mode(t),
        capabilities=[str(c) for c in caps if c is not None],
        filter=flt if isinstance(flt, dict) else {},
        dynamic_node_properties=_data_get(lib.pn_terminus_properties(t)),
        kind=lib.pn_terminus_get_type(t),
    )


def _write_terminus(t: Any, term: Terminus | None) -> None:
    """Set a local terminus; None leaves it null (the way to refuse an attach)."""
    if term is None:
        lib.pn_terminus_set_type(t, lib.PN_UNSPECIFIED)
        return
    if term.kind:
        lib.pn_terminus_set_type(t, term.kind)
    lib.pn_terminus_set_address(t, term.address.encode() if term.address is not None else NULL)
    lib.pn_terminus_set_dynamic(t, term.dynamic)
    lib.pn_terminus_set_durability(t, term.durable)
    lib.pn_terminus_set_expiry_policy(t, term.expiry_policy)
    lib.pn_terminus_set_timeout(t, term.timeout)
    lib.pn_terminus_set_distribution_mode(t, term.distribution_mode)
    from relaymq_amqp.encode import symbol_array

    _data_set(lib.pn_terminus_capabilities(t),
              symbol_array(term.capabilities) if term.capabilities else None)
    _data_set(lib.pn_terminus_filter(t), term.filter or None)
    if term.dynamic_node_properties is not None:
        _data_set(lib.pn_terminus_properties(t), term.dynamic_node_properties)


def remote_source(link: Any) -> Terminus:
    return _read_terminus(lib.pn_link_remote_source(link))


def remote_target(link: Any) -> Terminus:
    return _read_terminus(lib.pn_link_remote_target(link))


def set_source(link: Any, term: Terminus | None) -> None:
    _write_terminus(lib.pn_link_source(link), term)


def set_target(link: Any, term: Terminus | None) -> None:
    _write_terminus(lib.pn_link_target(link), term)


# ---------------------------------------------------------------------------
# Links
# ---------------------------------------------------------------------------


def link_name(link: Any) -> str:
    return _str(lib.pn_link_name(link)) or ""


def link_remote_snd_settle_mode(link: Any) -> int:
    return lib.pn_link_remote_snd_settle_mode(link)


def link_remote_rcv_settle_mode(link: Any) -> int:
    return lib.pn_link_remote_rcv_settle_mode(link)


def link_remote_max_message_size(link: Any) -> int:
    return lib.pn_link_remote_max_message_size(link)


def link_remote_properties(link: Any) -> Any:
    data = lib.pn_link_remote_properties(link)
    return None if data == NULL else _data_get(data)


def link_set_properties(link: Any, properties: dict[Any, Any] | None) -> None:
    """Our attach's link properties (keys are usually `types.Symbol`)."""
    _data_set(lib.pn_link_properties(link), properties or None)


def link_open(link: Any, snd_settle_mode: int | None = None, rcv_settle_mode: int | None = None,
              max_message_size: int = 0) -> None:
    if snd_settle_mode is not None:
        lib.pn_link_set_snd_settle_mode(link, snd_settle_mode)
    if rcv_settle_mode is not None:
        lib.pn_link_set_rcv_settle_mode(link, rcv_settle_mode)
    if max_message_size:
        lib.pn_link_set_max_message_size(link, max_message_size)
    lib.pn_link_open(link)


def link_close(link: Any, condition: Condition | None = None) -> None:
    if condition is not None:
        _set_condition(lib.pn_link_condition(link), condition.name, condition.description,
                       condition.info)
    lib.pn_link_close(link)


def link_detach(link: Any, condition: Condition | None = None) -> None:
    if condition is not None:
        _set_condition(lib.pn_link_condition(link), condition.name, condition.description,
                       condition.info)
    lib.pn_link_detach(link)


def link_remote_condition(link: Any) -> Condition | None:
    return _get_condition(lib.pn_link_remote_condition(link))


def link_remote_closed(link: Any) -> bool:
    return bool(lib.pn_link_state(link) & REMOTE_CLOSED)


def link_local_closed(link: Any) -> bool:
    return bool(lib.pn_link_state(link) & LOCAL_CLOSED)


def link_free(link: Any) -> None:
    lib.pn_link_free(link)


def link_set_drain(link: Any, drain: bool) -> None:
    lib.pn_link_set_drain(link, drain)


def link_drain(link: Any, credit: int) -> None:
    lib.pn_link_drain(link, credit)


def take_transfer(engine: Any, link: Any, d: Any, parts: list[bytes]) -> bytes | None:
    """The bytes of a complete transfer `d` on receiver `link`, which is then advanced
    past it; None while it is partial (its frames so far are kept in `parts`), when
    it was aborted (dropped and settled) and for an update of a delivery already taken."""
    n = delivery_pending(d)
    if delivery_partial(d):
        if n:
            parts.append(engine.recv(link, n))
        return None
    if delivery_aborted(d):
        parts.clear()
        link_advance(link)
        delivery_settle(d)
        return None
    if n == 0 and not parts:
        return None
    data = engine.recv(link, n) if n else b""
    if parts:
        parts.append(data)
        data = b"".join(parts)
        parts.clear()
    return data


def sender(session: Any, name: str) -> Any:
    return lib.pn_sender(session, name.encode())


def receiver(session: Any, name: str) -> Any:
    return lib.pn_receiver(session, name.encode())


# ---------------------------------------------------------------------------
# Sessions
# ---------------------------------------------------------------------------


def session_open(session: Any, incoming_capacity: int = 0) -> None:
    if incoming_capacity:
        lib.pn_session_set_incoming_capacity(session, incoming_capacity)
    lib.pn_session_open(session)


def session_close(session: Any, condition: Condition | None = None) -> None:
    if condition is not None:
        _set_condition(lib.pn_session_condition(session), condition.name, condition.description,
                       condition.info)
    lib.pn_session_close(session)


def session_free(session: Any) -> None:
    lib.pn_session_free(session)


def session_remote_condition(session: Any) -> Condition | None:
    return _get_condition(lib.pn_session_remote_condition(session))


# ---------------------------------------------------------------------------
# Deliveries
# ---------------------------------------------------------------------------


def send(link: Any, tag: bytes, data: bytes) -> Any:
    """Create a delivery on a sender link, write `data` and advance; returns it.
    (The broker's hot path uses `Engine.send`, which reuses one tag buffer.)"""
    d = _pn_delivery(link, (len(tag), _from_buffer(tag)))
    _pn_link_send(link, data, len(data))
    link_advance(link)
    return d


def delivery_tag(delivery: Any) -> bytes:
    t = lib.pn_delivery_tag(delivery)
    return _unpack(t.start, t.size)


def settle_with(delivery: Any, state: int, condition: Condition | None = None,
                failed: bool = False, undeliverable: bool = False) -> None:
    """Set our outcome on a delivery (with an error condition for `rejected`) and settle it."""
    local = lib.pn_delivery_local(delivery)
    if condition is not None:
        _set_condition(lib.pn_disposition_condition(local), condition.name, condition.description,
                       condition.info)
    if state == MODIFIED:
        lib.pn_disposition_set_failed(local, failed)
        lib.pn_disposition_set_undeliverable(local, undeliverable)
    lib.pn_delivery_update(delivery, state)
    lib.pn_delivery_settle(delivery)


def settle_with_data(delivery: Any, state: int, data: list[Any]) -> None:
    """Set a delivery state proton does not model (`declared`, `transactional-state`):
    its descriptor code and its fields; then settle."""
    _data_set(lib.pn_disposition_data(lib.pn_delivery_local(delivery)), data)
    lib.pn_delivery_update(delivery, state)
    lib.pn_delivery_settle(delivery)


def remote_state_data(delivery: Any) -> Any:
    """The fields of the peer's delivery state when proton does not model it
    (`transactional-state`: [txn-id, outcome]); None when there are none."""
    return _data_get(lib.pn_disposition_data(lib.pn_delivery_remote(delivery)))


def remote_modified_flags(delivery: Any) -> tuple[bool, bool]:
    """(delivery-failed, undeliverable-here) of the peer's `modified` outcome."""
    remote = lib.pn_delivery_remote(delivery)
    return bool(lib.pn_disposition_is_failed(remote)), bool(lib.pn_disposition_is_undeliverable(remote))


def remote_rejected_condition(delivery: Any) -> Condition | None:
    return _get_condition(lib.pn_disposition_condition(lib.pn_delivery_remote(delivery)))


# ---------------------------------------------------------------------------
# The connection engine
# ---------------------------------------------------------------------------


class DeliveryHandler:
    """A link's receiver of delivery events: `Engine.pump` hands a delivery of a
    link in the handler's `links` dict straight to it (a native call in the
    compiled build: no attribute lookup by name per message)."""

    def on_delivery(self, delivery: Any) -> None: ...

    def on_disposition(self, delivery: Any, number: int) -> None:
        """An event on a delivery of the handler's `sent_deliveries` entry (see `Engine.pump`),
        with the number the entry holds."""
        self.on_delivery(delivery)


class Handler:
    """What `Engine.pump` calls; every method is optional."""

    def on_connection_remote_open(self) -> None: ...
    def on_connection_remote_close(self) -> None: ...
    def on_session_remote_open(self, session: Any) -> None: ...
    def on_session_remote_close(self, session: Any) -> None: ...
    def on_link_remote_open(self, link: Any) -> None: ...
    def on_link_remote_close(self, link: Any, closed: bool) -> None: ...
    def on_link_flow(self, link: Any) -> None: ...
    def on_delivery(self, link: Any, delivery: Any) -> None: ...
    def on_transport_error(self) -> None: ...
    def on_transport_closed(self) -> None: ...


class Engine:
    """One AMQP connection's engine: bytes in, events out, bytes back.

    `server=True` makes a listening-side transport; it must receive the AMQP
    protocol header first (RelayMQ answers SASL itself, before this layer).
    """

    def __init__(self, *, server: bool, max_frame_size: int = 0, channel_max: int | None = None,
                 idle_timeout_ms: int = 0, trace: bool = False) -> None:
        self.connection = lib.pn_connection()
        self.transport = lib.pn_transport()
        self.collector = lib.pn_collector()
        lib.pn_connection_collect(self.connection, self.collector)
        t = self.transport
        if server:
            lib.pn_transport_set_server(t)
        if max_frame_size:
            lib.pn_transport_set_max_frame(t, max_frame_size)
        if channel_max is not None:
            lib.pn_transport_set_channel_max(t, channel_max)
        if idle_timeout_ms:
            lib.pn_transport_set_idle_timeout(t, idle_timeout_ms)
        if trace:
            lib.pn_transport_trace(t, lib.PN_TRACE_FRM)
        lib.pn_transport_bind(t, self.connection)
        self._outbuf = ffi.new("char[]", 65536)
        self._outsize = 65536
        self._inbuf = ffi.new("char[]", 16384)
        self._insize = 16384
        self._tagbuf = ffi.new("char[8]")
        self._tagstruct = ffi.new("pn_delivery_tag_t*")
        self._tagstruct.size = 8
        self._tagstruct.start = self._tagbuf
        self._tag = self._tagstruct[0]
        self._tagview = ffi.buffer(self._tagbuf)
        self._freed = False
        #: link name -> (offered, desired) capabilities to write into its attach
        #: (proton cannot; see `attach.patch_attaches`). Empty but for link set-up.
        self.attach_patches: dict[str, Any] = {}

    # -- connection endpoint ---------------------------------------------------
    @property
    def remote_container(self) -> str | None:
        return _str(lib.pn_connection_remote_container(self.connection))

    @property
    def remote_hostname(self) -> str | None:
        return _str(lib.pn_connection_remote_hostname(self.connection))

    @property
    def remote_desired_capabilities(self) -> list[str]:
        return _symbols(_data_get(lib.pn_connection_remote_desired_capabilities(self.connection)))

    @property
    def remote_offered_capabilities(self) -> list[str]:
        return _symbols(_data_get(lib.pn_connection_remote_offered_capabilities(self.connection)))

    @property
    def remote_properties(self) -> Any:
        return _data_get(lib.pn_connection_remote_properties(self.connection))

    @property
    def remote_condition(self) -> Condition | None:
        return _get_condition(lib.pn_connection_remote_condition(self.connection))

    @property
    def remote_idle_timeout_ms(self) -> int:
        return lib.pn_transport_get_remote_idle_timeout(self.transport)

    @property
    def remote_max_frame_size(self) -> int:
        return lib.pn_transport_get_remote_max_frame(self.transport)

    @property
    def remote_channel_max(self) -> int:
        return lib.pn_transport_remote_channel_max(self.transport)

    @property
    def local_closed(self) -> bool:
        return bool(lib.pn_connection_state(self.connection) & LOCAL_CLOSED)

    @property
    def local_active(self) -> bool:
        return bool(lib.pn_connection_state(self.connection) & LOCAL_ACTIVE)

    @property
    def remote_uninit(self) -> bool:
        """No open from the peer has reached proton yet."""
        return bool(lib.pn_connection_state(self.connection) & lib.PN_REMOTE_UNINIT)

    def open(self, *, container_id: str, hostname: str | None = None,
             offered_capabilities: list[str] | None = None,
             desired_capabilities: list[str] | None = None,
             properties: dict[Any, Any] | None = None,
             user: str | None = None, password: str | None = None) -> None:
        from relaymq_amqp.encode import symbol_array

        c = self.connection
        lib.pn_connection_set_container(c, container_id.encode())
        if hostname:
            lib.pn_connection_set_hostname(c, hostname.encode())
        if offered_capabilities:
            _data_set(lib.pn_connection_offered_capabilities(c), symbol_array(offered_capabilities))
        if desired_capabilities:
            _data_set(lib.pn_connection_desired_capabilities(c), symbol_array(desired_capabilities))
        if properties:
            _data_set(lib.pn_connection_properties(c), properties)
        lib.pn_connection_open(c)

    def close(self, condition: Condition | None = None) -> None:
        c = self.connection
        if condition is not None:
            _set_condition(lib.pn_connection_condition(c), condition.name, condition.description,
                           condition.info)
        lib.pn_connection_close(c)

    def session(self) -> Any:
        return lib.pn_session(self.connection)

    # -- bytes ----------------------------------------------------------------------
    def push(self, data: bytes) -> bool:
        """Feed received bytes; False when the transport will take no more input."""
        t = self.transport
        n = len(data)
        if n == 0:
            return True
        r = lib.pn_transport_push(t, data, n)
        if r == n:
            return True
        view = memoryview(data)
        done = 0
        while True:
            if r < 0:
                return False
            if r == 0:
                return lib.pn_transport_capacity(t) >= 0
            done += r
            if done >= n:
                return True
            chunk = view[done:]
            r = lib.pn_transport_push(t, _from_buffer(chunk), n - done)

    def output(self) -> bytes | None:
        """Pending output (None when there is none, or the head is closed)."""
        t = self.transport
        n = lib.pn_transport_pending(t)
        if n <= 0:
            return None
        if n > self._outsize:
            self._outsize = max(n, self._outsize * 2)
            self._outbuf = ffi.new("char[]", self._outsize)
        buf = self._outbuf
        got = lib.pn_transport_peek(t, buf, n)
        if got < 0:
            return None
        out = _unpack(buf, n)
        lib.pn_transport_pop(t, n)
        if self.attach_patches:
            out = patch_attaches(out, self.attach_patches)
        return out

    def send(self, link: Any, tag: int, data: bytes) -> Any:
        """`send` with an integer tag written into a reused buffer: proton copies
        the tag, so no Python bytes or cffi buffer is made per delivery."""
        _pack_tag(self._tagview, 0, tag)
        d = _pn_delivery(link, self._tag)
        _pn_link_send(link, data, len(data))
        _pn_link_advance(link)
        return d

    def recv(self, link: Any, size: int) -> bytes:
        """Read up to `size` bytes of the link's current delivery."""
        if size > self._insize:
            self._insize = max(size, self._insize * 2)
            self._inbuf = ffi.new("char[]", self._insize)
        n = _pn_link_recv(link, self._inbuf, size)
        return _unpack(self._inbuf, n) if n > 0 else b""

    def close_tail(self) -> None:
        """The peer's byte stream ended."""
        lib.pn_transport_close_tail(self.transport)

    def close_head(self) -> None:
        lib.pn_transport_close_head(self.transport)

    @property
    def head_closed(self) -> bool:
        return lib.pn_transport_pending(self.transport) < 0

    @property
    def closed(self) -> bool:
        return bool(lib.pn_transport_closed(self.transport))

    @property
    def transport_condition(self) -> Condition | None:
        return _get_condition(lib.pn_transport_condition(self.transport))

    def tick(self, now_ms: int | None = None) -> int:
        """Run the idle-timeout clock; returns the next deadline (monotonic ms) or 0."""
        return lib.pn_transport_tick(self.transport, monotonic_ms() if now_ms is None else now_ms)

    # -- events ---------------------------------------------------------------------
    def pump(self, h: Any) -> None:
        """Dispatch every collected event to `h` (see `Handler`). Deliveries,
        the one event per message, take the short way: when `h` has a `links`
        dict (proton link -> `DeliveryHandler`), straight to
        the link's handler; deliveries of other links go to ``h.on_delivery``.
        When `h` also has a `sent_deliveries` dict (a delivery it sent and has not settled
        -> (its link's handler, a number of the handler's)), an event on such
        a delivery, the peer's disposition, goes to that handler's
        `on_disposition` without asking proton for the delivery's link."""
        col = self.collector
        peek = _pn_collector_peek
        pop = _pn_collector_pop
        etype = _pn_event_type
        event_delivery = _pn_event_delivery
        links: dict[Any, DeliveryHandler] | None = getattr(h, "links", None)
        sent: dict[Any, tuple[DeliveryHandler, int]] | None = getattr(h, "sent_deliveries", None)
        on_delivery = h.on_delivery
        dispatch = self._dispatch
        while True:
            ev = peek(col)
            if not ev:
                return
            try:
                # Only a delivery event has a delivery: asking for it first saves
                # asking for the type of the one event each message causes.
                d = event_delivery(ev)
                if d:
                    entry = sent.get(d) if sent is not None else None
                    if entry is not None:
                        entry[0].on_disposition(d, entry[1])
                    elif links is not None:
                        link = delivery_link(d)
                        handler = links.get(link)
                        if handler is not None:
                            handler.on_delivery(d)
                        else:  # a link outside the dict (a transaction coordinator)
                            on_delivery(link, d)
                    else:
                        on_delivery(delivery_link(d), d)
                else:
                    t = etype(ev)
                    if t != TRANSPORT:
                        dispatch(h, ev, t)
            finally:
                pop(col)

    @staticmethod
    def _dispatch(h: Any, ev: Any, t: int) -> None:
        if t == LINK_FLOW:
            h.on_link_flow(_pn_event_link(ev))
        elif t == LINK_REMOTE_OPEN:
            h.on_link_remote_open(_pn_event_link(ev))
        elif t == LINK_REMOTE_CLOSE:
            h.on_link_remote_close(_pn_event_link(ev), True)
        elif t == LINK_REMOTE_DETACH:
            h.on_link_remote_close(_pn_event_link(ev), False)
        elif t == SESSION_REMOTE_OPEN:
            h.on_session_remote_open(_pn_event_session(ev))
        elif t == SESSION_REMOTE_CLOSE:
            h.on_session_remote_close(_pn_event_session(ev))
        elif t == CONNECTION_REMOTE_OPEN:
            h.on_connection_remote_open()
        elif t == CONNECTION_REMOTE_CLOSE:
            h.on_connection_remote_close()
        elif t == TRANSPORT_ERROR:
            h.on_transport_error()
        elif t == TRANSPORT_CLOSED:
            h.on_transport_closed()

    def free(self) -> None:
        """Release proton's memory for this connection (after the socket closed)."""
        if self._freed:
            return
        self._freed = True
        # pn_connection() and pn_transport() each return one reference that is
        # ours: release the endpoints, then drop both references (releasing
        # alone keeps the connection, its links and its deliveries alive).
        lib.pn_transport_unbind(self.transport)
        lib.pn_connection_release(self.connection)
        lib.pn_collector_release(self.collector)
        lib.pn_collector_free(self.collector)
        lib.pn_decref(self.connection)
        lib.pn_decref(self.transport)


def _symbols(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(v) for v in value if v is not None]
    return []
