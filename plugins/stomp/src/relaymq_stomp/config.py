"""Connector options from the URI query (`stomp://0.0.0.0:61613?name=value&...`).

Option names are ActiveMQ's where ActiveMQ has one, so an `activemq.xml`
connector line works unchanged; each is accepted bare or with the
`transport.` / `wireFormat.` prefix ActiveMQ configurations put on it. The TLS
options (`certFile`, `keyFile`, ...) are read by the kernel's
`ConnectorContext.ssl_context()`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from relaymq.errors import ConfigError
from relaymq.spi.transport import ConnectorContext

from .codec import Limits

SERVER_NAME = "RelayMQ"

#: Every URI option: name -> (default as documented, what it does). docs/stomp.md
#: and the README have a row for each (tests/test_docs.py checks).
OPTIONS: dict[str, tuple[str, str]] = {
    "maximumConnections": ("0 (no limit)", "connections beyond this are refused (closed at once)"),
    "maxDataLength": ("104857600", "largest body (bytes); a larger `content-length`, or a body "
                      "without one that grows past this, is an ERROR and the connection closes"),
    "maxFrameSize": ("maxDataLength + 1 MiB", "largest frame, headers and body (bytes); also "
                     "the most a client can make the broker buffer for one incomplete frame"),
    "maxHeaders": ("1000", "headers per frame"),
    "maxHeaderLength": ("10240", "characters in one `name:value` header line"),
    "maxCommandLength": ("1024", "characters in the command line"),
    "defaultHeartBeat": ("0,0", "the heart-beat assumed when CONNECT has none, as if the client "
                         "had sent `heart-beat:<this>` (e.g. `5000,0` drops clients silent for "
                         "5 s x the grace multiplier)"),
    "hbGracePeriodMultiplier": ("1.5", "a client is dropped after this many of its heart-beat "
                                "intervals without a byte"),
    "connectAttemptTimeout": ("30000", "ms a client has to send CONNECT before it is dropped "
                              "(0: wait forever)"),
    "writeBufferHighWaterMark": ("262144", "bytes queued for a slow client before `auto` acks "
                                 "and further writes wait for it"),
    "maxPendingFrames": ("256", "frames read but waiting for the kernel (flow control) before "
                         "the broker stops reading the socket"),
}
#: Read by the kernel (`ConnectorContext.ssl_context`) for `stomp+ssl`.
TLS_OPTIONS: dict[str, str] = {
    "certFile": "PEM certificate chain of the server (`keyStore` is a synonym)",
    "keyStore": "see `certFile`",
    "keyFile": "PEM private key (defaults to the certificate file)",
    "keyPassword": "password of the key",
    "caFile": "CA bundle for client certificates (`trustStore` is a synonym)",
    "trustStore": "see `caFile`",
    "needClientAuth": "`true`: clients must present a certificate",
    "wantClientAuth": "`true`: clients may present a certificate",
}


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("relaymq-stomp")
    except Exception:  # noqa: BLE001 - running from a source tree
        return "0"


@dataclass(slots=True)
class StompOptions:
    limits: Limits = field(default_factory=Limits)
    #: heart-beat assumed when CONNECT has none: `cx,cy` as if the client had sent it
    default_heart_beat: tuple[int, int] = (0, 0)
    #: a client is dropped after `grace * its heart-beat interval` of silence
    hb_grace_multiplier: float = 1.5
    #: refuse connections beyond this many (0: no limit)
    max_connections: int = 0
    #: close a socket that has not sent CONNECT within this many ms (0: never)
    connect_timeout_ms: int = 30000
    #: high-water mark of the transport's write buffer, bytes
    write_buffer_high: int = 256 * 1024
    #: stop reading a socket while this many frames wait to be processed
    max_pending_frames: int = 256
    server: str = field(default_factory=lambda: f"{SERVER_NAME}/{_version()}")

    @classmethod
    def from_context(cls, ctx: ConnectorContext) -> StompOptions:
        o = cls()
        lim = o.limits
        uri = ctx.uri.raw

        def raw(name: str) -> str | None:
            for key in (name, f"transport.{name}", f"wireFormat.{name}"):
                value = ctx.option(key)
                if value is not None:
                    return value
            return None

        def num(name: str, current: int) -> int:
            text = raw(name)
            if text is None:
                return current
            try:
                value = int(text)
            except ValueError:
                raise ConfigError(f"connector {uri}: {name}={text!r} is not an integer") from None
            if value < 0:
                raise ConfigError(f"connector {uri}: {name} must not be negative")
            return value

        lim.max_data_length = num("maxDataLength", lim.max_data_length)
        lim.max_frame_size = num("maxFrameSize", lim.max_data_length + 1024 * 1024)
        lim.max_headers = num("maxHeaders", lim.max_headers)
        lim.max_header_length = num("maxHeaderLength", lim.max_header_length)
        lim.max_command_length = num("maxCommandLength", lim.max_command_length)
        o.max_connections = num("maximumConnections", o.max_connections)
        o.connect_timeout_ms = num("connectAttemptTimeout", o.connect_timeout_ms)
        o.write_buffer_high = num("writeBufferHighWaterMark", o.write_buffer_high)
        o.max_pending_frames = max(num("maxPendingFrames", o.max_pending_frames), 1)
        hb = raw("defaultHeartBeat")
        if hb is not None:
            try:
                cx, cy = (int(x) for x in hb.split(","))
                if cx < 0 or cy < 0:
                    raise ValueError
            except ValueError:
                raise ConfigError(f"connector {uri}: defaultHeartBeat={hb!r} should be two "
                                  "non-negative numbers of ms, e.g. 5000,0") from None
            o.default_heart_beat = (cx, cy)
        grace = raw("hbGracePeriodMultiplier")
        if grace is not None:
            try:
                o.hb_grace_multiplier = float(grace)
            except ValueError:
                raise ConfigError(f"connector {uri}: hbGracePeriodMultiplier={grace!r} is not "
                                  "a number") from None
            if o.hb_grace_multiplier < 1.0:
                raise ConfigError(f"connector {uri}: hbGracePeriodMultiplier must be at least 1.0")
        return o
