"""Connector options from the URI query (`stomp://0.0.0.0:61613?name=value&...`).

Option names are ActiveMQ's where ActiveMQ has one, so an `activemq.xml`
connector line works unchanged; the TLS options (`certFile`, `keyFile`, ...)
are read by the kernel's `ConnectorContext.ssl_context()`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from relaymq.errors import ConfigError
from relaymq.spi.transport import ConnectorContext

from .codec import Limits

SERVER_NAME = "RelayMQ"


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

        def num(name: str, current: int) -> int:
            raw = ctx.option(name)
            if raw is None:
                return current
            try:
                value = int(raw)
            except ValueError:
                raise ConfigError(f"connector {ctx.uri.raw}: {name}={raw!r} is not an integer") from None
            if value < 0:
                raise ConfigError(f"connector {ctx.uri.raw}: {name} must not be negative")
            return value

        lim.max_data_length = num("wireFormat.maxDataLength", lim.max_data_length)
        lim.max_frame_size = num("wireFormat.maxFrameSize",
                                 max(lim.max_frame_size, lim.max_data_length + 1024 * 1024))
        lim.max_headers = num("wireFormat.maxHeaders", lim.max_headers)
        lim.max_header_length = num("wireFormat.maxHeaderLength", lim.max_header_length)
        lim.max_command_length = num("wireFormat.maxCommandLength", lim.max_command_length)
        o.max_connections = num("maximumConnections", o.max_connections)
        o.connect_timeout_ms = num("transport.connectAttemptTimeout", o.connect_timeout_ms)
        o.write_buffer_high = num("transport.writeBufferHighWaterMark", o.write_buffer_high)
        o.max_pending_frames = max(num("transport.maxPendingFrames", o.max_pending_frames), 1)
        hb = ctx.option("transport.defaultHeartBeat")
        if hb is not None:
            try:
                cx, cy = (int(x) for x in hb.split(","))
                if cx < 0 or cy < 0:
                    raise ValueError
            except ValueError:
                raise ConfigError(f"connector {ctx.uri.raw}: transport.defaultHeartBeat={hb!r} "
                                  "should be two non-negative numbers of ms, e.g. 5000,0") from None
            o.default_heart_beat = (cx, cy)
        grace = ctx.option("transport.hbGracePeriodMultiplier")
        if grace is not None:
            try:
                o.hb_grace_multiplier = float(grace)
            except ValueError:
                raise ConfigError(f"connector {ctx.uri.raw}: transport.hbGracePeriodMultiplier="
                                  f"{grace!r} is not a number") from None
            if o.hb_grace_multiplier < 1.0:
                raise ConfigError(f"connector {ctx.uri.raw}: transport.hbGracePeriodMultiplier "
                                  "must be at least 1.0")
        return o
