"""STOMP destination names <-> kernel `Destination`s, with ActiveMQ's conventions.

`/queue/NAME`, `/topic/NAME`; a name without a prefix is a queue; a comma
separates the parts of a composite destination, each with its own prefix.
`/temp-queue/NAME` and `/temp-topic/NAME` name a temporary destination *of this
connection*: the first use creates it, and other connections see it (in a
`reply-to`) as `/remote-temp-queue/<broker name>`, which they can send to.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Final

from relaymq.model.destination import Destination, DestinationKind, InvalidDestination

from .errors import StompError

if TYPE_CHECKING:
    from relaymq.broker.connection import ClientConnection

_PREFIXES: tuple[tuple[str, DestinationKind, bool], ...] = (
    ("/queue/", DestinationKind.QUEUE, False),
    ("/topic/", DestinationKind.TOPIC, False),
    ("/temp-queue/", DestinationKind.TEMP_QUEUE, True),
    ("/temp-topic/", DestinationKind.TEMP_TOPIC, True),
    ("/remote-temp-queue/", DestinationKind.TEMP_QUEUE, False),
    ("/remote-temp-topic/", DestinationKind.TEMP_TOPIC, False),
)
_KIND_PREFIX: Final = {
    DestinationKind.QUEUE: "/queue/",
    DestinationKind.TOPIC: "/topic/",
    DestinationKind.TEMP_QUEUE: "/remote-temp-queue/",
    DestinationKind.TEMP_TOPIC: "/remote-temp-topic/",
}
_KERNEL_PREFIX: Final = {
    DestinationKind.QUEUE: "queue://",
    DestinationKind.TOPIC: "topic://",
    DestinationKind.TEMP_QUEUE: "temp-queue://",
    DestinationKind.TEMP_TOPIC: "temp-topic://",
}


def _split(text: str) -> tuple[DestinationKind, str, bool]:
    """Kind, bare name and whether the name is a connection-local temp name."""
    t = text.strip()
    for prefix, kind, local in _PREFIXES:
        if t.startswith(prefix):
            return kind, t[len(prefix):], local
    return DestinationKind.QUEUE, t, False


@lru_cache(maxsize=8192)
def _shared(kind: DestinationKind, name: str) -> Destination:
    """One `Destination` object per name for every connection."""
    return Destination(kind, name)


@lru_cache(maxsize=4096)
def stomp_name(dest: Destination) -> str:
    """A destination as any connection other than a temp's owner writes it."""
    if dest.is_composite:
        return ",".join(stomp_name(p) for p in dest.composite_parts())
    return _KIND_PREFIX[dest.kind] + dest.name


def stomp_name_of_key(key: str) -> str:
    """`queue://A` (a kernel destination key, e.g. a DLQ's origin) -> `/queue/A`."""
    try:
        return stomp_name(Destination.parse(key))
    except InvalidDestination:
        return key


class DestinationMapper:
    """Per-connection translation; knows this connection's temporary destinations."""

    __slots__ = ("_conn", "_version", "_temps", "_names", "_lines", "_parsed")

    def __init__(self, conn: ClientConnection, version: str = "1.2") -> None:
        self._conn = conn
        self._version = version  # of the session: how `header_line` escapes
        self._temps: dict[tuple[DestinationKind, str], Destination] = {}
        self._names: dict[Destination, str] = {}  # own temps -> the name the client used
        self._lines: dict[Destination, bytes] = {}
        #: header text -> destination; a producer names the same few destinations on
        #: every SEND, and handing the kernel the same object makes its dict lookups
        #: identity hits
        self._parsed: dict[str, Destination] = {}

    def parse(self, text: str | None, header: str = "destination") -> Destination:
        """Parse a destination header; refuse a missing or empty one (not fatal)."""
        if text is None:
            raise StompError(f"missing '{header}' header")
        dest = self._parsed.get(text)
        if dest is None:
            dest = self._parse(text, header)
            if len(self._parsed) >= 1024:
                self._parsed.clear()
            self._parsed[text] = dest
        return dest

    def _parse(self, text: str, header: str) -> Destination:
        if "," in text:
            parts = [self._one(p, header) for p in text.split(",") if p.strip()]
            if not parts:
                raise StompError(f"empty '{header}' header")
            if len(parts) == 1:
                return parts[0]
            first = parts[0]
            rest = [_KERNEL_PREFIX[p.kind] + p.name for p in parts[1:]]
            return Destination(first.kind, ",".join([first.name, *rest]))
        return self._one(text, header)

    def _one(self, text: str, header: str) -> Destination:
        kind, name, local = _split(text)
        if not name.strip():
            raise StompError(f"empty destination name in '{header}:{text}'",
                             "a destination needs a name, e.g. /queue/orders")
        if local:
            dest = self._temps.get((kind, name))
            if dest is None:
                dest = self._conn.create_temporary(kind)
                self._temps[(kind, name)] = dest
                self._names[dest] = _PREFIXES[2 if kind is DestinationKind.TEMP_QUEUE else 3][0] + name
                self._lines.pop(dest, None)
            return dest
        try:
            return _shared(kind, name)
        except InvalidDestination as exc:
            raise StompError(str(exc)) from None

    def name(self, dest: Destination) -> str:
        own = self._names.get(dest)
        return own if own is not None else stomp_name(dest)

    def header_line(self, dest: Destination) -> bytes:
        """`destination:<name>\\n` for a MESSAGE frame, cached per destination."""
        line = self._lines.get(dest)
        if line is None:
            from .frames import escape

            name = self.name(dest).replace("\x00", "\ufffd")  # a NUL would end the frame
            line = f"destination:{escape(name, self._version)}\n".encode()
            if len(self._lines) > 10000:
                self._lines.clear()
            self._lines[dest] = line
        return line
