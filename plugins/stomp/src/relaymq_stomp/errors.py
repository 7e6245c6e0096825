"""STOMP errors: which ones end the connection and which do not.

ActiveMQ keeps a connection open after an ERROR caused by a well-formed frame
that asked for something impossible (a missing destination, a bad selector, an
unknown ack id or transaction, a frame before CONNECT), and closes it when the
byte stream itself cannot be trusted any more (garbage, an unknown command, a
bad ``content-length``, a limit exceeded) or when CONNECT is refused. The two
classes below carry that decision, so handlers only choose which one to raise.
"""

from __future__ import annotations


class StompError(Exception):
    """A frame was refused: the client gets an ERROR and the connection stays."""

    fatal = False

    def __init__(self, message: str, detail: str = "", headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        #: longer explanation sent as the ERROR frame's body
        self.detail = detail
        #: extra ERROR headers (``version`` on a failed negotiation)
        self.headers = headers or {}


class ProtocolError(StompError):
    """The stream cannot continue: the client gets an ERROR and the connection closes."""

    fatal = True


class FrameError(ProtocolError):
    """The parser met bytes that are not a STOMP frame or exceed a limit."""
